//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

var errNoAffinity = errors.New("pinning a process to CPUs (sched_setaffinity) is Linux only")

func allowedCPUs() ([]int, error)        { return nil, errNoAffinity }
func startPinned(*exec.Cmd, []int) error { return errNoAffinity }
