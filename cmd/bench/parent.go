package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/scrypt"
	"github.com/nodepass/nodepass/verify"
)

// runParent makes the herd, measures the lower bound, runs every model
// and writes the table, the JSON and the plot.
func runParent(ctx context.Context, c *config, args []string, stdout, stderr io.Writer) (err error) {
	sc := c.sc
	var agents []string
	for _, a := range c.agents {
		agents = append(agents, a.String())
	}
	fmt.Fprintf(stderr, "bench: %d nodes, logN %d, %s mode, %s agents, %d server(s)%s%s, client timeout %v, deadline %v per model, GOMAXPROCS %d\n",
		sc.Nodes, sc.LogN, sc.Mode, strings.Join(agents, " and "), sc.Servers, lbNote(sc.Servers, sc.LB),
		hungNote(sc.Hung, sc.Known, sc.ValidCerts), sc.ClientTimeout, sc.Deadline, runtime.GOMAXPROCS(0))
	if note := adversityNote(sc); note != "" {
		fmt.Fprintf(stderr, "bench: %s\n", note)
	}
	fmt.Fprintf(stderr, "bench: %s\n", rebootNote(sc))
	rule := "max(now - 1h, the CA's), as k3s today"
	if sc.CANotBefore {
		rule = "the CA's, as k3s and RKE2 before dynamiclistener's CalculateNotBefore"
	}
	fmt.Fprintf(stderr, "bench: the servers' CA is %.3g years old; they issue certificates valid a year, NotBefore %s\n", sc.CAAge.Hours()/(365*24), rule)
	defer func() { fmt.Fprintf(stderr, "bench: load average at end: %s\n", loadAverage()) }()
	stderr = workerStderr(stderr)
	plan, note := planSplit(c, allowedCPUs)
	fmt.Fprintf(stderr, "bench: %s\n", note)
	measure := func(h *bench.Herd) error { return h.MeasureLowerBound(ctx) }
	if plan.on() {
		measure = func(h *bench.Herd) error { return measureBounds(ctx, args, h, plan.servers, stderr) }
	}
	h, err := prepareHerd(ctx, sc, measure, stderr)
	if err != nil {
		return err
	}
	herdJSON, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encoding the herd: %w", err)
	}

	if err := prepareProfileDir(c); err != nil {
		return err
	}
	var results []*bench.Result
	for _, agent := range c.agents {
		// A child reads the scenario from the arguments: the last -agent
		// is its agent.
		c, args := *c, append(slices.Clip(args), "-agent="+agent.String())
		c.sc.Agent = agent
		for _, model := range c.models {
			bar := newProgressBar(stderr, rowName(model, agent.String(), len(c.agents) > 1), sc.Nodes)
			var res *bench.Result
			switch {
			case plan.on():
				res, err = runSplit(ctx, &c, args, herdJSON, model, plan, bar, stderr)
			case c.isolate:
				res, err = runChild(ctx, &c, args, herdJSON, model, bar, stderr)
			default:
				s := c.sc
				s.Progress = func(p bench.Progress) { bar.update(p.Joined, p.Elapsed, false) }
				res, err = runModel(ctx, &c, s, h, model)
			}
			if err != nil {
				return err
			}
			bar.update(res.Joined, res.Completion, true)
			results = append(results, res)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	writeTable(stdout, h, sc, results)
	writeRemembered(stdout, sc, results)
	// A wrong password let in fails the run, once every output is written.
	wrong := writeAdversity(stdout, results)
	defer func() {
		if err == nil {
			err = wrong
		}
	}()
	if c.jsonPath != "" {
		if err := writeResults(c.jsonPath, results); err != nil {
			return err
		}
	}
	if c.plotPath != "" {
		if err := writePlot(c.plotPath, results); err != nil {
			return err
		}
	}
	if c.cpuprofileDir != "" {
		return writeProfileDir(c, args, h, results)
	}
	return nil
}

func lbNote(servers int, lb bench.LB) string {
	if servers == 1 {
		return ""
	}
	return ", " + string(lb) + " load balancing"
}

// hungNote says how many servers hang, how many the agents remember and
// whether they keep valid certificates; "" for none of these.
func hungNote(hung, known int, validCerts bool) string {
	var parts []string
	if hung > 0 {
		parts = append(parts, fmt.Sprintf("%d hung", hung))
	}
	if known > 0 {
		parts = append(parts, fmt.Sprintf("agents know %d", known))
	}
	if validCerts {
		parts = append(parts, "valid certificates on disk")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// rowNames returns each result's name in the tables: its model, and its
// agent kind too when the results have more than one.
func rowNames(results []*bench.Result) map[*bench.Result]string {
	mixed := false
	for _, r := range results {
		mixed = mixed || r.Agent != results[0].Agent
	}
	names := make(map[*bench.Result]string, len(results))
	for _, r := range results {
		names[r] = rowName(r.Model, r.Agent, mixed)
	}
	return names
}

// rowName is a run's name in the progress bars and the tables: its model,
// and its agent kind too when a run has more than one.
func rowName(model, agent string, mixed bool) string {
	if mixed {
		return model + " / " + agent
	}
	return model
}

// writeTable prints one row per model and what the figures mean.
func writeTable(w io.Writer, h *bench.Herd, sc bench.Scenario, results []*bench.Result) {
	split := len(results) > 0 && results[0].Split != nil
	name := rowNames(results)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tjoined\tcompletion\tratio\tlocal ratio\tattempts/node\trequests/node\ttls/node\tscrypt/node\ttoken/node\tp50\tp99\tmax\tpeak heap\tshed\tlate\ttimeouts\tcpu use\tidle\tstopped\t")
	for _, r := range results {
		ratio, local, completion := fmt.Sprintf("%.2f", r.Ratio), fmt.Sprintf("%.2f", r.LocalRatio), secs(r.Completion)
		if r.Stopped != "" {
			ratio, local, completion = ">"+ratio, ">"+local, ">"+completion
		}
		if r.LocalBound == 0 {
			local = "-"
		}
		perNode := func(n uint64) string {
			if r.Joined == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", r.PerNode(n))
		}
		stopped := r.Stopped
		if stopped == "" {
			stopped = "-"
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f MiB\t%d\t%d\t%d\t%.0f%%\t%s\t%s\t\n",
			name[r], r.Joined, r.Nodes, completion, ratio, local,
			perNode(r.Attempts), perNode(r.Requests), perNode(r.Handshakes), perNode(r.ScryptRuns), perNode(r.TokenScryptRuns),
			latency(r, r.P50), latency(r, r.P99), latency(r, r.Max),
			float64(r.PeakHeap)/(1<<20), r.Shed, r.ShedLate, r.Timeouts, 100*r.CPUUse(), secs(r.IdlePending), stopped)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nlower bound: %.2fs = %d scrypt verifications (logN %d, golang.org/x/crypto/scrypt, as k3s runs them) on %d worker(s), warm, nothing else running; ratio = completion / lower bound.\n",
		h.LowerBound.Seconds(), len(h.Nodes), h.LogN, h.Workers)
	if h.LowerBoundFast > 0 {
		fmt.Fprintf(w, "lower bound with nodepass's scrypt package (the Verifier's default), one Key per verification: %.2fs (%.2f × the x/crypto bound);", h.LowerBoundFast.Seconds(), h.LowerBoundFast.Seconds()/h.LowerBound.Seconds())
		overBound(w, results, func(r *bench.Result) float64 { return r.RatioFast })
	}
	if h.LowerBoundBatch > 0 {
		fmt.Fprintf(w, "lower bound with the Verifier's own scrypt, batched (scrypt.KeyBatch of %d jobs, as many workers): %.2fs (%.2f × the x/crypto bound);",
			scrypt.Lanes(), h.LowerBoundBatch.Seconds(), h.LowerBoundBatch.Seconds()/h.LowerBound.Seconds())
		overBound(w, results, func(r *bench.Result) float64 { return r.RatioBatch })
	}
	if sc.BoundSample > 0 {
		fmt.Fprintf(w, "local ratio = completion / a lower bound estimated from %d verifications with the model's own scrypt (nodepass's in batches) right before its run (the load on a shared machine changes)", sc.BoundSample)
		if sc.Mode == bench.ModeHTTP && split {
			fmt.Fprint(w, "; scrypt only: the agents have CPUs of their own")
		} else if sc.Mode == bench.ModeHTTP {
			fmt.Fprintf(w, ",\n  plus, in http mode, %d agents' attempts, each ten requests on new connections (TLS handshakes, HTTP, four certificates signed) to a server that lets every node in: every node needs one, and the agents share the servers' CPUs:", sc.BoundSample)
			var each []string
			for _, r := range results {
				if r.LocalTransport > 0 {
					each = append(each, fmt.Sprintf("%s: %.2fs of %.2fs (%.2f ms of CPU per node)", name[r], r.LocalTransport.Seconds(),
						r.LocalBound.Seconds(), 1e3*r.LocalTransport.Seconds()*float64(h.Workers)/float64(r.Nodes)))
				}
			}
			fmt.Fprint(w, " ", strings.Join(each, "; "))
		}
		fmt.Fprintln(w, ".")
	}
	if sc.Servers > 1 {
		fmt.Fprintf(w, "%d servers: all run in this one process on the same %d CPUs, so their lower bound is the same %.2fs, not %.2fs / %d:\n"+
			"%d servers on machines of their own would have %d times the CPUs; here they share them, and no run can beat the %d-CPU bound.\n",
			sc.Servers, h.Workers, h.LowerBound.Seconds(), h.LowerBound.Seconds(), sc.Servers, sc.Servers, sc.Servers, h.Workers)
	}
	fmt.Fprintln(w, "per node: per joined node; an attempt is a k3s agent's whole sequence of requests (over HTTPS: /cacerts three times, then with the join token the config,\n  the two CA files and four certificate POSTs, two of them with the node password; in-process: the seven with the token), tls = TLS handshakes the agents started;")
	fmt.Fprintln(w, "scrypt/node counts every computation (node passwords and join tokens), token/node those over join tokens; each server also hashed its token once at start, counted in neither;")
	whose := "the process's (agents included)"
	if split {
		whose = "the servers' process's (agents apart)"
	}
	fmt.Fprintf(w, "latencies are per joined node, from the reboot (retries included); peak heap is %s live heap, sampled;\n", whose)
	fmt.Fprintf(w, "cpu use is %s CPU time over completion × GOMAXPROCS: well below 100%% with work pending means the run was short of CPU or idle by design;\n", whose)
	fmt.Fprintf(w, "late = shed answers that came after the request was held over %v; idle = CPU time left unused (GOMAXPROCS × time − CPU time) until the last node's result was ready.\n", bench.LateShed)
	for _, r := range results {
		if r.Kernel != "" {
			fmt.Fprintf(w, "%s: scrypt kernel chosen for batches at logN %d: %s, %.1f ms per hash as measured (scrypt.Choices).\n",
				name[r], r.LogN, r.Kernel, float64(r.KernelPerHash)/1e6)
		}
		if r.HeapBound > 0 {
			within := "within"
			if r.PeakHeap > r.HeapBound {
				within = "PAST"
			}
			fmt.Fprintf(w, "%s: scrypt budget %s per server, peak heap %.0f MiB, %s the bound %.0f MiB (%d server(s) × what the budget lets one hold, at most GOMAXPROCS × %d lanes × 128·r·(N+2); plus 100 MiB)%s.\n",
				name[r], budgetNote(sc.ScryptMemory), float64(r.PeakHeap)/(1<<20), within, float64(r.HeapBound)/(1<<20), sc.Servers, scrypt.Lanes(), map[bool]string{false: "; the agents' heap is in the peak", true: ""}[split])
		}
		if r.Split != nil {
			fmt.Fprintf(w, "%s: %s.\n", name[r], splitSummary(r))
		}
		if r.ReachedLast > 0 {
			fmt.Fprintf(w, "%s: %s.\n", name[r], reachedSummary(r))
		}
		if s := returnsSummary(r); s != "" {
			fmt.Fprintf(w, "%s: %s.\n", name[r], s)
		}
	}
	for _, r := range results {
		if len(r.ShedLog) > 0 {
			fmt.Fprintf(w, "%s: %s.\n", name[r], shedSummary(r.ShedLog))
		}
	}
	for _, r := range results {
		if r.Stopped != "" {
			fmt.Fprintf(w, "%s: stopped (%s) after %s: %s.\n", name[r], r.Stopped, secs(r.Completion), r.StopDetail)
		}
	}
}

// overBound ends a lower bound's line with each model's completion over
// it (ratio), for the models that have one.
func overBound(w io.Writer, results []*bench.Result, ratio func(*bench.Result) float64) {
	for _, r := range results {
		if q := ratio(r); q > 0 {
			fmt.Fprintf(w, " %s's completion over it: %.2f;", r.Model, q)
		}
	}
	fmt.Fprintln(w)
}

// splitSummary says where a split run's agents and servers ran and how
// busy each side's CPUs were.
func splitSummary(r *bench.Result) string {
	sp := r.Split
	use := func(cpu time.Duration, procs int) float64 {
		if r.Completion <= 0 || procs <= 0 {
			return 0
		}
		return 100 * cpu.Seconds() / (r.Completion.Seconds() * float64(procs))
	}
	s := fmt.Sprintf("agents ran on CPU %s (GOMAXPROCS %d, %.1fs of CPU, %.0f%% of theirs), servers on CPU %s (GOMAXPROCS %d, %.1fs of CPU, %.0f%% of theirs)",
		cpuString(sp.AgentCPUs), sp.AgentProcs, sp.AgentCPU.Seconds(), use(sp.AgentCPU, sp.AgentProcs),
		cpuString(sp.ServerCPUs), sp.ServerProcs, r.CPU.Seconds(), use(r.CPU, sp.ServerProcs))
	if r.LocalBound > 0 && r.Connections > 0 && r.Nodes > 0 && r.Stopped == "" {
		// The local bound is the model's scrypt alone here (nodepass's in
		// batches): one verification's CPU is LocalBound × GOMAXPROCS /
		// nodes. A run that stopped early counts computations it did not
		// finish.
		one := r.LocalBound * time.Duration(sp.ServerProcs) / time.Duration(r.Nodes)
		scrypt := one * time.Duration(r.ScryptRuns)
		rest := r.CPU - scrypt
		s += fmt.Sprintf(": about %.1fs in scrypt (%d runs of %.1f ms, as measured before the run) and %.1fs else, %.2f ms per connection accepted (TLS, HTTP, certificates, GC)",
			scrypt.Seconds(), r.ScryptRuns, one.Seconds()*1e3, rest.Seconds(), rest.Seconds()*1e3/float64(r.Connections))
	}
	return s
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func latency(r *bench.Result, d time.Duration) string {
	if r.Joined == 0 {
		return "-"
	}
	return secs(d)
}

// progressBar shows one model's progress on stderr: redrawn in place on a
// terminal, a line every 10 s and one at the end otherwise.
type progressBar struct {
	w         io.Writer
	tty       bool
	model     string
	nodes     int
	lastPrint time.Time
}

func newProgressBar(w io.Writer, model string, nodes int) *progressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progressBar{w: w, tty: tty, model: model, nodes: nodes, lastPrint: time.Now()}
}

func (b *progressBar) update(joined int, elapsed time.Duration, done bool) {
	const width = 30
	filled := 0
	if b.nodes > 0 {
		filled = min(joined*width/b.nodes, width)
	}
	line := fmt.Sprintf("%-11s [%s%s] %4d/%d joined %6.1fs", b.model,
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), joined, b.nodes, elapsed.Seconds())
	switch {
	case b.tty && done:
		fmt.Fprintf(b.w, "\r%s\n", line)
	case b.tty:
		fmt.Fprintf(b.w, "\r%s", line)
	case done || time.Since(b.lastPrint) >= 10*time.Second:
		fmt.Fprintln(b.w, line)
		b.lastPrint = time.Now()
	}
}

// loadAverage returns /proc/loadavg's 1, 5 and 15 minute figures, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// reachedSummary says when the nodes' first requests reached a server,
// and so how early the last of them could be answered.
func reachedSummary(r *bench.Result) string {
	where := "the server"
	if r.Servers > 1 {
		where = "a server"
	}
	return fmt.Sprintf("first requests reached %s between %s and %s (median %s): none is answered sooner, and one sent away on arrival comes back its agent's retry delay later",
		where, secs(r.ReachedFirst), secs(r.ReachedLast), secs(r.ReachedMedian))
}

// returnsSummary says, for a model that keeps results, how the agents
// that came back did so against their results being ready, as a
// histogram, and how many requests a server held and then sent away.
func returnsSummary(r *bench.Result) string {
	if r.LastReady == r.Completion && len(r.Returns) == 0 {
		return "" // keeps no result, or nobody came back
	}
	var b strings.Builder
	fmt.Fprintf(&b, "last result ready at %s; ", secs(r.LastReady))
	if len(r.Returns) == 0 {
		fmt.Fprintf(&b, "every node joined on its first request; held, then sent away: %d", r.ShedAfterWait)
		return b.String()
	}
	fmt.Fprintf(&b, "%d agents came back, relative to their result being ready:", len(r.Returns))
	counts := bench.ReturnHistogram(r.Returns)
	edges := bench.ReturnBuckets
	for i, n := range counts {
		switch {
		case i == 0:
			fmt.Fprintf(&b, " <%v: %d", edges[0], n)
		case i == len(edges):
			fmt.Fprintf(&b, ", >=%v: %d", edges[i-1], n)
		default:
			fmt.Fprintf(&b, ", %v..%v: %d", edges[i-1], edges[i], n)
		}
	}
	fmt.Fprintf(&b, " (the latest %s after its result)", secs(slices.Max(r.Returns)))
	fmt.Fprintf(&b, "; held, then sent away: %d", r.ShedAfterWait)
	return b.String()
}

// shedSummary says how many answers were shed with which status, and what
// Retry-After they carried.
func shedSummary(log []bench.ShedEvent) string {
	byStatus := map[int]int{}
	var after []time.Duration
	for _, e := range log {
		byStatus[e.Status]++
		if e.RetryAfter > 0 {
			after = append(after, e.RetryAfter)
		}
	}
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(byStatus)) {
		parts = append(parts, fmt.Sprintf("%d × %d", byStatus[st], st))
	}
	s := "shed " + strings.Join(parts, ", ") + " between " + secs(log[0].T) + " and " + secs(log[len(log)-1].T)
	if len(after) == 0 {
		return s + ", without Retry-After"
	}
	slices.Sort(after)
	return fmt.Sprintf("%s; Retry-After on %d of them, median %v (%v to %v)",
		s, len(after), after[len(after)/2], after[0], after[len(after)-1])
}

// prepareHerd makes the herd's stored hashes and measures its lower
// bounds with measure, saying so on stderr with the load average at the
// start.
func prepareHerd(ctx context.Context, sc bench.Scenario, measure func(*bench.Herd) error, stderr io.Writer) (*bench.Herd, error) {
	fmt.Fprintf(stderr, "bench: load average at start: %s\n", loadAverage())
	start := time.Now()
	h, err := bench.NewHerd(ctx, sc.Nodes, sc.LogN)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "bench: made %d stored hashes in %.1fs\n", sc.Nodes, time.Since(start).Seconds())
	if err := measure(h); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "bench: lower bound %.2fs with x/crypto's scrypt, %.2fs with nodepass's, %.2fs with nodepass's batched (%d verifications on %d workers)\n",
		h.LowerBound.Seconds(), h.LowerBoundFast.Seconds(), h.LowerBoundBatch.Seconds(), sc.Nodes, h.Workers)
	return h, nil
}

// budgetNote names a run's scrypt budget (Scenario.ScryptMemory).
func budgetNote(scryptMemory int64) string {
	switch {
	case scryptMemory < 0:
		return "none"
	case scryptMemory == 0:
		return fmt.Sprintf("%d MiB (the default)", verify.DefaultScryptMemory>>20)
	}
	return fmt.Sprintf("%d MiB", scryptMemory>>20)
}
