package pprofreport

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/nodepass/nodepass/bench"
)

func TestFromProfile(t *testing.T) {
	preempted := append([]string{asyncPreempt}, scryptStack...)
	spec := cpuSpec{&scryptStack: 60, &preempted: 40, &cacheStack: 2, &gcStack: 10, &runtimeStack: 8, &agentStack: 5}
	r, err := FromProfile(cpuProfile(t, spec, Meta{Model: "nodepass", Scenario: "a test", OneScrypt: 12 * time.Millisecond, Verifications: 66}), "file-name")
	if err != nil {
		t.Fatal(err)
	}
	ms10 := 10 * time.Millisecond
	if r.Name != "nodepass" || r.Samples != 125 || r.Total != 125*ms10 || r.Hz() != 100 {
		t.Errorf("name %q, %d samples, total %v, %d Hz", r.Name, r.Samples, r.Total, r.Hz())
	}
	if r.CPU[Scrypt] != 100*ms10 || r.Count[Scrypt] != 100 || r.CPU[Cache] != 2*ms10 || r.CPU[GC] != 10*ms10 ||
		r.CPU[Runtime] != 8*ms10 || r.CPU[Other] != 5*ms10 {
		t.Errorf("by category: %v", r.CPU)
	}
	if r.Preempted != 40*ms10 {
		t.Errorf("Preempted = %v, want 400ms", r.Preempted)
	}
	if r.UnderScrypt != 108*ms10 { // scrypt itself and the runtime's zeroing under scrypt.Key
		t.Errorf("UnderScrypt = %v, want 1.08s", r.UnderScrypt)
	}
	if got := r.Share(Scrypt); got != 0.8 {
		t.Errorf("scrypt share %v, want 0.8", got)
	}
	if got := r.OwnShare(); got != 0.016 {
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
	if r.Meta.Scenario != "a test" || r.Meta.OneScrypt != 12*time.Millisecond || r.Meta.Verifications != 66 {
		t.Errorf("meta: %+v", r.Meta)
	}
	if _, ok := r.ScryptPerNode(); ok {
		t.Error("ScryptPerNode without run figures")
	}
	if _, ok := r.PerNode(); ok {
		t.Error("PerNode without heap profile")
	}
}

func TestFromProfileNotCPU(t *testing.T) {
	if _, err := FromProfile(heapProfile(t, 1, 4<<20), "x"); err == nil || !strings.HasPrefix(err.Error(), "pprofreport: not a CPU profile") {
		t.Errorf("heap profile as CPU profile: %v", err)
	}
	if _, _, err := ScryptCalls(cpuProfile(t, healthy(), Meta{})); err == nil {
		t.Error("CPU profile as heap profile: no error")
	}
}

func TestMeta(t *testing.T) {
	m := Meta{Model: "k3s-v1.28", Scenario: "320 nodes, logN 15", OneScrypt: 93 * time.Millisecond, Verifications: 66}
	got, ok := ParseMeta(append([]string{"unrelated"}, m.Comments()...))
	if !ok || got != m {
		t.Errorf("ParseMeta(Comments()) = %+v, %v; want %+v", got, ok, m)
	}
	if _, ok := ParseMeta([]string{"nothing here"}); ok {
		t.Error("ParseMeta found meta in unrelated comments")
	}
}

func TestScryptCalls(t *testing.T) {
	calls, buffer, err := ScryptCalls(heapProfile(t, 320, 32<<20))
	if err != nil || calls != 320 || buffer != 32<<20 {
		t.Errorf("ScryptCalls = %d, %d, %v; want 320 calls of 32 MiB", calls, buffer, err)
	}
	b := newBuilder(&profile.ValueType{Type: "alloc_objects", Unit: "count"})
	b.sample([]string{"main.main"}, 5)
	calls, buffer, err = ScryptCalls(roundTrip(t, b.p))
	if err != nil || calls != 0 || buffer != 0 {
		t.Errorf("no scrypt: ScryptCalls = %d, %d, %v", calls, buffer, err)
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
	write("nodepass.cpu.pprof", cpuProfile(t, healthy(), Meta{Model: "nodepass", OneScrypt: 10 * time.Millisecond, Verifications: 66}))
	write("nodepass.heap.pprof", heapProfile(t, 200, 4<<20))
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
	if r.Run == nil || r.Run.Joined != 200 || !r.HaveCalls || r.ScryptCalls != 200 {
		t.Fatalf("Load: run %v, calls %d (%v)", r.Run, r.ScryptCalls, r.HaveCalls)
	}
	if x, ok := r.PerNode(); !ok || x != 1 {
		t.Errorf("PerNode = %v, %v", x, ok)
	}
	if d, ok := r.ScryptPerNode(); !ok || d != 10*time.Millisecond {
		t.Errorf("ScryptPerNode = %v, %v", d, ok)
	}
	if x, ok := r.PerNodeVsBound(); !ok || x != 1 {
		t.Errorf("PerNodeVsBound = %v, %v", x, ok)
	}
	if cov, ok := r.ProcessCoverage(); !ok || cov != 1 {
		t.Errorf("ProcessCoverage = %v, %v", cov, ok)
	}

	var text, md, diff bytes.Buffer
	WriteText(&text, r, 3)
	for _, want := range []string{"nodepass (", "200/200 nodes joined", "CPU sampled: 2.60s", "100% of the CPU the process used",
		"scrypt hot path            2.00s  76.9%", "own code (the five above)", "= 1.00 × one scrypt in this run (10.0 ms",
		"200 scrypt calls", "4.0 MiB buffer", "= 1.00 × one scrypt measured before the run", "top 3 functions, flat:", "top 3 functions, cumulative:"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("WriteText lacks %q:\n%s", want, text.String())
		}
	}
	WriteMarkdown(&md, []*Report{r})
	if !strings.Contains(md.String(), "| nodepass | 200/200 | 2.60s | 76.9% | 90.4% | 0.4% | 0.0% | 7.7% | 13.5% | 1.5% | 10.0 ms | 1.00 | 1.00 |") {
		t.Errorf("WriteMarkdown:\n%s", md.String())
	}
	WriteDiff(&diff, r, r, 5)
	for _, want := range []string{"scrypt hot path 76.9% 76.9% +0.0 pts", "scrypts per joined node (in-run) 1.000 1.000 +0.0%", "flat share of the top 5"} {
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
