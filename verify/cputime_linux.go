package verify

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time the calling OS thread has used, or 0 if
// it cannot be read. The caller must hold runtime.LockOSThread.
//
// It reads CLOCK_THREAD_CPUTIME_ID, which counts in nanoseconds: the
// thread's getrusage figures advance by scheduler ticks (4 ms on common
// kernels), as long as a whole logN 12 computation, which made the
// estimates' first measurement anything from 0 to twice the truth.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
