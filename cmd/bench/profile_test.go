package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodepass/nodepass/cmd/internal/pprofreport"
)

// TestProfileDir runs two models in this process with -cpuprofile-dir and
// reads what it wrote.
func TestProfileDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "profiles")
	code, _, stderr := runCmd(t, "-nodes", "12", "-logn", "6", "-mode", "inproc", "-isolate=false",
		"-models", "k3s-latest,nodepass", "-cpuprofile-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, name := range []string{"herd.json", "meta.json", "k3s-latest.cpu.pprof", "k3s-latest.heap.pprof", "nodepass.cpu.pprof", "nodepass.heap.pprof"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	meta, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"Command": "go run ./cmd/bench -nodes 12 -logn 6 -mode inproc -isolate=false -models k3s-latest,nodepass -cpuprofile-dir ` + dir + `"`,
		`"Commit": `, `"Go": "go1.`, `"Machine": `, `"OS": `, `"Scenario": "12 nodes, logN 6, inproc mode`, `"lower_bound_s": `,
	} {
		if !strings.Contains(string(meta), want) {
			t.Errorf("meta.json lacks %s", want)
		}
	}

	r, err := pprofreport.Load(filepath.Join(dir, "nodepass.cpu.pprof"), "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "nodepass" || r.Run == nil || r.Run.Joined != 12 {
		t.Errorf("report: name %q, run %v", r.Name, r.Run)
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
	// -bound-sample 0: the result has no local bound.
	if r.Run == nil || r.Run.Joined != 8 || r.Run.Mode != "http" || r.Run.LocalBound != 0 {
		t.Errorf("run %+v", r.Run)
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
