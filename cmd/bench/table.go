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

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/scrypt"
	"github.com/nodepass/nodepass/verify"
)

// column is one column of a table: its head, and its cell for a result.
type column struct {
	head string
	cell func(*bench.Result) string
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

// The cells of the tables, their figures marked as floors (">") when the
// run stopped early.
func modelCell(name map[*bench.Result]string) column {
	return column{"model", func(r *bench.Result) string { return name[r] }}
}

var (
	joinedCell     = func(r *bench.Result) string { return fmt.Sprintf("%d/%d", r.Joined, r.Nodes) }
	completionCell = func(r *bench.Result) string { return floor(r, secs(r.Completion)) }
	ratioCell      = func(r *bench.Result) string { return floor(r, fmt.Sprintf("%.2f", r.Ratio)) }
	localRatioCell = func(r *bench.Result) string {
		if r.LocalBound == 0 {
			return "-"
		}
		return floor(r, fmt.Sprintf("%.2f", r.LocalRatio))
	}
	peakHeapCell = func(r *bench.Result) string { return fmt.Sprintf("%.0f MiB", float64(r.PeakHeap)/(1<<20)) }
)

// perNode is a cell of count per joined node, "-" when none joined.
func perNode(count func(*bench.Result) uint64) func(*bench.Result) string {
	return func(r *bench.Result) string {
		if r.Joined == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", r.PerNode(count(r)))
	}
}

// latency is a cell of a join latency, "-" when none joined.
func latency(d func(*bench.Result) time.Duration) func(*bench.Result) string {
	return func(r *bench.Result) string {
		if r.Joined == 0 {
			return "-"
		}
		return secs(d(r))
	}
}

// writeTable prints one row per model and what the figures mean.
func writeTable(w io.Writer, h *bench.Herd, sc bench.Scenario, results []*bench.Result) {
	split := len(results) > 0 && results[0].Split != nil
	name := rowNames(results)
	writeColumns(w, results, []column{
		modelCell(name), {"joined", joinedCell}, {"completion", completionCell}, {"ratio", ratioCell}, {"local ratio", localRatioCell},
		{"attempts/node", perNode(func(r *bench.Result) uint64 { return r.Attempts })},
		{"requests/node", perNode(func(r *bench.Result) uint64 { return r.Requests })},
		{"tls/node", perNode(func(r *bench.Result) uint64 { return r.Handshakes })},
		{"scrypt/node", perNode(func(r *bench.Result) uint64 { return r.ScryptRuns })},
		{"token/node", perNode(func(r *bench.Result) uint64 { return r.TokenScryptRuns })},
		{"p50", latency(func(r *bench.Result) time.Duration { return r.P50 })},
		{"p99", latency(func(r *bench.Result) time.Duration { return r.P99 })},
		{"max", latency(func(r *bench.Result) time.Duration { return r.Max })},
		{"peak heap", peakHeapCell},
		{"shed", func(r *bench.Result) string { return fmt.Sprint(r.Shed) }},
		{"late", func(r *bench.Result) string { return fmt.Sprint(r.ShedLate) }},
		{"timeouts", func(r *bench.Result) string { return fmt.Sprint(r.Timeouts) }},
		{"cpu use", func(r *bench.Result) string { return fmt.Sprintf("%.0f%%", 100*r.CPUUse()) }},
		{"idle", func(r *bench.Result) string { return secs(r.IdlePending) }},
		{"stopped", func(r *bench.Result) string { return cmp.Or(r.Stopped, "-") }},
	})
	writeNotes(w, h, sc, results, name, split)
}

// writeNotes says, under the table, what its figures mean, and each
// model's figures that are sentences rather than cells.
func writeNotes(w io.Writer, h *bench.Herd, sc bench.Scenario, results []*bench.Result, name map[*bench.Result]string, split bool) {
	fmt.Fprintf(w, "\nlower bound: %.2fs = %d scrypt verifications (logN %d, golang.org/x/crypto/scrypt, as k3s runs them) on %d worker(s), warm, nothing else running; ratio = completion / lower bound.\n",
		h.LowerBound.Seconds(), len(h.Nodes), h.LogN, h.Workers)
	if h.LowerBoundBatch > 0 {
		fmt.Fprintf(w, "lower bound with the Verifier's own scrypt, batched (scrypt.KeyBatch of %d jobs, as many workers): %.2fs (%.2f × the x/crypto bound);",
			scrypt.Lanes(), h.LowerBoundBatch.Seconds(), h.LowerBoundBatch.Seconds()/h.LowerBound.Seconds())
		for _, r := range results {
			if r.RatioBatch > 0 {
				fmt.Fprintf(w, " %s's completion over it: %.2f;", name[r], r.RatioBatch)
			}
		}
		fmt.Fprintln(w)
	}
	if sc.BoundSample > 0 {
		fmt.Fprintf(w, "local ratio = completion / a lower bound estimated from %d verifications with the model's own scrypt (nodepass's in batches) right before its run", sc.BoundSample)
		if sc.Mode == bench.ModeHTTP && split {
			fmt.Fprint(w, "; scrypt only: the agents have CPUs of their own")
		} else if sc.Mode == bench.ModeHTTP {
			fmt.Fprintf(w, ",\n  plus %d agents' attempts over HTTPS (TLS, HTTP, four certificates signed) to a server that lets every node in, as the agents share the servers' CPUs:", sc.BoundSample)
			for _, r := range results {
				if r.LocalTransport > 0 {
					fmt.Fprintf(w, " %s: %.2fs of %.2fs (%.2f ms of CPU per node);", name[r], r.LocalTransport.Seconds(),
						r.LocalBound.Seconds(), 1e3*r.LocalTransport.Seconds()*float64(h.Workers)/float64(r.Nodes))
				}
			}
		}
		fmt.Fprintln(w, ".")
	}
	if sc.Servers > 1 {
		fmt.Fprintf(w, "%d servers share this machine's %d CPUs, so their lower bound is the same %.2fs: no run can beat the %d-CPU bound.\n",
			sc.Servers, h.Workers, h.LowerBound.Seconds(), h.Workers)
	}
	whose := "the process's (agents included)"
	if split {
		whose = "the servers' process's (agents apart)"
	}
	fmt.Fprintf(w, "per node: per joined node; an attempt is a k3s agent's whole sequence of requests (over HTTPS: /cacerts three times, then with the join token the config,\n"+
		"  the two CA files and four certificate POSTs, two of them with the node password; in-process: the seven with the token), tls = TLS handshakes the agents started;\n"+
		"scrypt/node counts every computation (node passwords and join tokens), token/node those over join tokens; each server also hashed its token once at start, counted in neither;\n"+
		"latencies are per joined node, from the reboot (retries included); peak heap is %s live heap, sampled;\n"+
		"cpu use is %[1]s CPU time over completion × GOMAXPROCS: well below 100%% with work pending means the run was short of CPU or idle by design;\n"+
		"late = shed answers that came after the request was held over %v; idle = CPU time left unused (GOMAXPROCS × time − CPU time) until the last node's result was ready.\n", whose, bench.LateShed)
	for _, r := range results {
		if r.HeapBound > 0 {
			within, agents := "within", "; the agents' heap is in the peak"
			if r.PeakHeap > r.HeapBound {
				within = "PAST"
			}
			if split {
				agents = ""
			}
			fmt.Fprintf(w, "%s: scrypt budget %s per server, peak heap %.0f MiB, %s the bound %.0f MiB (%d server(s) × what the budget lets one hold, at most GOMAXPROCS × %d lanes × 128·r·(N+2); plus 100 MiB)%s.\n",
				name[r], budgetNote(sc.ScryptMemory), float64(r.PeakHeap)/(1<<20), within, float64(r.HeapBound)/(1<<20), sc.Servers, scrypt.Lanes(), agents)
		}
		for _, s := range []string{splitSummary(r), reachedSummary(r), returnsSummary(r), shedSummary(r.ShedLog)} {
			if s != "" {
				fmt.Fprintf(w, "%s: %s.\n", name[r], s)
			}
		}
		if r.Stopped != "" {
			fmt.Fprintf(w, "%s: stopped (%s) after %s: %s.\n", name[r], r.Stopped, secs(r.Completion), r.StopDetail)
		}
	}
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
	writeColumns(w, results, []column{
		modelCell(name), {"reboot", func(r *bench.Result) string { return string(cmp.Or(r.Reboot, bench.RebootNone)) }},
		{"digest key", func(r *bench.Result) string { return map[bool]string{false: "no", true: "yes"}[r.DigestKey] }},
		{"joined", joinedCell}, {"1st attempt", count(func(r *bench.Result) any { return r.FirstAttempt })},
		{"completion", completionCell}, {"ratio to cold", ratioCell},
		{"scrypt", count(func(r *bench.Result) any { return r.ScryptRuns })},
		{"scrypt/node", perNode(func(r *bench.Result) uint64 { return r.ScryptRuns })},
		{"digest hits", count(func(r *bench.Result) any { return r.DigestHits })},
		{"cache hits", count(func(r *bench.Result) any { return r.CacheHits })},
		{"warm-up scrypt", count(func(r *bench.Result) any { return r.WarmupScrypt })},
		{"warm-up digests", count(func(r *bench.Result) any { return r.WarmupDigests })},
	})
	fmt.Fprintln(w, "\nscrypt, digest hits and cache hits: the servers' during the measured herd only (not the warm-up); ratio to cold = completion / the")
	fmt.Fprintln(w, "cold lower bound above. digest hits: matches answered from a digest remembered in the store (verify.Options.DigestKey); cache hits:")
	fmt.Fprintln(w, "from the server's own result cache. The k3s models keep neither, so they have no warm-up: it would leave nothing behind.")
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
		fmt.Fprintf(w, "%s: %s.\n", name[r], s)
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
	attack := func(f func(*bench.AttackResult) any) func(*bench.Result) string {
		return func(r *bench.Result) string {
			if r.Attack == nil {
				return "-"
			}
			return fmt.Sprint(f(r.Attack))
		}
	}
	fault := func(f func(*bench.FaultResult) string) func(*bench.Result) string {
		return func(r *bench.Result) string {
			if r.Faults == nil {
				return "-"
			}
			return f(r.Faults)
		}
	}
	name := rowNames(results)
	cols := []column{modelCell(name), {"honest joined", joinedCell}, {"completion", completionCell}, {"ratio", ratioCell},
		{"local ratio", localRatioCell}, {"honest scrypt", attack(func(a *bench.AttackResult) any { return a.HonestScrypt })}}
	type figure = func(*bench.AttackResult) any
	for _, c := range []struct {
		on   bool
		head string
		f    figure
	}{
		{att, "guesses", func(a *bench.AttackResult) any { return a.Guesses }},
		{att, "accepted", func(a *bench.AttackResult) any { return a.GuessesAccepted }},
		{att, "guess scrypt", func(a *bench.AttackResult) any { return a.GuessScrypt }},
		{att, "pw known", func(a *bench.AttackResult) any { return a.GuessScryptKnown }},
		{tok, "token guesses", func(a *bench.AttackResult) any { return a.TokenGuesses }},
		{tok, "accepted", func(a *bench.AttackResult) any { return a.TokenGuessesAccepted }},
		{tok, "token scrypt", func(a *bench.AttackResult) any { return a.TokenScrypt }},
		{tok, "token guess scrypt", func(a *bench.AttackResult) any { return a.TokenGuessScrypt }},
		{dup, "dup requests", func(a *bench.AttackResult) any { return a.DuplicateRequests }},
		{dup, "dup accepted", func(a *bench.AttackResult) any { return a.DuplicatesAccepted }},
		{dup, "dup scrypt", func(a *bench.AttackResult) any { return a.DuplicateScrypt }},
		{dup, "max/dup", func(a *bench.AttackResult) any { return a.DuplicateScryptMax }},
		{dup, "after 403", func(a *bench.AttackResult) any { return a.DuplicateScryptAfterReject }},
	} {
		if c.on {
			cols = append(cols, column{c.head, attack(c.f)})
		}
	}
	if faults {
		cols = append(cols, column{"store calls", fault(func(f *bench.FaultResult) string { return fmt.Sprint(f.Calls) })},
			column{"failed", fault(func(f *bench.FaultResult) string { return percent(f.Failures, f.Calls) })},
			column{"slow", fault(func(f *bench.FaultResult) string { return percent(f.Spikes, f.Calls) })},
			column{"500s", fault(func(f *bench.FaultResult) string { return fmt.Sprint(f.FaultAnswers) })},
			column{"cached errors", fault(func(f *bench.FaultResult) string { return fmt.Sprint(f.CachedErrors) })},
			column{"recheck", fault(func(f *bench.FaultResult) string {
				if f.RecheckAsked == 0 {
					return "-"
				}
				return fmt.Sprintf("%d/%d", f.RecheckJoined, f.RecheckAsked)
			})})
	}
	fmt.Fprintln(w)
	writeColumns(w, results, append(cols, column{"peak heap", peakHeapCell}))
	fmt.Fprintln(w, "\nhonest scrypt, guess scrypt and dup scrypt: the servers' scrypt computations by whose password they checked.")
	fmt.Fprint(w, joinIf("", att, "guesses: the attackers' requests; accepted: those answered 200 (must be 0); pw known: guess computations that started after the\n"+
		"server knew that node's own password (a server that checked for a known match then would not have run them).\n",
		tok, "token guesses: attempts with a wrong join token (each ends at its first authenticated request); accepted: answered 200 (must be 0);\n"+
			"token scrypt and token guess scrypt: computations over the agents' join token and over the guessed ones.\n",
		dup, "dup: the duplicate-hostname machines; max/dup: the most computations over one duplicate's password; after 403: computations over\n"+
			"a duplicate's password that finished after it had got its first 403 (the cost of its retries).\n",
		faults, "store calls: every server's; 500s: requests answered with an injected fault; cached errors: those whose own store calls had all\n"+
			"succeeded (must be 0); recheck: with faults off after the run, every honest node asked every server once more: answered 200 / asked.\n"))
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
		return fmt.Sprintf("%d MiB (the default)", verify.DefaultScryptMemory>>20)
	}
	return fmt.Sprintf("%d MiB", scryptMemory>>20)
}
