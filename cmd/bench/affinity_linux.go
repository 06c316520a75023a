package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs this process may run on
// (sched_getaffinity), in order.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("reading this process's CPU affinity: %w", err)
	}
	return cpuList(&set, nil), nil
}

// cpuList appends the CPUs in set to cpus, in order, without repeats.
func cpuList(set *unix.CPUSet, cpus []int) []int {
	for c, left := 0, set.Count(); left > 0; c++ {
		if set.IsSet(c) {
			left--
			if !slices.Contains(cpus, c) {
				cpus = append(cpus, c)
			}
		}
	}
	slices.Sort(cpus)
	return cpus
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

// threadCPUs returns the CPUs that any thread of this process may run on:
// the union of every thread's affinity, which a process pinned whole
// reports as its pin.
func threadCPUs() ([]int, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("listing this process's threads: %w", err)
	}
	var cpus []int
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue // the thread has exited
		}
		cpus = cpuList(&set, cpus)
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("no thread of this process has a CPU affinity")
	}
	return cpus, nil
}
