package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed profiles: the default herd's and the CI check's baseline.
const (
	herdDir = "../../profiles"
	ciDir   = "../../profiles/ci"
)

func runCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestReportAndDiff(t *testing.T) {
	code, stdout, stderr := runCmd("report", filepath.Join(ciDir, "nodepass.cpu.pprof"))
	if code != 0 || !strings.Contains(stdout, "nodes joined") || !strings.Contains(stdout, "top 10 functions, flat:") {
		t.Errorf("report: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd("report", "-markdown", filepath.Join(herdDir, "k3s-latest.cpu.pprof"), filepath.Join(herdDir, "nodepass.cpu.pprof"))
	if code != 0 || !strings.Contains(stdout, "| k3s-latest |") || !strings.Contains(stdout, "| nodepass |") {
		t.Errorf("report -markdown: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd("diff", filepath.Join(herdDir, "k3s-latest.cpu.pprof"), filepath.Join(herdDir, "nodepass.cpu.pprof"))
	if code != 0 || !strings.Contains(stdout, "scrypt work") || !strings.Contains(stdout, "flat share of the top 10") {
		t.Errorf("diff: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestCheck checks the CI baseline against itself (every figure equal,
// every limit met), and against profiles of another scenario, which it
// refuses to compare.
func TestCheck(t *testing.T) {
	code, stdout, stderr := runCmd("check", ciDir, ciDir)
	if code != 0 || !strings.Contains(stdout, "profile check: ok") || !strings.Contains(stdout, "against the baseline") {
		t.Errorf("check against itself: exit %d\n%s%s", code, stdout, stderr)
	}
	other := t.TempDir()
	for _, f := range []string{"nodepass.cpu.pprof", "herd.json"} {
		b, err := os.ReadFile(filepath.Join(herdDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr = runCmd("check", ciDir, other)
	if code != 1 || !strings.Contains(stderr, "the baseline ran") {
		t.Errorf("check against another scenario: exit %d\n%s", code, stderr)
	}
}

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage:"},
		{[]string{"-h"}, 0, "profile report"},
		{[]string{"frob"}, 2, `unknown subcommand "frob"`},
		{[]string{"report"}, 2, "no profile given"},
		{[]string{"report", "-top"}, 2, "flag needs an argument"},
		{[]string{"report", "-h"}, 0, "profile diff"},
		{[]string{"diff", "a.pprof"}, 2, "want two profiles"},
		{[]string{"check", "x"}, 2, "want BASELINE_DIR and NEW_DIR"},
		{[]string{"check", ciDir, t.TempDir()}, 1, "no MODEL.cpu.pprof"},
		{[]string{"report", filepath.Join(t.TempDir(), "none.cpu.pprof")}, 1, "no such file"},
	} {
		code, _, stderr := runCmd(c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("profile %q: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	if code, stdout, _ := runCmd("-version"); code != 0 || !strings.HasPrefix(stdout, "profile ") || !strings.Contains(stdout, "go1.") {
		t.Errorf("profile -version: exit %d, stdout %q; want 0 and the version", code, stdout)
	}
}
