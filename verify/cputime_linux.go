package verify

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time the calling OS thread has used, or 0 if
// it cannot be read. The caller must hold runtime.LockOSThread. It reads
// CLOCK_THREAD_CPUTIME_ID, in nanoseconds: getrusage advances by
// scheduler ticks (4 ms), as long as a whole logN 12 computation.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
