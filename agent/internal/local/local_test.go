package local

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestShortage(t *testing.T) {
	wrap := func(e error) error {
		return fmt.Errorf("agent: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", e)})
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if !Shortage(wrap(e)) {
			t.Errorf("Shortage(%v) = false", e)
		}
	}
	for _, e := range []error{nil, syscall.ECONNREFUSED, syscall.ECONNRESET, errors.New("x")} {
		if Shortage(wrap(e)) {
			t.Errorf("Shortage(%v) = true", e)
		}
	}
}
