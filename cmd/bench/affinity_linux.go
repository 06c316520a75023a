package main

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs this process may run on
// (sched_getaffinity), in order. Its threads inherit them: a worker that
// startPinned started reports its pin.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("reading this process's CPU affinity: %w", err)
	}
	var cpus []int
	for c, left := 0, set.Count(); left > 0; c++ {
		if set.IsSet(c) {
			left--
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// startPinned starts cmd with its CPU affinity set to cpus: a child
// inherits the affinity of the thread that forks it, so the fork runs on
// a thread locked to this goroutine and pinned first. The thread is never
// unlocked, so it ends with the goroutine and the pin with it.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- fmt.Errorf("pinning to CPUs %v: %w", cpus, err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
