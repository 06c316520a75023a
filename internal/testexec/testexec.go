// Package testexec is for tests that run their own test binary as a
// command (a writer killed at each step, a command's exit codes).
package testexec

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// SkipUnlessExecutable skips t where this test binary cannot be run as
// a command: under a user-mode emulator (go test -exec
// qemu-aarch64-static) with no binfmt_misc entry for the binary's
// architecture, the kernel refuses to execute it (ENOEXEC). Everywhere
// else it does nothing, so the tests it guards run natively in make
// test. It runs the binary once per process, with no test selected.
func SkipUnlessExecutable(t testing.TB) {
	t.Helper()
	once.Do(func() {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
		cmd.Env = append(os.Environ(), probeEnv+"=1")
		execErr = cmd.Run()
	})
	if errors.Is(execErr, syscall.ENOEXEC) {
		t.Skipf("this test runs its own binary as a command, which cannot be executed here: %v", execErr)
	}
}

// probeEnv is set in the probe's environment, for a TestMain that would
// otherwise act on it (none does now).
const probeEnv = "NODEPASS_TESTEXEC_PROBE"

var (
	once    sync.Once
	execErr error
)
