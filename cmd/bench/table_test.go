package main

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nodepass/nodepass/bench"
)

// tableRuns are results as the default run makes them: a model stopped at
// its deadline, one by the heap guard, nodepass within its heap bound and
// short of CPU; split or not, with one agent kind or two (longer row
// names).
func tableRuns(split, mixed bool) (*bench.Herd, bench.Scenario, []*bench.Result) {
	h := &bench.Herd{Nodes: make([]bench.Node, 320), LogN: 15, LowerBound: 33710 * time.Millisecond,
		LowerBoundBatch: 4840 * time.Millisecond, Workers: 1}
	sc := bench.Scenario{Nodes: 320, LogN: 15, Mode: bench.ModeHTTP, Servers: 1, BoundSample: 64, SampleEvery: bench.DefaultSampleEvery}
	var results []*bench.Result
	for _, agent := range []string{bench.PolicyJitter, "nodepass-lb"} {
		if agent != bench.PolicyJitter && !mixed {
			break
		}
		for _, r := range []*bench.Result{
			{Model: bench.ModelK3s125, Completion: 90 * time.Second, Ratio: 2.67, RatioBatch: 18.59, Stopped: bench.StoppedDeadline,
				StopDetail: "0 of 320 nodes joined by the 1m30s deadline", PeakHeap: 680 << 20, PeakHeapObjects: 1354 << 20, PeakMemory: 680 << 20, Timeouts: 1584},
			{Model: bench.ModelK3sLatest, Completion: 3800 * time.Millisecond, Ratio: 0.11, Stopped: bench.StoppedHeapGuard,
				StopDetail: "the next scrypt would have taken the heap in use past the 4096 MiB guard (peak heap in use 4072 MiB)",
				PeakHeap:   2245 << 20, PeakHeapObjects: 4072 << 20, PeakMemory: 2245 << 20},
			{Model: bench.ModelNodepass, Joined: 320, Completion: 11800 * time.Millisecond, Ratio: 0.44, RatioBatch: 2.4, ScryptRuns: 320,
				Attempts: 320, Requests: 3200, Handshakes: 3200, PeakHeap: 20 << 20, PeakHeapObjects: 840 << 20, PeakMemory: 533 << 20, HeapBound: 612 << 20,
				P50: 5800 * time.Millisecond, P99: 7500 * time.Millisecond, Max: 7500 * time.Millisecond,
				CPU: 6 * time.Second, Procs: 1, CPUWaitShare: 0.45, OthersCPUShare: 0.4, LoadMax: 4.7, MachineCPUs: 2},
		} {
			r.Nodes, r.LogN, r.Mode, r.Agent, r.Servers = 320, 15, bench.ModeHTTP, agent, 1
			r.SetLocalBound(4*time.Second, 0)
			if split {
				r.Split = &bench.Split{AgentCPUs: []int{1}, ServerCPUs: []int{0}, AgentProcs: 1, ServerProcs: 1}
			}
			results = append(results, r)
		}
	}
	return h, sc, results
}

// TestTableFits: every line under a table fits 80 columns, and so does
// the default table with one agent kind (issue 51: its notes ran to 100
// while the table fits in 73); the default table has the headline figures
// and no more (issue 45: 199 columns, 20 of them); -wide has every
// figure, and only its table is wider.
func TestTableFits(t *testing.T) {
	const width = 80
	for _, split := range []bool{true, false} {
		for _, mixed := range []bool{false, true} {
			h, sc, results := tableRuns(split, mixed)
			for _, wide := range []bool{false, true} {
				var b bytes.Buffer
				writeTable(&b, h, sc, results, wide)
				out := b.String()
				for i, line := range strings.Split(out, "\n") {
					inTable := i <= len(results) // the heads, then a row per result
					if n := utf8.RuneCountInString(line); n > width && !(inTable && (wide || mixed)) {
						t.Errorf("split %v, mixed %v, wide %v: a line of %d columns:\n%s", split, mixed, wide, n, line)
					}
				}
				heads := tableHeads(t, out)
				if want := []string{"model", "joined", "time", "ratio", "scrypt/node", "peak memory", "stopped"}; !wide && !slices.Equal(heads, want) {
					t.Errorf("default heads %q, want %q", heads, want)
				}
				if wide && len(heads) < 20 {
					t.Errorf("-wide has %d columns: %q", len(heads), heads)
				}
			}
		}
	}
}

// TestLegendDefinesEveryColumn: under each table, every column but the
// model's is defined ("head: ..." or "head, other: ..."), and the two heap
// measures are named apart; nothing says "1 workers" or "(s)".
func TestLegendDefinesEveryColumn(t *testing.T) {
	for _, wide := range []bool{false, true} {
		h, sc, results := tableRuns(true, false)
		var b bytes.Buffer
		writeTable(&b, h, sc, results, wide)
		out := b.String()
		legend := unwrap(out[strings.Index(out, "\n\n"):])
		for _, head := range tableHeads(t, out)[1:] {
			if !regexp.MustCompile(`(?m)^(\S[^:\n]*, )?` + regexp.QuoteMeta(head) + `(, [^:\n]*)?: \S`).MatchString(legend) {
				t.Errorf("wide %v: the legend does not define %q:\n%s", wide, head, legend)
			}
		}
		for _, want := range []string{
			"on 1 worker, measured before the runs",
			"k3s-latest: stopped (heap guard) after 3.8s: the next scrypt would have taken the heap in use past the 4096 MiB guard",
			"nodepass: peak memory 533 MiB, within its bound of 612 MiB",
		} {
			if !strings.Contains(unwrap(out), want) {
				t.Errorf("wide %v: output lacks %q:\n%s", wide, want, out)
			}
		}
		if strings.Contains(out, "(s)") || strings.Contains(out, " 1 workers") {
			t.Errorf("wide %v: a plural left to the reader:\n%s", wide, out)
		}
		if strings.Contains(strings.ReplaceAll(unwrap(out), "peak heap in use", ""), "peak heap") {
			t.Errorf("wide %v: a heap figure not named live or in use:\n%s", wide, out)
		}
	}
}

// TestStarvedNextToResult: a run short of CPU says so right under the
// table, before the legend, naming the model; the others say nothing.
// Lower bounds measured short of CPU say so there too.
func TestStarvedNextToResult(t *testing.T) {
	h, sc, results := tableRuns(true, false)
	var b bytes.Buffer
	writeTable(&b, h, sc, results, false)
	out := b.String()
	table := out[:strings.Index(out, "\n\n")]
	want := "nodepass: short of CPU: the servers' threads waited for a CPU 45% of the time they were ready to run, " +
		"and other processes took 40% of their CPUs; the load average reached 4.7 on 2 CPUs; on a quiet machine its time would be shorter."
	if !strings.Contains(unwrap(table), want) || strings.Count(out, "short of CPU") != 1 {
		t.Errorf("table and note:\n%s\nwant once, under the table: %q", out, want)
	}
	h.BoundWaitShare, h.BoundOthersShare = 0.4, 0.3
	b.Reset()
	writeTable(&b, h, sc, results, false)
	out = b.String()
	want = "lower bounds: short of CPU: the threads measuring them waited for a CPU 40% of the time they were ready to run, " +
		"and other processes took 30% of their CPUs; they are then too long, and every ratio too low."
	if table := out[:strings.Index(out, "\n\n")]; !strings.Contains(unwrap(table), want) {
		t.Errorf("table and note:\n%s\nwant under the table: %q", out, want)
	}
}

// tableHeads returns the heads of the first table in out: cells are two
// spaces or more apart.
func tableHeads(t *testing.T, out string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1); f[0] == "model" {
			return f
		}
	}
	t.Fatalf("no table in:\n%s", out)
	return nil
}

// unwrap joins the lines writeWrapped broke: a line that starts with two
// spaces continues the one before.
func unwrap(s string) string { return strings.ReplaceAll(s, "\n  ", " ") }
