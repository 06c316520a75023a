package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/scrypt"
	"github.com/nodepass/nodepass/verify"
)

// column is one column of a table: its head, its cell for a result, and
// what its figure is, for the legend under the table ("" for none).
type column struct {
	head string
	cell func(*bench.Result) string
	def  string
}

// writeColumns prints a table of results under cols' heads, one row per
// result, aligned right.
func writeColumns(w io.Writer, results []*bench.Result, cols []column) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, c := range cols {
		fmt.Fprint(tw, c.head, "\t")
	}
	fmt.Fprintln(tw)
	for _, r := range results {
		for _, c := range cols {
			fmt.Fprint(tw, c.cell(r), "\t")
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// writeLegend prints what each of cols' figures is, one entry per column
// with a definition, columns in a row with the same definition in one
// entry ("p50, p99, max: ..."), wrapped to lineWidth.
func writeLegend(w io.Writer, cols []column) {
	for i := 0; i < len(cols); i++ {
		if cols[i].def == "" {
			continue
		}
		heads := []string{cols[i].head}
		for i+1 < len(cols) && cols[i+1].def == cols[i].def {
			i++
			heads = append(heads, cols[i].head)
		}
		writeWrapped(w, strings.Join(heads, ", ")+": "+cols[i].def+".")
	}
}

// lineWidth is where bench wraps the lines under its tables; the default
// table with one agent kind fits it too.
const lineWidth = 80

// writeWrapped prints text wrapped at spaces to lineWidth, the lines after
// the first indented by two spaces. A word longer than a line stays whole.
func writeWrapped(w io.Writer, text string) {
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > lineWidth {
			fmt.Fprintln(w, line)
			line = " "
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}

// The cells of the tables, their figures marked as floors (">") when the
// run stopped early.
func modelCell(name map[*bench.Result]string) column {
	return column{"model", func(r *bench.Result) string { return name[r] }, ""}
}

var (
	joinedCell     = func(r *bench.Result) string { return fmt.Sprintf("%d/%d", r.Joined, r.Nodes) }
	completionCell = func(r *bench.Result) string { return floor(r, secs(r.Completion)) }
	ratioCell      = func(r *bench.Result) string { return floor(r, fmt.Sprintf("%.2f", r.Ratio)) }
	localRatioCell = ifMeasured(func(r *bench.Result) float64 { return r.LocalRatio })
	mib            = func(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	peakMemoryCell = func(r *bench.Result) string { return mib(r.PeakMemory) }
)

// ifMeasured is a cell of a ratio, "-" when it is 0: not measured.
func ifMeasured(ratio func(*bench.Result) float64) func(*bench.Result) string {
	return func(r *bench.Result) string {
		if ratio(r) == 0 {
			return "-"
		}
		return floor(r, fmt.Sprintf("%.2f", ratio(r)))
	}
}

// ifJoined is a cell of f, "-" when no node joined.
func ifJoined(f func(*bench.Result) string) func(*bench.Result) string {
	return func(r *bench.Result) string {
		if r.Joined == 0 {
			return "-"
		}
		return f(r)
	}
}

// perNode is a cell of count per joined node, "-" when none joined.
func perNode(count func(*bench.Result) uint64) func(*bench.Result) string {
	return ifJoined(func(r *bench.Result) string { return fmt.Sprintf("%.2f", r.PerNode(count(r))) })
}

// writeTable prints one row per model, what its figures are, and the
// sentences a cell cannot hold: why a run stopped, nodepass's heap against
// its bound, and a run short of CPU. The default table has the headline
// figures and fits lineWidth; wide has every figure and the notes on the
// bounds, the split, arrivals, returns and shed answers.
func writeTable(w io.Writer, h *bench.Herd, sc bench.Scenario, results []*bench.Result, wide bool) {
	split := len(results) > 0 && results[0].Split != nil
	name := rowNames(results)
	cols := tableColumns(h, sc, name, split, wide)
	writeColumns(w, results, cols)
	if s := h.BoundStarved(); s != "" {
		writeWrapped(w, fmt.Sprintf("lower bounds: %s.", s))
	}
	for _, r := range results {
		if s := r.Starved(); s != "" {
			writeWrapped(w, fmt.Sprintf("%s: %s.", name[r], s))
		}
	}
	fmt.Fprintln(w)
	writeLegend(w, cols)
	if wide {
		writeNotes(w, h, results, name)
	}
	for _, r := range results {
		if r.Stopped != "" {
			writeWrapped(w, fmt.Sprintf("%s: stopped (%s) after %s: %s.", name[r], r.Stopped, secs(r.Completion), r.StopDetail))
		}
		if r.HeapBound > 0 {
			within := "within"
			if r.PeakMemory > r.HeapBound {
				within = "PAST"
			}
			writeWrapped(w, fmt.Sprintf("%s: peak memory %s, %s its bound of %s: the scrypt buffers its budget lets %s hold "+
				"(budget: %s; at most GOMAXPROCS × %d lanes × %s, 128·r·(N+2) bytes each), plus 100 MiB.",
				name[r], mib(r.PeakMemory), within, mib(r.HeapBound), plural(sc.Servers, "server"), budgetNote(sc.ScryptMemory),
				scrypt.Lanes(), mib(128*8*(1<<sc.LogN+2))))
		}
	}
	if !wide {
		fmt.Fprintln(w, "More figures: bench -wide; all of them: bench -json FILE.")
	}
}

// tableColumns returns the columns of the main table, defined for this
// run: the headline ones, or with wide every one.
func tableColumns(h *bench.Herd, sc bench.Scenario, name map[*bench.Result]string, split, wide bool) []column {
	proc := "the process (agents and servers)"
	if split {
		proc = "the servers' process (the agents ran apart)"
	}
	shared := ""
	if sc.Servers > 1 {
		shared = fmt.Sprintf(" (the %d servers share these CPUs, so no run can beat it)", sc.Servers)
	}
	bound := fmt.Sprintf("%.2fs, the herd's %d scrypt verifications (logN %d) with golang.org/x/crypto/scrypt, as k3s runs them, on %s, measured before the runs%s",
		h.LowerBound.Seconds(), len(h.Nodes), h.LogN, plural(h.Workers, "worker"), shared)
	perJoined := func(what string) string { return what + ", per joined node" }
	heapNote := "sampled every " + sc.SampleEvery.String() + ", of " + proc
	cols := []column{
		modelCell(name),
		{"joined", joinedCell, "nodes that got their certificates, of the herd"},
		{"time", completionCell, `from the reboot until the last node joined, or until the run stopped (">": a floor)`},
		{"ratio", ratioCell, "time / the lower bound: " + bound + ". Below 1 is faster than k3s's own scrypt could be"},
	}
	if wide {
		cols = append(cols,
			column{"batch ratio", ifMeasured(func(r *bench.Result) float64 { return r.RatioBatch }), fmt.Sprintf("time / the lower bound with the Verifier's own scrypt, batched (scrypt.KeyBatch of %d jobs, as many workers): %.2fs",
				scrypt.Lanes(), h.LowerBoundBatch.Seconds())},
			column{"local ratio", localRatioCell, localBoundNote(sc, split)},
			column{"attempts/node", perNode(func(r *bench.Result) uint64 { return r.Attempts }),
				perJoined("a k3s agent's attempt is its whole sequence of requests (over HTTPS: /cacerts three times, then with the join token the config, " +
					"the two CA files and four certificate POSTs, two of them with the node password; in-process: the seven with the token)")},
			column{"requests/node", perNode(func(r *bench.Result) uint64 { return r.Requests }), perJoined("the agents' requests")},
			column{"tls/node", perNode(func(r *bench.Result) uint64 { return r.Handshakes }), perJoined("the TLS handshakes the agents started")})
	}
	cols = append(cols, column{"scrypt/node", perNode(func(r *bench.Result) uint64 { return r.ScryptRuns }),
		perJoined("the servers' scrypt computations (node passwords and join tokens; not a server's hashing of its token at start)")})
	if wide {
		lat := "the join latencies of the joined nodes, from the reboot, retries included"
		cols = append(cols,
			column{"token/node", perNode(func(r *bench.Result) uint64 { return r.TokenScryptRuns }), perJoined("those of them over join tokens")},
			column{"p50", ifJoined(func(r *bench.Result) string { return secs(r.P50) }), lat},
			column{"p99", ifJoined(func(r *bench.Result) string { return secs(r.P99) }), lat},
			column{"max", ifJoined(func(r *bench.Result) string { return secs(r.Max) }), lat})
	}
	cols = append(cols, column{"peak memory", peakMemoryCell,
		"the most heap a finished GC cycle found live (runtime/metrics /gc/heap/live), plus nodepass's scrypt buffers outside the heap " +
			"(scrypt.OffHeapBytes; on Linux every buffer of 2 MiB or more is), " + heapNote})
	if wide {
		cols = append(cols,
			column{"peak heap in use", func(r *bench.Result) string { return mib(r.PeakHeapObjects) },
				"the most heap held by objects, live or not yet swept (/memory/classes/heap/objects), " + heapNote + "; the heap guard watches it"},
			column{"shed", func(r *bench.Result) string { return fmt.Sprint(r.Shed) }, "answers 429 or 503 the agents got"},
			column{"late", func(r *bench.Result) string { return fmt.Sprint(r.ShedLate) }, fmt.Sprintf("those that came after the request was held over %v", bench.LateShed)},
			column{"timeouts", func(r *bench.Result) string { return fmt.Sprint(r.Timeouts) }, "requests the agents gave up at their client timeout"},
			column{"cpu use", func(r *bench.Result) string { return fmt.Sprintf("%.0f%%", 100*r.CPUUse()) },
				"the CPU time of " + proc + " over time × GOMAXPROCS: well below 100% with work pending, the run was short of CPU or idle by design"},
			column{"cpu wait", func(r *bench.Result) string { return fmt.Sprintf("%.0f%%", 100*r.CPUWaitShare) },
				"of the time the threads of " + proc + " were ready to run, the share they waited for a CPU (Linux schedstat)"},
			column{"cpu taken", func(r *bench.Result) string { return fmt.Sprintf("%.0f%%", 100*r.OthersCPUShare) },
				"the share of the time of the CPUs " + proc + " may use that other processes took (/proc/stat)"},
			column{"idle", func(r *bench.Result) string { return secs(r.IdlePending) },
				"CPU time left unused (GOMAXPROCS × time - CPU time) until the last node's result was ready"})
	}
	return append(cols, column{"stopped", func(r *bench.Result) string { return cmp.Or(r.Stopped, "-") },
		"why the run ended before every node joined: its deadline, the heap guard, or cancelled (see below)"})
}

// localBoundNote defines the local ratio.
func localBoundNote(sc bench.Scenario, split bool) string {
	if sc.BoundSample == 0 {
		return "not measured (-bound-sample 0)"
	}
	s := fmt.Sprintf("time / a lower bound estimated from %d verifications with the model's own scrypt (nodepass's in batches) right before its run", sc.BoundSample)
	switch {
	case sc.Mode == bench.ModeHTTP && split:
		s += "; scrypt only: the agents have CPUs of their own"
	case sc.Mode == bench.ModeHTTP:
		s += fmt.Sprintf(", plus %d agents' attempts over HTTPS (TLS, HTTP, four certificates signed) to a server that lets every node in, as the agents share the servers' CPUs", sc.BoundSample)
	}
	return s
}

// writeNotes says, under the -wide table, each model's figures that are
// sentences rather than cells.
func writeNotes(w io.Writer, h *bench.Herd, results []*bench.Result, name map[*bench.Result]string) {
	for _, r := range results {
		if r.LocalTransport > 0 {
			writeWrapped(w, fmt.Sprintf("%s: its local lower bound is %.2fs, %.2fs of it the agents' attempts (%.2f ms of CPU per node).", name[r],
				r.LocalBound.Seconds(), r.LocalTransport.Seconds(), 1e3*r.LocalTransport.Seconds()*float64(h.Workers)/float64(r.Nodes)))
		}
		for _, s := range []string{splitSummary(r), reachedSummary(r), returnsSummary(r), shedSummary(r.ShedLog)} {
			if s != "" {
				writeWrapped(w, fmt.Sprintf("%s: %s.", name[r], s))
			}
		}
	}
}

// plural is n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// splitSummary says where a split run's agents and servers ran and how
// busy each side's CPUs were; "" for a run not split.
func splitSummary(r *bench.Result) string {
	sp := r.Split
	if sp == nil {
		return ""
	}
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
		// The local bound is the model's scrypt alone here: one
		// verification's CPU is LocalBound × GOMAXPROCS / nodes.
		one := r.LocalBound * time.Duration(sp.ServerProcs) / time.Duration(r.Nodes)
		scrypt := one * time.Duration(r.ScryptRuns)
		rest := r.CPU - scrypt
		s += fmt.Sprintf(": about %.1fs in scrypt (%d runs of %.1f ms, as measured before the run)", scrypt.Seconds(), r.ScryptRuns, one.Seconds()*1e3)
		if rest > 0 {
			s += fmt.Sprintf(" and %.1fs else, %.2f ms per connection accepted (TLS, HTTP, certificates, GC)", rest.Seconds(), rest.Seconds()*1e3/float64(r.Connections))
		} else { // the estimate was taken while something else ran
			s += ", more than the CPU time used: measured on a busier machine, so no split of the CPU time"
		}
	}
	return s
}

// reachedSummary says when the nodes' first requests reached a server,
// and so how early the last of them could be answered.
func reachedSummary(r *bench.Result) string {
	if r.ReachedLast == 0 {
		return ""
	}
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
	s := fmt.Sprintf("last result ready at %s; ", secs(r.LastReady))
	if len(r.Returns) == 0 {
		return s + fmt.Sprintf("every node joined on its first request; held, then sent away: %d", r.ShedAfterWait)
	}
	s += fmt.Sprintf("%d agents came back, relative to their result being ready:", len(r.Returns))
	edges := bench.ReturnBuckets
	for i, n := range bench.ReturnHistogram(r.Returns) {
		switch {
		case i == 0:
			s += fmt.Sprintf(" <%v: %d", edges[0], n)
		case i == len(edges):
			s += fmt.Sprintf(", >=%v: %d", edges[i-1], n)
		default:
			s += fmt.Sprintf(", %v..%v: %d", edges[i-1], edges[i], n)
		}
	}
	return s + fmt.Sprintf(" (the latest %s after its result); held, then sent away: %d", secs(slices.Max(r.Returns)), r.ShedAfterWait)
}

// shedSummary says how many answers were shed with which status, and what
// Retry-After they carried; "" for none.
func shedSummary(log []bench.ShedEvent) string {
	if len(log) == 0 {
		return ""
	}
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

// writeRemembered prints, for a reboot or when any server answered from a
// remembered digest, a table of the scrypt work the herd cost and how
// much was answered without it, and one summary line per model.
func writeRemembered(w io.Writer, sc bench.Scenario, results []*bench.Result) {
	show := sc.Reboot != bench.RebootNone
	for _, r := range results {
		show = show || r.DigestHits > 0
	}
	if !show {
		return
	}
	name := rowNames(results)
	fmt.Fprintln(w)
	count := func(f func(*bench.Result) any) func(*bench.Result) string {
		return func(r *bench.Result) string { return fmt.Sprint(f(r)) }
	}
	herd := "during the measured herd (not the warm-up)"
	cols := []column{
		modelCell(name), {"reboot", func(r *bench.Result) string { return string(cmp.Or(r.Reboot, bench.RebootNone)) },
			"what restarted before the measured herd: none, the agents, or all (agents and servers)"},
		{"digest key", func(r *bench.Result) string { return map[bool]string{false: "no", true: "yes"}[r.DigestKey] },
			"whether the servers shared a verify.Options.DigestKey"},
		{"joined", joinedCell, "nodes that got their certificates, of the herd"},
		{"1st attempt", count(func(r *bench.Result) any { return r.FirstAttempt }), "nodes that joined on their first attempt"},
		{"time", completionCell, `from the reboot until the last node joined, or until the run stopped (">": a floor)`},
		{"ratio to cold", ratioCell, "time / the cold lower bound above"},
		{"scrypt", count(func(r *bench.Result) any { return r.ScryptRuns }), "the servers' scrypt computations " + herd},
		{"scrypt/node", perNode(func(r *bench.Result) uint64 { return r.ScryptRuns }), "the same, per joined node"},
		{"digest hits", count(func(r *bench.Result) any { return r.DigestHits }), "matches answered from a digest remembered in the store, " + herd},
		{"cache hits", count(func(r *bench.Result) any { return r.CacheHits }), "matches answered from a server's own result cache, " + herd},
		{"warm-up scrypt", count(func(r *bench.Result) any { return r.WarmupScrypt }),
			"the warm-up's scrypt computations, every node joining once; the k3s models keep nothing, so they have no warm-up"},
		{"warm-up digests", count(func(r *bench.Result) any { return r.WarmupDigests }), "the nodes with a remembered digest after it"},
	}
	writeColumns(w, results, cols)
	fmt.Fprintln(w)
	writeLegend(w, cols)
	for _, r := range results {
		s := fmt.Sprintf("reboot %s: %d scrypt during the herd (%d digest hits, %d cache hits); %d/%d joined, %d on their first attempt, in %s = %.2f × the cold lower bound",
			cmp.Or(r.Reboot, bench.RebootNone), r.ScryptRuns, r.DigestHits, r.CacheHits, r.Joined, r.Nodes, r.FirstAttempt, floor(r, secs(r.Completion)), r.Ratio)
		switch {
		case r.Reboot == bench.RebootNone || r.Reboot == "":
		case r.Warmup == 0:
			s += "; no warm-up: the model keeps nothing one could leave"
		default:
			s += fmt.Sprintf("; warm-up (not measured): %d scrypt in %s, %d digests stored", r.WarmupScrypt, secs(r.Warmup), r.WarmupDigests)
		}
		if !r.DigestKey {
			s += "; no DigestKey"
		}
		writeWrapped(w, fmt.Sprintf("%s: %s.", name[r], s))
	}
}

// errWrongAccept fails a run in which a wrong password got in.
var errWrongAccept = errors.New("a wrong password was accepted: see the table")

// writeAdversity prints, when the results had attackers, duplicates or
// store faults, a second table with their figures, and says loudly what
// must never happen: a wrong password let in, an honest one turned away,
// a store error answered from a cache. It returns errWrongAccept when a
// wrong password got in.
func writeAdversity(w io.Writer, results []*bench.Result) error {
	var att, tok, dup, faults bool
	for _, r := range results {
		if a := r.Attack; a != nil {
			att, tok, dup = att || a.Attackers > 0, tok || a.TokenGuessers > 0, dup || a.Duplicates > 0
		}
		faults = faults || r.Faults != nil
	}
	if !att && !tok && !dup && !faults {
		return nil
	}
	// attack and fault are columns of a figure of the attack or the
	// faults, "-" for a run without them.
	attack := func(head string, f func(*bench.AttackResult) any) column {
		return column{head, func(r *bench.Result) string {
			if r.Attack == nil {
				return "-"
			}
			return fmt.Sprint(f(r.Attack))
		}, ""}
	}
	fault := func(head, note string, f func(*bench.FaultResult) string) column {
		return column{head, func(r *bench.Result) string {
			if r.Faults == nil {
				return "-"
			}
			return f(r.Faults)
		}, note}
	}
	name := rowNames(results)
	cols := []column{modelCell(name), {"honest joined", joinedCell, "honest nodes that got their certificates, of the herd"},
		{"time", completionCell, `from the reboot until the last honest node joined, or until the run stopped (">": a floor)`},
		{"ratio", ratioCell, "time / the x/crypto lower bound above"},
		{"local ratio", localRatioCell, "time / a lower bound estimated with the model's own scrypt right before its run (bench -wide says how)"},
		attack("honest scrypt", func(a *bench.AttackResult) any { return a.HonestScrypt })}
	for _, c := range []struct {
		on bool
		column
	}{
		{att, attack("guesses", func(a *bench.AttackResult) any { return a.Guesses })},
		{att, attack("accepted", func(a *bench.AttackResult) any { return a.GuessesAccepted })},
		{att, attack("guess scrypt", func(a *bench.AttackResult) any { return a.GuessScrypt })},
		{att, attack("pw known", func(a *bench.AttackResult) any { return a.GuessScryptKnown })},
		{tok, attack("token guesses", func(a *bench.AttackResult) any { return a.TokenGuesses })},
		{tok, attack("accepted", func(a *bench.AttackResult) any { return a.TokenGuessesAccepted })},
		{tok, attack("token scrypt", func(a *bench.AttackResult) any { return a.TokenScrypt })},
		{tok, attack("token guess scrypt", func(a *bench.AttackResult) any { return a.TokenGuessScrypt })},
		{dup, attack("dup requests", func(a *bench.AttackResult) any { return a.DuplicateRequests })},
		{dup, attack("dup accepted", func(a *bench.AttackResult) any { return a.DuplicatesAccepted })},
		{dup, attack("dup scrypt", func(a *bench.AttackResult) any { return a.DuplicateScrypt })},
		{dup, attack("max/dup", func(a *bench.AttackResult) any { return a.DuplicateScryptMax })},
		{dup, attack("after 403", func(a *bench.AttackResult) any { return a.DuplicateScryptAfterReject })},
		{faults, fault("store calls", "", func(f *bench.FaultResult) string { return fmt.Sprint(f.Calls) })},
		{faults, fault("failed", "the store calls that failed", func(f *bench.FaultResult) string { return percent(f.Failures, f.Calls) })},
		{faults, fault("slow", "those that answered only after -fault-latency", func(f *bench.FaultResult) string { return percent(f.Spikes, f.Calls) })},
		{faults, fault("500s", "", func(f *bench.FaultResult) string { return fmt.Sprint(f.FaultAnswers) })},
		{faults, fault("cached errors", "", func(f *bench.FaultResult) string { return fmt.Sprint(f.CachedErrors) })},
		{faults, fault("recheck", "", func(f *bench.FaultResult) string {
			if f.RecheckAsked == 0 {
				return "-"
			}
			return fmt.Sprintf("%d/%d", f.RecheckJoined, f.RecheckAsked)
		})},
	} {
		if c.on {
			cols = append(cols, c.column)
		}
	}
	fmt.Fprintln(w)
	cols = append(cols, column{"peak memory", peakMemoryCell, "as in the table above"})
	writeColumns(w, results, cols)
	fmt.Fprintln(w)
	writeLegend(w, cols)
	writeWrapped(w, "honest scrypt, guess scrypt and dup scrypt: the servers' scrypt computations by whose password they checked.")
	for _, p := range []struct {
		on   bool
		text string
	}{
		{att, "guesses: the attackers' requests; accepted: those answered 200 (must be 0); pw known: guess computations that started after the " +
			"server knew that node's own password (a server that checked for a known match then would not have run them)."},
		{tok, "token guesses: attempts with a wrong join token (each ends at its first authenticated request); accepted: answered 200 (must be 0); " +
			"token scrypt and token guess scrypt: computations over the agents' join token and over the guessed ones."},
		{dup, "dup: the duplicate-hostname machines; max/dup: the most computations over one duplicate's password; after 403: computations over " +
			"a duplicate's password that finished after it had got its first 403 (the cost of its retries)."},
		{faults, "store calls: every server's; 500s: requests answered with an injected fault; cached errors: those whose own store calls had all " +
			"succeeded (must be 0); recheck: with faults off after the run, every honest node asked every server once more: answered 200 / asked."},
	} {
		if p.on {
			writeWrapped(w, p.text)
		}
	}
	return warnAdversity(w, name, results)
}

// warnAdversity says loudly what must never happen, per result: a wrong
// password let in (then it returns errWrongAccept), an honest one turned
// away, a store error answered from a cache.
func warnAdversity(w io.Writer, name map[*bench.Result]string, results []*bench.Result) error {
	var wrong error
	for _, r := range results {
		a, f := r.Attack, r.Faults
		if n := a.Accepted(); n > 0 {
			fmt.Fprintf(w, "!!! %s ACCEPTED %d WRONG PASSWORDS: %d guesses, %d token guesses and %d duplicates got 200; the servers let in %d !!!\n",
				name[r], n, a.GuessesAccepted, a.TokenGuessesAccepted, a.DuplicatesAccepted, a.WrongAccepts)
			wrong = errWrongAccept
		}
		if a != nil && a.HonestRejected > 0 {
			fmt.Fprintf(w, "!!! %s answered %d honest passwords as wrong !!!\n", name[r], a.HonestRejected)
		}
		if f != nil && f.CachedErrors > 0 {
			fmt.Fprintf(w, "!!! %s answered %d requests with a store error they had not met themselves (a cached error) !!!\n", name[r], f.CachedErrors)
		}
		if f != nil && f.RecheckJoined < f.RecheckAsked {
			fmt.Fprintf(w, "!!! %s: with faults off, only %d of %d honest requests were let in !!!\n", name[r], f.RecheckJoined, f.RecheckAsked)
		}
		if a != nil && a.UnattributedScrypt > 0 {
			fmt.Fprintf(w, "%s: %d scrypt computations could not be attributed (finished while their request was still under way when the figures were taken).\n",
				name[r], a.UnattributedScrypt)
		}
	}
	return wrong
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

// floor marks a figure of a run that stopped early as a floor.
func floor(r *bench.Result, s string) string {
	if r.Stopped != "" {
		return ">" + s
	}
	return s
}

func percent(n, of uint64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", math.Round(1000*float64(n)/float64(of))/10)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// budgetNote names a run's scrypt budget (Scenario.ScryptMemory).
func budgetNote(scryptMemory int64) string {
	switch {
	case scryptMemory < 0:
		return "none"
	case scryptMemory == 0:
		return fmt.Sprintf("verify's default per server, a twelfth of the memory the process may use, at most %d MiB", verify.DefaultScryptMemory>>20)
	}
	return fmt.Sprintf("%d MiB per server", scryptMemory>>20)
}
