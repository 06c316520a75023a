package pprofreport

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// categoryLabels are the row names of the text report.
var categoryLabels = [numCategories]string{
	Scrypt: "scrypt work", Request: "  request (cache miss)", Cache: "  cache",
	HTTPAuth: "  httpauth", Verify: "  verify (other)",
	TLSHTTP: "TLS/HTTP", GC: "GC", Runtime: "runtime", Other: "other (simulator, agents)",
}

// WriteText writes r as text: the figures, the share of each category,
// and the top functions flat and cumulative (top of each; 0 for none).
func WriteText(w io.Writer, r *Report, top int) {
	fmt.Fprintf(w, "%s (%s): %s\n", r.Name, orDash(r.File), runLine(r))
	fmt.Fprintf(w, "CPU sampled: %s over %s of wall time (%d samples at %d Hz", secs(r.Total), secs(r.Duration), r.Samples, r.Hz())
	if cov, ok := r.ProcessCoverage(); ok {
		fmt.Fprintf(w, "; %.0f%% of the CPU the process used during the run", 100*cov)
	}
	fmt.Fprintln(w, ")")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tCPU\tshare\t")
	for c := range numCategories {
		if c == TLSHTTP {
			fmt.Fprintf(tw, "own code (the four above)\t%s\t%s\t\n", secs(r.sum(OwnCode()...)), pct(r.OwnShare()))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", categoryLabels[c], secs(r.CPU[c]), pct(r.Share(c)))
	}
	tw.Flush()
	fmt.Fprintln(w, labelLine(r))
	if d, ok := r.ScryptPerNode(); !ok {
		fmt.Fprintln(w, "scrypt CPU per joined node: unknown (no run figures, or no node joined)")
	} else {
		x, _ := r.PerNode()
		one, _ := r.OneScrypt()
		fmt.Fprintf(w, "scrypt CPU per joined node: %s = %.2f × one scrypt in this run (%s: the scrypt work over the run's %d scrypt calls)\n",
			ms(d), x, ms(one), r.Run.ScryptRuns)
	}
	if top > 0 {
		writeTop(w, "flat", r.Flat, r.Total, top)
		writeTop(w, "cumulative", r.Cum, r.Total, top)
	}
}

// labelLine says how much of the scrypt work was found by its label.
func labelLine(r *Report) string {
	switch r.ScryptLabelled {
	case 0:
		return "no sample carries " + verify.ProfileLabel + "=" + verify.ProfileScrypt + ": scrypt found by package paths only (a profile made before the labels)"
	case r.CPU[Scrypt]:
		return "all the scrypt work carried " + verify.ProfileLabel + "=" + verify.ProfileScrypt
	}
	return fmt.Sprintf("%s of the scrypt work carried %s=%s (the rest was found by package paths)",
		pct(float64(r.ScryptLabelled)/float64(max(r.CPU[Scrypt], 1))), verify.ProfileLabel, verify.ProfileScrypt)
}

func runLine(r *Report) string {
	if r.Run == nil {
		return "no run figures (the run's JSON was not found)"
	}
	res := r.Run
	s := fmt.Sprintf("%d/%d nodes joined, logN %d, %s mode, %s agents, %d server(s)", res.Joined, res.Nodes, res.LogN, res.Mode, res.Agent, res.Servers)
	if res.Stopped != "" {
		s += ", stopped: " + res.Stopped
	}
	return s
}

func writeTop(w io.Writer, kind string, fs []FuncCPU, total time.Duration, n int) {
	fmt.Fprintf(w, "\ntop %d functions, %s:\n", n, kind)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, f := range fs[:min(n, len(fs))] {
		fmt.Fprintf(tw, "%s\t%s\t  %s\n", secs(f.CPU), pct(float64(f.CPU)/float64(max(total, 1))), f.Name)
	}
	tw.Flush()
}

// WriteMarkdown writes the hot-path table of every report, one row per
// model, and the split of the module's own code.
func WriteMarkdown(w io.Writer, rs []*Report) {
	fmt.Fprintln(w, "| model | joined | CPU sampled | scrypt work | own code | TLS/HTTP | GC | runtime | other | scrypt CPU per joined node | × one scrypt in the run |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		joined, perNode, inRun := "-", "-", "-"
		if r.Run != nil {
			joined = fmt.Sprintf("%d/%d", r.Run.Joined, r.Run.Nodes)
		}
		if d, ok := r.ScryptPerNode(); ok {
			perNode = ms(d)
		}
		if x, ok := r.PerNode(); ok {
			inRun = fmt.Sprintf("%.2f", x)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, joined, secs(r.Total),
			pct(r.Share(Scrypt)), pct(r.OwnShare()), pct(r.Share(TLSHTTP)), pct(r.Share(GC)), pct(r.Share(Runtime)), pct(r.Share(Other)),
			perNode, inRun)
	}
	fmt.Fprintln(w, "\nThe module's own code, split:\n\n| model | request (cache miss) | cache | httpauth | verify (other) |\n|---|---:|---:|---:|---:|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s |", r.Name)
		for _, c := range OwnCode() {
			fmt.Fprintf(w, " %.2f%% |", 100*r.Share(c))
		}
		fmt.Fprintln(w)
	}
}

// WriteDiff writes each figure of base and cur and its change, and the
// functions whose flat share moved, over the top functions of either.
func WriteDiff(w io.Writer, base, cur *Report, top int) {
	fmt.Fprintf(w, "base: %s: %s\nnew:  %s: %s\n\n", orDash(base.File), runLine(base), orDash(cur.File), runLine(cur))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tbase\tnew\tchange\t")
	fmt.Fprintf(tw, "CPU sampled\t%s\t%s\t%s\t\n", secs(base.Total), secs(cur.Total), relChange(float64(base.Total), float64(cur.Total)))
	fmt.Fprintf(tw, "samples\t%d\t%d\t%s\t\n", base.Samples, cur.Samples, relChange(float64(base.Samples), float64(cur.Samples)))
	for c := range numCategories {
		if c == TLSHTTP {
			fmt.Fprintf(tw, "own code\t%s\t%s\t%s\t\n", pct(base.OwnShare()), pct(cur.OwnShare()), points(base.OwnShare(), cur.OwnShare()))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", strings.TrimSpace(categoryLabels[c]), pct(base.Share(c)), pct(cur.Share(c)), points(base.Share(c), cur.Share(c)))
	}
	bd, okBase := base.ScryptPerNode()
	if cd, ok := cur.ScryptPerNode(); ok && okBase {
		fmt.Fprintf(tw, "scrypt CPU per joined node\t%s\t%s\t%s\t\n", ms(bd), ms(cd), relChange(float64(bd), float64(cd)))
	}
	br, okBase := base.PerNode()
	if cr, ok := cur.PerNode(); ok && okBase {
		fmt.Fprintf(tw, "scrypts per joined node (in-run)\t%.3f\t%.3f\t%s\t\n", br, cr, relChange(br, cr))
	}
	tw.Flush()
	if top <= 0 {
		return
	}
	fmt.Fprintf(w, "\nflat share of the top %d functions of either:\n", top)
	bf, cf := shares(base.Flat, base.Total), shares(cur.Flat, cur.Total)
	var names []string
	for _, fs := range [][]FuncCPU{base.Flat, cur.Flat} {
		for _, f := range fs[:min(top, len(fs))] {
			if !slices.Contains(names, f.Name) {
				names = append(names, f.Name)
			}
		}
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "base\tnew\tchange\t  function")
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t%s\t%s\t  %s\n", pct(bf[n]), pct(cf[n]), points(bf[n], cf[n]), n)
	}
	tw.Flush()
}

func shares(fs []FuncCPU, total time.Duration) map[string]float64 {
	m := make(map[string]float64, len(fs))
	for _, f := range fs {
		m[f.Name] = float64(f.CPU) / float64(max(total, 1))
	}
	return m
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func points(base, cur float64) string { return fmt.Sprintf("%+.1f pts", 100*(cur-base)) }

func relChange(base, cur float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(cur/base-1))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
