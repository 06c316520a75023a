package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/nodepass/nodepass/bench"
)

// rebootNote describes sc's reboot and digests in words.
func rebootNote(sc bench.Scenario) string {
	key := "nodepass with a DigestKey shared by its servers (the k3s models have no equivalent)"
	if sc.NoDigestKey {
		key = "nodepass without a DigestKey (-digest-key=false)"
	}
	switch sc.Reboot {
	case bench.RebootAgents:
		return "reboot of the agents: every node joined once before (unmeasured), the servers stayed up; " + key
	case bench.RebootAll:
		return fmt.Sprintf("reboot of agents and servers: every node joined once before (unmeasured), then new servers over the same store; %s", key)
	}
	return "cold herd: no node verified since the servers started; " + key
}

// writeRemembered prints, for a reboot or when any server answered from a
// remembered digest, a table of the scrypt work the herd cost and how
// much was answered without it, and one summary line per model.
func writeRemembered(w io.Writer, sc bench.Scenario, results []*bench.Result) {
	name := rowNames(results)
	show := sc.Reboot != bench.RebootNone && sc.Reboot != ""
	for _, r := range results {
		show = show || r.DigestHits > 0
	}
	if !show {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\treboot\tdigest key\tjoined\t1st attempt\tcompletion\tratio to cold\tscrypt\tscrypt/node\tdigest hits\tcache hits\twarm-up scrypt\twarm-up digests\t")
	for _, r := range results {
		key := "no"
		if r.DigestKey {
			key = "yes"
		}
		perNode := "-"
		if r.Joined > 0 {
			perNode = fmt.Sprintf("%.2f", r.ScryptRunsPerNode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t\n",
			name[r], orNone(r.Reboot), key, r.Joined, r.Nodes, r.FirstAttempt, floor(r, secs(r.Completion)),
			floor(r, fmt.Sprintf("%.2f", r.Ratio)), r.ScryptRuns, perNode, r.DigestHits, r.CacheHits, r.WarmupScrypt, r.WarmupDigests)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nscrypt, digest hits and cache hits: the servers' during the measured herd only (not the warm-up); ratio to cold = completion / the")
	fmt.Fprintln(w, "cold lower bound above (one scrypt per node on every CPU). digest hits: requests answered as matches from a digest remembered in the")
	fmt.Fprintln(w, "store (verify.Options.DigestKey); cache hits: from the server's own result cache. The k3s models keep no result cache and have no")
	fmt.Fprintln(w, "digest, so they have no warm-up either: it would cost a scrypt per node and leave nothing behind.")
	for _, r := range results {
		fmt.Fprintf(w, "%s: %s\n", name[r], rememberedSummary(r))
	}
}

// rememberedSummary is one model's figures in a sentence.
func rememberedSummary(r *bench.Result) string {
	s := fmt.Sprintf("reboot %s: %d scrypt during the herd (%d digest hits, %d cache hits); %d/%d joined, %d on their first attempt, in %s = %.2f × the cold lower bound",
		orNone(r.Reboot), r.ScryptRuns, r.DigestHits, r.CacheHits, r.Joined, r.Nodes, r.FirstAttempt, floor(r, secs(r.Completion)), r.Ratio)
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
	return s + "."
}

func orNone(r bench.Reboot) string {
	if r == "" {
		return string(bench.RebootNone)
	}
	return string(r)
}
