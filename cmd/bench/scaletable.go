package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/cmd/internal/pprofreport"
)

const scaleTableUsage = `usage: bench scale-table GLOB...

Prints, as a Markdown table, the medians of the -json results that the
GLOBs name (quote them for the shell): a row per herd (nodes, logN, mode,
agents) and model, with its runs, completion, completion over the x/crypto
lower bound and over the batched bound with the Verifier's own scrypt
(both measured in each run; the runs' own ratios in brackets), completion
over the CPU time the servers' process used (1 / its cpu use: 1.00 when
the servers' CPUs were busy from start to end), scrypt runs
and TLS handshakes per node, late losses (answers 429 or 503 after a
request was held over 1 s, and requests a server held then sent away),
and peak heap. A run that stopped early counts, its stop said in the last
column.
`

// runScaleTable is bench scale-table.
func runScaleTable(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench scale-table", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, scaleTableUsage) }
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "bench scale-table: want at least one GLOB")
		fs.Usage()
		return 2
	}
	results, err := readResults(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "bench scale-table: %v\n", err)
		return 1
	}
	writeScaleTable(stdout, results)
	return 0
}

// readResults reads every -json file the globs name.
func readResults(globs []string) ([]*bench.Result, error) {
	var all []*bench.Result
	for _, glob := range globs {
		files, err := filepath.Glob(glob)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", glob, err)
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%q matches no file", glob)
		}
		for _, f := range files {
			results, err := pprofreport.ReadResults(f)
			if err != nil {
				return nil, err
			}
			all = append(all, results...)
		}
	}
	return all, nil
}

// runMode names how a run's agents reached its servers: inproc, http (one
// process) or "http, split".
func runMode(r *bench.Result) string {
	if r.Split != nil {
		return string(r.Mode) + ", split"
	}
	return string(r.Mode)
}

// scaleRow is one herd and model: its runs.
type scaleRow struct {
	nodes, logN        int
	mode, agent, model string
	runs               []*bench.Result
}

// writeScaleTable prints results' medians by herd and model.
func writeScaleTable(w io.Writer, results []*bench.Result) {
	var rows []*scaleRow
	for _, r := range results {
		i := slices.IndexFunc(rows, func(s *scaleRow) bool {
			return s.nodes == r.Nodes && s.logN == r.LogN && s.mode == runMode(r) && s.agent == r.Agent && s.model == r.Model
		})
		if i < 0 {
			rows = append(rows, &scaleRow{nodes: r.Nodes, logN: r.LogN, mode: runMode(r), agent: r.Agent, model: r.Model})
			i = len(rows) - 1
		}
		rows[i].runs = append(rows[i].runs, r)
	}
	slices.SortStableFunc(rows, func(a, b *scaleRow) int {
		return cmp.Or(cmp.Compare(a.mode, b.mode), cmp.Compare(a.agent, b.agent), -cmp.Compare(a.logN, b.logN),
			cmp.Compare(a.nodes, b.nodes), cmp.Compare(a.model, b.model))
	})
	fmt.Fprintln(w, "| nodes | logN | mode | agents | model | runs | completion | × x/crypto bound | × batched bound | × CPU used | scrypt/node | tls/node | late: shed after 1 s / held, then sent away | peak heap | stopped |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range rows {
		med := func(f func(*bench.Result) float64) float64 {
			v := make([]float64, len(s.runs))
			for i, r := range s.runs {
				v[i] = f(r)
			}
			return median(v)
		}
		each := func(f func(*bench.Result) float64) string {
			v := make([]string, len(s.runs))
			for i, r := range s.runs {
				v[i] = fmt.Sprintf("%.2f", f(r))
			}
			return fmt.Sprintf("**%.2f** (%s)", med(f), strings.Join(v, ", "))
		}
		var late, stopped []string
		for _, r := range s.runs {
			late = append(late, fmt.Sprintf("%d/%d", r.ShedLate, r.ShedAfterWait))
			if r.Stopped != "" {
				stopped = append(stopped, fmt.Sprintf("%s (%d joined)", r.Stopped, r.Joined))
			}
		}
		if len(stopped) == 0 {
			stopped = []string{"-"}
		}
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %d | %.1f s | %s | %s | %s | %.2f | %.2f | %s | %.0f MiB | %s |\n",
			s.nodes, s.logN, s.mode, s.agent, s.model, len(s.runs),
			med(func(r *bench.Result) float64 { return r.Completion.Seconds() }),
			each(func(r *bench.Result) float64 { return r.Ratio }),
			each(func(r *bench.Result) float64 { return r.RatioBatch }),
			overCPU(s.runs),
			med(func(r *bench.Result) float64 { return r.ScryptRunsPerNode }),
			med(func(r *bench.Result) float64 { return r.PerNode(r.Handshakes) }),
			strings.Join(late, ", "),
			med(func(r *bench.Result) float64 { return float64(r.PeakHeap) / (1 << 20) }),
			strings.Join(stopped, ", "))
	}
}

// overCPU is the median of completion over the CPU time the servers'
// process used (1 / its cpu use), or "-" when a run did not measure it.
func overCPU(runs []*bench.Result) string {
	v := make([]float64, len(runs))
	for i, r := range runs {
		if r.CPUUse() <= 0 {
			return "-"
		}
		v[i] = 1 / r.CPUUse()
	}
	return fmt.Sprintf("%.2f", median(v))
}
