package testexec

import (
	"runtime"
	"testing"
)

// TestRunsNatively: on the machine's own architecture the probe runs the
// binary and nothing is skipped (under qemu-user without binfmt_misc
// this test is skipped itself, which is what the probe is for).
func TestRunsNatively(t *testing.T) {
	SkipUnlessExecutable(t)
	if execErr != nil {
		t.Fatalf("the probe failed on %s/%s: %v", runtime.GOOS, runtime.GOARCH, execErr)
	}
}
