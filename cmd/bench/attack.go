package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/nodepass/nodepass/bench"
)

// adversityNote describes sc's adversaries in words, or "" if none.
func adversityNote(sc bench.Scenario) string {
	var parts []string
	if sc.Attackers > 0 {
		parts = append(parts, fmt.Sprintf("%d attackers (%s names)", sc.Attackers, sc.AttackNames))
	}
	if sc.TokenGuessers > 0 {
		parts = append(parts, fmt.Sprintf("%d join-token guessers", sc.TokenGuessers))
	}
	if sc.Duplicates > 0 {
		parts = append(parts, fmt.Sprintf("%d duplicate hostnames", sc.Duplicates))
	}
	if sc.StoreFaults > 0 || sc.StoreSpikes > 0 {
		parts = append(parts, fmt.Sprintf("store calls fail with probability %g, and %g of the others take %v",
			sc.StoreFaults, sc.StoreSpikes, sc.StoreSpike))
	}
	return strings.Join(parts, "; ")
}

// errWrongAccept fails a run in which a wrong password got in.
var errWrongAccept = errors.New("a wrong password was accepted: see the table")

// column is one column of the adversity table.
type column struct {
	head string
	cell func(*bench.Result) string
}

// writeAdversity prints, when the results had attackers, duplicates or
// store faults, a second table with their figures, and says loudly what
// must never happen: a wrong password let in, an honest one turned away,
// a store error answered from a cache. It returns errWrongAccept when a
// wrong password got in.
func writeAdversity(w io.Writer, results []*bench.Result) error {
	var att, tok, dup, faults bool
	for _, r := range results {
		if a := r.Attack; a != nil {
			att = att || a.Attackers > 0
			tok = tok || a.TokenGuessers > 0
			dup = dup || a.Duplicates > 0
		}
		faults = faults || r.Faults != nil
	}
	if !att && !tok && !dup && !faults {
		return nil
	}
	name := rowNames(results)
	attack := func(f func(*bench.AttackResult) string) func(*bench.Result) string {
		return func(r *bench.Result) string {
			if r.Attack == nil {
				return "-"
			}
			return f(r.Attack)
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
	cols := []column{
		{"model", func(r *bench.Result) string { return name[r] }},
		{"honest joined", func(r *bench.Result) string { return fmt.Sprintf("%d/%d", r.Joined, r.Nodes) }},
		{"completion", func(r *bench.Result) string { return floor(r, secs(r.Completion)) }},
		{"ratio", func(r *bench.Result) string { return floor(r, fmt.Sprintf("%.2f", r.Ratio)) }},
		{"local ratio", func(r *bench.Result) string {
			if r.LocalBound == 0 {
				return "-"
			}
			return floor(r, fmt.Sprintf("%.2f", r.LocalRatio))
		}},
		{"honest scrypt", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.HonestScrypt) })},
	}
	if att {
		cols = append(cols,
			column{"guesses", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.Guesses) })},
			column{"accepted", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.GuessesAccepted) })},
			column{"guess scrypt", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.GuessScrypt) })},
			column{"pw known", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.GuessScryptKnown) })},
		)
	}
	if tok {
		cols = append(cols,
			column{"token guesses", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.TokenGuesses) })},
			column{"accepted", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.TokenGuessesAccepted) })},
			column{"token scrypt", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.TokenScrypt) })},
			column{"token guess scrypt", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.TokenGuessScrypt) })},
		)
	}
	if dup {
		cols = append(cols,
			column{"dup requests", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.DuplicateRequests) })},
			column{"dup accepted", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.DuplicatesAccepted) })},
			column{"dup scrypt", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.DuplicateScrypt) })},
			column{"max/dup", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.DuplicateScryptMax) })},
			column{"after 403", attack(func(a *bench.AttackResult) string { return fmt.Sprint(a.DuplicateScryptAfterReject) })},
		)
	}
	if faults {
		cols = append(cols,
			column{"store calls", fault(func(f *bench.FaultResult) string { return fmt.Sprint(f.Calls) })},
			column{"failed", fault(func(f *bench.FaultResult) string { return percent(f.Failures, f.Calls) })},
			column{"slow", fault(func(f *bench.FaultResult) string { return percent(f.Spikes, f.Calls) })},
			column{"500s", fault(func(f *bench.FaultResult) string { return fmt.Sprint(f.FaultAnswers) })},
			column{"cached errors", fault(func(f *bench.FaultResult) string { return fmt.Sprint(f.CachedErrors) })},
			column{"recheck", fault(func(f *bench.FaultResult) string {
				if f.RecheckAsked == 0 {
					return "-"
				}
				return fmt.Sprintf("%d/%d", f.RecheckJoined, f.RecheckAsked)
			})},
		)
	}
	cols = append(cols, column{"peak heap", func(r *bench.Result) string { return fmt.Sprintf("%.0f MiB", float64(r.PeakHeap)/(1<<20)) }})

	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i, c := range cols {
		fmt.Fprint(tw, c.head, "\t")
		if i == len(cols)-1 {
			fmt.Fprintln(tw)
		}
	}
	for _, r := range results {
		for _, c := range cols {
			fmt.Fprint(tw, c.cell(r), "\t")
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nhonest scrypt, guess scrypt and dup scrypt: the servers' scrypt computations by whose password they checked.")
	if att {
		fmt.Fprintln(w, "guesses: the attackers' requests; accepted: those answered 200 (must be 0); pw known: guess computations that started after the")
		fmt.Fprintln(w, "server knew that node's own password (a server that checked for a known match then would not have run them).")
	}
	if tok {
		fmt.Fprintln(w, "token guesses: attempts with a wrong join token (each ends at its first authenticated request); accepted: answered 200 (must be 0); token scrypt and token guess scrypt:")
		fmt.Fprintln(w, "computations over the agents' join token and over the guessed ones.")
	}
	if dup {
		fmt.Fprintln(w, "dup: the duplicate-hostname machines; max/dup: the most computations over one duplicate's password; after 403: computations over")
		fmt.Fprintln(w, "a duplicate's password that finished after it had got its first 403 (the cost of its retries).")
	}
	if faults {
		fmt.Fprintln(w, "store calls: every server's; 500s: requests answered with an injected fault; cached errors: those whose own store calls had all")
		fmt.Fprintln(w, "succeeded (must be 0); recheck: with faults off after the run, every honest node asked every server once more: answered 200 / asked.")
	}
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
