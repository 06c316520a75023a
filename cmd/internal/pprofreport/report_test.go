package pprofreport

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/nodepass/nodepass/bench"
)

func TestFromProfile(t *testing.T) {
	// A computation whose samples were taken on entry to asyncPreempt.
	preempted := sample{append([]string{asyncPreempt}, scryptFrames...), scryptLabel}
	spec := cpuSpec{&scryptStack: 60, &preempted: 40, &zeroStack: 8, &cacheStack: 1, &waitStack: 1, &gcStack: 10, &agentStack: 5}
	r, err := FromProfile(cpuProfile(t, spec), "nodepass")
	if err != nil {
		t.Fatal(err)
	}
	ms10 := 10 * time.Millisecond
	if r.Name != "nodepass" || r.Samples != 125 || r.Total != 125*ms10 || r.Hz() != 100 {
		t.Errorf("name %q, %d samples, total %v, %d Hz", r.Name, r.Samples, r.Total, r.Hz())
	}
	// The zeroing of scrypt's buffer is scrypt work by its label.
	if r.CPU[Scrypt] != 108*ms10 || r.CPU[Cache] != ms10 || r.CPU[Request] != ms10 ||
		r.CPU[GC] != 10*ms10 || r.CPU[Runtime] != 0 || r.CPU[Other] != 5*ms10 {
		t.Errorf("by category: %v", r.CPU)
	}
	if r.ScryptLabelled != 108*ms10 {
		t.Errorf("ScryptLabelled = %v; want 1.08s", r.ScryptLabelled)
	}
	if got := r.Share(Scrypt); math.Abs(got-0.864) > 1e-9 {
		t.Errorf("scrypt share %v, want 0.864", got)
	}
	if got := r.OwnShare(); math.Abs(got-0.016) > 1e-9 {
		t.Errorf("own share %v, want 0.016", got)
	}
	if r.Flat[0].Name != "golang.org/x/crypto/scrypt.salsaXOR" || r.Flat[0].CPU != 100*ms10 {
		t.Errorf("top flat: %v", r.Flat[0])
	}
	for _, f := range r.Flat {
		if f.Name == asyncPreempt {
			t.Errorf("asyncPreempt kept as a function: %v", f)
		}
	}
	for _, f := range r.Cum {
		if f.Name == "golang.org/x/crypto/scrypt.Key" && f.CPU != 108*ms10 {
			t.Errorf("scrypt.Key cumulative %v, want 1.08s", f.CPU)
		}
	}
	if _, ok := r.ScryptPerNode(); ok {
		t.Error("ScryptPerNode without run figures")
	}
	if _, ok := r.PerNode(); ok {
		t.Error("PerNode without run figures")
	}
	var text bytes.Buffer
	WriteText(&text, r, 0)
	for _, want := range []string{"all the scrypt work carried nodepass.verify=scrypt"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("WriteText lacks %q:\n%s", want, text.String())
		}
	}

	// The same profile made before the labels: scrypt by its package, the
	// runtime's work below it the runtime's.
	old := cpuSpec{}
	for st, n := range spec {
		u := unlabelled(*st)
		old[&u] = n
	}
	r, err = FromProfile(cpuProfile(t, old), "old")
	if err != nil {
		t.Fatal(err)
	}
	if r.CPU[Scrypt] != 100*ms10 || r.CPU[Runtime] != 8*ms10 || r.CPU[Request] != 0 || r.CPU[Verify] != ms10 || r.ScryptLabelled != 0 {
		t.Errorf("without labels: by category %v, labelled %v", r.CPU, r.ScryptLabelled)
	}
	text.Reset()
	WriteText(&text, r, 0)
	for _, want := range []string{"no sample carries nodepass.verify=scrypt"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("WriteText lacks %q:\n%s", want, text.String())
		}
	}
}

func TestFromProfileNotCPU(t *testing.T) {
	b := newBuilder(&profile.ValueType{Type: "alloc_objects", Unit: "count"})
	b.sample([]string{"main.main"}, 5)
	if _, err := FromProfile(roundTrip(t, b.p), "x"); err == nil || !strings.HasPrefix(err.Error(), "pprofreport: not a CPU profile") {
		t.Errorf("heap profile as CPU profile: %v", err)
	}
}

// TestLoad writes a profile directory as cmd/bench does and reads it back.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, p *profile.Profile) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := p.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	// 225 samples of scrypt work for 200 calls.
	write("nodepass.cpu.pprof", cpuProfile(t, healthy()))
	results := []*bench.Result{{Model: "nodepass", Nodes: 200, Joined: 200, ScryptRuns: 200, ScryptRunsPerNode: 1, CPU: 2600 * time.Millisecond}}
	b, err := json.Marshal(results)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "herd.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}

	r, err := Load(filepath.Join(dir, "nodepass.cpu.pprof"), "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Run == nil || r.Run.Joined != 200 {
		t.Fatalf("Load: run %v", r.Run)
	}
	if x, ok := r.PerNode(); !ok || x != 1 {
		t.Errorf("PerNode = %v, %v", x, ok)
	}
	if d, ok := r.ScryptPerNode(); !ok || d != 11250*time.Microsecond {
		t.Errorf("ScryptPerNode = %v, %v", d, ok)
	}
	if d, ok := r.OneScrypt(); !ok || d != 11250*time.Microsecond {
		t.Errorf("OneScrypt = %v, %v", d, ok)
	}
	if cov, ok := r.ProcessCoverage(); !ok || cov != 1 {
		t.Errorf("ProcessCoverage = %v, %v", cov, ok)
	}

	var text, md, diff bytes.Buffer
	WriteText(&text, r, 3)
	for _, want := range []string{"nodepass (", "200/200 nodes joined", "CPU sampled: 2.60s", "100% of the CPU the process used",
		"scrypt work 2.25s 86.5%", "request (cache miss) 0.00s 0.0%", "own code (the four above) 0.01s 0.4%", "runtime 0.10s 3.8%",
		"= 1.00 × one scrypt in this run (", "200 scrypt calls",
		"top 3 functions, flat:", "top 3 functions, cumulative:"} {
		if !strings.Contains(strings.Join(strings.Fields(text.String()), " "), want) {
			t.Errorf("WriteText lacks %q:\n%s", want, text.String())
		}
	}
	WriteMarkdown(&md, []*Report{r})
	if !strings.Contains(md.String(), "| nodepass | 200/200 | 2.60s | 86.5% | 0.4% | 0.0% | 7.7% | 3.8% | 1.5% | 11.2 ms | 1.00 |") ||
		!strings.Contains(md.String(), "| nodepass | 0.00% | 0.38% | 0.00% | 0.00% |") {
		t.Errorf("WriteMarkdown:\n%s", md.String())
	}
	WriteDiff(&diff, r, r, 5)
	for _, want := range []string{"scrypt work 86.5% 86.5% +0.0 pts", "scrypts per joined node (in-run) 1.000 1.000 +0.0%", "flat share of the top 5"} {
		if !strings.Contains(strings.Join(strings.Fields(diff.String()), " "), want) {
			t.Errorf("WriteDiff lacks %q:\n%s", want, diff.String())
		}
	}

	// Missing pieces: no JSON beside it is fine, a named one that lacks
	// the model is not.
	os.Remove(filepath.Join(dir, "herd.json"))
	if r, err := Load(filepath.Join(dir, "nodepass.cpu.pprof"), ""); err != nil || r.Run != nil {
		t.Errorf("Load without herd.json: %v, run %v", err, r.Run)
	}
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`[{"model":"k3s-v1.25"}]`), 0o644)
	if _, err := Load(filepath.Join(dir, "nodepass.cpu.pprof"), other); err == nil || !strings.Contains(err.Error(), `no result for model "nodepass"`) {
		t.Errorf("Load with a JSON lacking the model: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.cpu.pprof"), ""); err == nil {
		t.Error("Load of a missing file: no error")
	}
}
