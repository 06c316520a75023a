package apitest

import "syscall"

// sysProcAttr puts a server in its own process group, and has the kernel
// kill it when the thread that started it (so, in practice, the test
// process) dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
