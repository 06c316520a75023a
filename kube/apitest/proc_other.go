//go:build !unix

package apitest

import (
	"errors"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup is not supported here; the caller kills the process alone.
func killGroup(int) error { return errors.ErrUnsupported }
