package pprofreport

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nodepass/nodepass/bench"
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
	fmt.Fprintf(w, "%s", r.Name)
	if r.File != "" {
		fmt.Fprintf(w, " (%s)", r.File)
	}
	fmt.Fprintf(w, ": %s\n", runLine(r))
	if r.Meta.Scenario != "" {
		fmt.Fprintf(w, "scenario: %s\n", r.Meta.Scenario)
	}
	fmt.Fprintf(w, "CPU sampled: %s over %s of wall time (%d samples at %d Hz", secs(r.Total), secs(r.Duration), r.Samples, r.Hz())
	if cov, ok := r.ProcessCoverage(); ok {
		fmt.Fprintf(w, "; %.0f%% of the CPU the process used during the run", 100*cov)
	}
	fmt.Fprintln(w, ")")

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tCPU\tshare\t")
	for _, c := range Categories() {
		if c == TLSHTTP {
			fmt.Fprintf(tw, "own code (the four above)\t%s\t%s\t\n", secs(sumCPU(r, OwnCode())), pct(r.OwnShare()))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", categoryLabels[c], secs(r.CPU[c]), pct(r.Share(c)))
	}
	tw.Flush()
	fmt.Fprintln(w, labelLine(r))
	if r.UnderScrypt != r.CPU[Scrypt] {
		fmt.Fprintf(w, "scrypt and the runtime work below it (allocating, zeroing its buffer): %s, %s\n",
			secs(r.UnderScrypt), pct(float64(r.UnderScrypt)/float64(max(r.Total, 1))))
	}
	if line := scryptByLine(r); line != "" {
		fmt.Fprintln(w, line)
	}
	if r.Preempted > 0 {
		fmt.Fprintf(w, "%s of the samples were taken on entry to runtime.asyncPreempt and are counted in the function it interrupted\n",
			pct(float64(r.Preempted)/float64(max(r.Total, 1))))
	}
	fmt.Fprintln(w, perNodeLine(r))
	if top > 0 {
		fmt.Fprintln(w)
		writeTop(w, "flat", r.Flat, r.Total, top)
		fmt.Fprintln(w)
		writeTop(w, "cumulative", r.Cum, r.Total, top)
	}
}

// labelLine says how much of the scrypt work was found by its label.
func labelLine(r *Report) string {
	if r.ScryptLabelled == 0 {
		return "no sample carries " + verify.ProfileLabel + "=" + verify.ProfileScrypt + ": scrypt found by package paths only (a profile made before the labels)"
	}
	if r.ScryptLabelled == r.CPU[Scrypt] {
		return "all the scrypt work carried " + verify.ProfileLabel + "=" + verify.ProfileScrypt
	}
	return fmt.Sprintf("%s of the scrypt work carried %s=%s (the rest was found by package paths)",
		pct(float64(r.ScryptLabelled)/float64(max(r.CPU[Scrypt], 1))), verify.ProfileLabel, verify.ProfileScrypt)
}

// scryptByLine splits the scrypt work by whose password it checked, or
// returns "" when the profile does not say.
func scryptByLine(r *Report) string {
	if len(r.ScryptBy) == 0 {
		return ""
	}
	var parts []string
	var known time.Duration
	for _, who := range []string{"honest", "guess", "duplicate"} {
		d := r.ScryptBy[who]
		known += d
		parts = append(parts, fmt.Sprintf("%s %s (%s)", who, secs(d), pct(float64(d)/float64(max(r.CPU[Scrypt], 1)))))
	}
	if rest := r.CPU[Scrypt] - known; rest > 0 {
		parts = append(parts, fmt.Sprintf("unlabelled %s (%s)", secs(rest), pct(float64(rest)/float64(max(r.CPU[Scrypt], 1)))))
	}
	return "scrypt work by whose password it checked (" + bench.PasswordLabel + "): " + strings.Join(parts, ", ")
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

func perNodeLine(r *Report) string {
	d, ok := r.ScryptPerNode()
	if !ok {
		if r.Run == nil {
			return "scrypt CPU per joined node: unknown without the run's JSON"
		}
		s := "scrypt CPU per joined node: no node joined"
		if r.HaveCalls {
			s += fmt.Sprintf(" (%d scrypt calls counted in the heap profile)", r.ScryptCalls)
		}
		return s
	}
	s := "scrypt CPU per joined node: " + ms(d)
	if x, ok := r.PerNode(); ok {
		one, _ := r.OneScryptInRun()
		s += fmt.Sprintf("\n  = %.2f × one scrypt in this run (%s: the scrypt work over the %d scrypt calls the heap profile counts, %s buffer each)",
			x, ms(one), r.ScryptCalls, mib(r.ScryptBuffer))
	}
	if x, ok := r.PerNodeVsBound(); ok {
		s += fmt.Sprintf("\n  = %.2f × one scrypt measured before the run (%s over %d verifications of the lower-bound sample; seconds apart, so it moves with the machine's speed)",
			x, ms(r.Meta.OneScrypt), r.Meta.Verifications)
	}
	return s + fmt.Sprintf("\n  the model counted %.2f scrypt runs per joined node", r.Run.ScryptRunsPerNode)
}

func writeTop(w io.Writer, kind string, fs []FuncCPU, total time.Duration, n int) {
	fmt.Fprintf(w, "top %d functions, %s:\n", n, kind)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, f := range fs[:min(n, len(fs))] {
		fmt.Fprintf(tw, "%s\t%s\t  %s\n", secs(f.CPU), pct(float64(f.CPU)/float64(max(total, 1))), f.Name)
	}
	tw.Flush()
}

// WriteMarkdown writes the hot-path table of every report, one row per
// model, and the split of the module's own code.
func WriteMarkdown(w io.Writer, rs []*Report) {
	fmt.Fprintln(w, "| model | joined | CPU sampled | scrypt work | scrypt with the runtime below it | own code | TLS/HTTP | GC | runtime | other | scrypt CPU per joined node | × one scrypt in the run | × one scrypt before the run |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		joined, perNode, inRun, before := "-", "-", "-", "-"
		if r.Run != nil {
			joined = fmt.Sprintf("%d/%d", r.Run.Joined, r.Run.Nodes)
		}
		if d, ok := r.ScryptPerNode(); ok {
			perNode = ms(d)
		}
		if x, ok := r.PerNode(); ok {
			inRun = fmt.Sprintf("%.2f", x)
		}
		if x, ok := r.PerNodeVsBound(); ok {
			before = fmt.Sprintf("%.2f", x)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, joined, secs(r.Total),
			pct(r.Share(Scrypt)), pct(float64(r.UnderScrypt)/float64(max(r.Total, 1))), pct(r.OwnShare()), pct(r.Share(TLSHTTP)), pct(r.Share(GC)), pct(r.Share(Runtime)), pct(r.Share(Other)),
			perNode, inRun, before)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The module's own code, split:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| model | request (cache miss) | cache | httpauth | verify (other) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s |", r.Name)
		for _, c := range OwnCode() {
			fmt.Fprintf(w, " %s |", pct2(r.Share(c)))
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
	for _, c := range Categories() {
		if c == TLSHTTP {
			fmt.Fprintf(tw, "own code\t%s\t%s\t%s\t\n", pct(base.OwnShare()), pct(cur.OwnShare()), points(base.OwnShare(), cur.OwnShare()))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", strings.TrimSpace(categoryLabels[c]), pct(base.Share(c)), pct(cur.Share(c)), points(base.Share(c), cur.Share(c)))
	}
	bd, bok := base.ScryptPerNode()
	cd, cok := cur.ScryptPerNode()
	if bok && cok {
		fmt.Fprintf(tw, "scrypt CPU per joined node\t%s\t%s\t%s\t\n", ms(bd), ms(cd), relChange(float64(bd), float64(cd)))
	}
	if bo, co := base.Meta.OneScrypt, cur.Meta.OneScrypt; bo > 0 && co > 0 {
		fmt.Fprintf(tw, "one scrypt\t%s\t%s\t%s\t\n", ms(bo), ms(co), relChange(float64(bo), float64(co)))
	}
	if br, cr, ok := both(base.PerNode, cur.PerNode); ok {
		fmt.Fprintf(tw, "scrypts per joined node (in-run)\t%.3f\t%.3f\t%s\t\n", br, cr, relChange(br, cr))
	}
	if br, cr, ok := both(base.PerNodeVsBound, cur.PerNodeVsBound); ok {
		fmt.Fprintf(tw, "scrypts per joined node (vs lower-bound sample)\t%.3f\t%.3f\t%s\t\n", br, cr, relChange(br, cr))
	}
	tw.Flush()

	if top <= 0 {
		return
	}
	fmt.Fprintf(w, "\nflat share of the top %d functions of either:\n", top)
	bf, cf := shares(base.Flat, base.Total), shares(cur.Flat, cur.Total)
	var names []string
	seen := map[string]bool{}
	for _, fs := range [][]FuncCPU{base.Flat, cur.Flat} {
		for _, f := range fs[:min(top, len(fs))] {
			if !seen[f.Name] {
				seen[f.Name] = true
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

func both(b, c func() (float64, bool)) (bv, cv float64, ok bool) {
	bv, bok := b()
	cv, cok := c()
	return bv, cv, bok && cok
}

func shares(fs []FuncCPU, total time.Duration) map[string]float64 {
	m := make(map[string]float64, len(fs))
	for _, f := range fs {
		m[f.Name] = float64(f.CPU) / float64(max(total, 1))
	}
	return m
}

func sumCPU(r *Report, cs []Category) time.Duration {
	var d time.Duration
	for _, c := range cs {
		d += r.CPU[c]
	}
	return d
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func pct2(f float64) string { return fmt.Sprintf("%.2f%%", 100*f) }

func points(base, cur float64) string { return fmt.Sprintf("%+.1f pts", 100*(cur-base)) }

func relChange(base, cur float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(cur/base-1))
}
