// Package clitest runs an example command as a user runs it, for its
// tests: the test binary itself, running the command's main, with its
// exit code, stdout and stderr.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nodepass/nodepass/internal/testexec"
)

// Main is a command's TestMain. With env set to 1 in its environment,
// the test binary is the command: it runs main, which exits. Otherwise it
// runs the tests and checks that none leaks a goroutine.
func Main(m *testing.M, env string, main func()) {
	if os.Getenv(env) == "1" {
		main() // exits
	}
	goleak.VerifyTestMain(m)
}

// Command returns the command with args, as a user runs it: this test
// binary, with env set to 1. It skips t where the binary cannot be run
// as a command (testexec.SkipUnlessExecutable).
func Command(t testing.TB, ctx context.Context, env string, args ...string) *exec.Cmd {
	t.Helper()
	testexec.SkipUnlessExecutable(t)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), env+"=1")
	return cmd
}

// Run runs the command with args to its end, within a minute, and
// returns its exit code, stdout and stderr.
func Run(t testing.TB, env string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := Command(t, ctx, env, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}
