//go:build unix && !linux

package apitest

import "syscall"

// sysProcAttr puts a server in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
