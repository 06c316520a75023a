//go:build unix

package apitest

import "syscall"

// killGroup sends SIGKILL to the process group pid leads.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
