package verify

import "syscall"

// threadCPU returns the CPU time the calling OS thread has used, or 0 if
// it cannot be read. The caller must hold runtime.LockOSThread.
func threadCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
