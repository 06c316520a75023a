package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nodepass/nodepass/cmd/bench/internal/pprofreport"
)

// TestProfileDir runs two models in this process with -cpuprofile-dir and
// reads what it wrote with bench profile.
func TestProfileDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "profiles")
	code, _, stderr := runCmd(t, "-nodes", "12", "-logn", "6", "-mode", "inproc", "-isolate=false",
		"-models", "k3s-latest,nodepass", "-cpuprofile-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, name := range []string{"herd.json", "README.md", "k3s-latest.cpu.pprof", "k3s-latest.heap.pprof", "nodepass.cpu.pprof", "nodepass.heap.pprof"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| command | `go run ./cmd/bench -nodes 12 -logn 6 -mode inproc -isolate=false -models k3s-latest,nodepass -cpuprofile-dir " + dir + "`",
		"| commit | ", "| Go | go1.", "| machine | ", "| OS | ", "12 nodes, logN 6, inproc mode",
		"## Where the CPU goes", "| k3s-latest | 12/12 |", "| nodepass | 12/12 |", "### nodepass",
		"### Categories", "## The CI check: make profile-check", "### Why 200 nodes, and why these tolerances",
	} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md lacks %q", want)
		}
	}

	r, err := pprofreport.Load(filepath.Join(dir, "nodepass.cpu.pprof"), "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "nodepass" || r.Run == nil || r.Run.Joined != 12 || !r.HaveCalls || r.Meta.Verifications != min(runtime.GOMAXPROCS(0), 12)+12 {
		t.Errorf("report: name %q, run %v, calls %v, meta %+v", r.Name, r.Run, r.HaveCalls, r.Meta)
	}

	code, stdout, stderr := runCmd(t, "profile", "report", filepath.Join(dir, "nodepass.cpu.pprof"))
	if code != 0 || !strings.Contains(stdout, "12/12 nodes joined") || !strings.Contains(stdout, "top 10 functions, flat:") {
		t.Errorf("profile report: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd(t, "profile", "report", "-markdown", filepath.Join(dir, "k3s-latest.cpu.pprof"), filepath.Join(dir, "nodepass.cpu.pprof"))
	if code != 0 || !strings.Contains(stdout, "| k3s-latest | 12/12 |") || !strings.Contains(stdout, "| nodepass | 12/12 |") {
		t.Errorf("profile report -markdown: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd(t, "profile", "diff", filepath.Join(dir, "k3s-latest.cpu.pprof"), filepath.Join(dir, "nodepass.cpu.pprof"))
	if code != 0 || !strings.Contains(stdout, "scrypt work") || !strings.Contains(stdout, "flat share of the top 10") {
		t.Errorf("profile diff: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestProfileIsolated profiles a model in its own child process over
// HTTPS: the test binary re-executes itself as the command.
func TestProfileIsolated(t *testing.T) {
	t.Setenv("NODEPASS_BENCH_AS_MAIN", "1")
	dir := t.TempDir()
	code, _, stderr := runCmd(t, "-nodes", "8", "-logn", "5", "-models", "nodepass", "-bound-sample", "0", "-cpuprofile-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	r, err := pprofreport.Load(filepath.Join(dir, "nodepass.cpu.pprof"), "")
	if err != nil {
		t.Fatal(err)
	}
	// -bound-sample 0: one scrypt is measured over 16 verifications
	// anyway (8 here, the herd's size), and the result has no local bound.
	if r.Run == nil || r.Run.Joined != 8 || r.Run.Mode != "http" || r.Run.LocalBound != 0 || r.Meta.Verifications != min(runtime.GOMAXPROCS(0), 8)+8 {
		t.Errorf("run %+v, meta %+v", r.Run, r.Meta)
	}
}

func TestProfileCmdUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"profile"}, 2, "usage:"},
		{[]string{"profile", "-h"}, 0, "bench profile report"},
		{[]string{"profile", "frob"}, 2, `unknown subcommand "frob"`},
		{[]string{"profile", "report"}, 2, "no profile given"},
		{[]string{"profile", "report", "-top"}, 2, "flag needs an argument"},
		{[]string{"profile", "report", "-h"}, 0, "bench profile diff"},
		{[]string{"profile", "diff", "a.pprof"}, 2, "want two profiles"},
		{[]string{"profile", "check"}, 2, "baseline directory"},
		{[]string{"profile", "check", "-nodes", "0", "profiles/ci"}, 2, "-nodes 0"},
		{[]string{"profile", "check", "-json", "x.json", "profiles/ci"}, 2, "-json is set by the check itself"},
		{[]string{"profile", "check", "-nodes", "8", filepath.Join(t.TempDir(), "none")}, 1, "the baseline"},
		{[]string{"profile", "report", filepath.Join(t.TempDir(), "none.cpu.pprof")}, 1, "no such file"},
	} {
		code, _, stderr := runCmd(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("bench %q: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

// TestProfileCheck makes a baseline and checks a run against it. The
// scenario is far too small for the shares to mean anything: the check
// must say so and fail.
func TestProfileCheck(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the check keeps a failed run's files there
	base := filepath.Join(t.TempDir(), "ci")
	scenario := []string{"-nodes", "16", "-logn", "6", "-mode", "inproc", "-models", "nodepass", "-isolate=false"}
	if code, _, stderr := runCmd(t, append(scenario, "-cpuprofile-dir", base)...); code != 0 {
		t.Fatalf("making the baseline: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runCmd(t, append(append([]string{"profile", "check"}, scenario...), base)...)
	if code != 1 || !strings.Contains(stdout, "FAIL samples:") || !strings.Contains(stdout, "profile check: FAILED") ||
		!strings.Contains(stdout, "against the baseline") {
		t.Errorf("profile check: exit %d\n%s%s", code, stdout, stderr)
	}

	other := []string{"-nodes", "8", "-logn", "6", "-mode", "inproc", "-models", "nodepass", "-isolate=false"}
	code, _, stderr = runCmd(t, append(append([]string{"profile", "check"}, other...), base)...)
	if code != 1 || !strings.Contains(stderr, "the baseline ran 16 nodes") || !strings.Contains(stderr, "make the baseline again with") {
		t.Errorf("profile check against another scenario: exit %d\n%s", code, stderr)
	}
}

func TestPrepareProfileDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	c := &config{cpuprofileDir: dir, models: []string{"nodepass"}}
	if err := prepareProfileDir(c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nodepass.cpu.pprof", "nodepass.heap.pprof", "k3s-v1.28.cpu.pprof", "README.md"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("from an earlier run"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := prepareProfileDir(c); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"nodepass.cpu.pprof": false, "nodepass.heap.pprof": false, "k3s-v1.28.cpu.pprof": true, "README.md": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", name, err == nil, want)
		}
	}
	if err := prepareProfileDir(&config{}); err != nil {
		t.Errorf("without -cpuprofile-dir: %v", err)
	}
}
