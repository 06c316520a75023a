// Package local tells a failure of the local host from a failure of the
// server it was talking to.
package local

import (
	"errors"
	"syscall"
)

// Shortage reports whether err is the local host running out of file
// descriptors, buffers or memory. Such an error says nothing of the
// server, so it must not count against the server's health.
func Shortage(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
