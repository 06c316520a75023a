package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodepass/nodepass/bench"
)

// TestScaleTableAndPlot: the scale table takes each herd's and model's
// medians from -json files, and the scale plot draws them over the bound
// asked for.
func TestScaleTableAndPlot(t *testing.T) {
	dir := t.TempDir()
	for i, ratios := range [][2]float64{{1.2, 1.0}, {1.4, 1.1}, {1.3, 1.05}} {
		var results []*bench.Result
		for _, model := range []string{bench.ModelNodepass, bench.ModelK3sLatest} {
			r := &bench.Result{Model: model, Nodes: 320, LogN: 12, Mode: bench.ModeHTTP, Agent: bench.PolicyJitter, Joined: 320,
				Completion: 10 * time.Second, Ratio: ratios[0], RatioBatch: ratios[1], ScryptRuns: 320, ScryptRunsPerNode: 1,
				Handshakes: 1920, ShedLate: uint64(i), PeakHeap: 64 << 20, PeakMemory: 64 << 20, CPU: time.Duration(8+i) * time.Second, Procs: 1, Split: &bench.Split{AgentCPUs: []int{1}, ServerCPUs: []int{0}}}
			if model == bench.ModelK3sLatest {
				r.Ratio, r.RatioBatch, r.ScryptRunsPerNode = 3*ratios[0], 6*ratios[1], 2
			}
			results = append(results, r)
		}
		if err := writeResults(filepath.Join(dir, "run-"+string(rune('1'+i))+".json"), results); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runCmd(t, "scale-table", filepath.Join(dir, "run-*.json"))
	if code != 0 {
		t.Fatalf("scale-table: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"| 320 | 12 | http, split | jitter-5-10s | k3s-latest | 3 | 10.0 s | **3.90** (3.60, 4.20, 3.90) | **6.30** (6.00, 6.60, 6.30) | 1.11 | 2.00 | 6.00 | 0/0, 1/0, 2/0 | 64 MiB | - |",
		"| 320 | 12 | http, split | jitter-5-10s | nodepass | 3 | 10.0 s | **1.30** (1.20, 1.40, 1.30) | **1.05** (1.00, 1.10, 1.05) | 1.11 | 1.00 | 6.00 |",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks\n%s\nin\n%s", want, stdout)
		}
	}
	svg := filepath.Join(dir, "scale.svg")
	code, stdout, stderr = runCmd(t, "scale-plot", "-bound", "batch", "-o", svg, "now="+filepath.Join(dir, "run-*.json"))
	if code != 0 {
		t.Fatalf("scale-plot: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "now, nodepass, http, split, logN 12: 320 nodes median 1.05 (3 runs)") {
		t.Errorf("scale-plot says:\n%s", stdout)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("scrypt, batched")) {
		t.Errorf("plot: %v", err)
	}
	if code, _, stderr := runCmd(t, "scale-plot", "-bound", "fast", "-o", svg, "x="+filepath.Join(dir, "run-*.json")); code != 2 || !strings.Contains(stderr, "-bound") {
		t.Errorf("-bound fast: exit %d, %s", code, stderr)
	}
	if code, _, _ := runCmd(t, "scale-table", filepath.Join(dir, "none-*.json")); code != 1 {
		t.Errorf("scale-table of no file: exit %d, want 1", code)
	}
}
