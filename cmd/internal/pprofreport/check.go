package pprofreport

import (
	"fmt"
	"math"
	"strings"

	"github.com/nodepass/nodepass/verify"
)

// Limits are what Check enforces. profiles/README.md says why each value
// of DefaultLimits was chosen.
type Limits struct {
	// MaxPerNode is the most scrypt CPU per joined node, in units of one
	// scrypt's CPU in the same run (Report.PerNode).
	MaxPerNode float64
	// MaxOwnShare is the most the module's own code may take of the
	// sampled CPU: a guard against gross growth (drift is the baseline
	// comparison's job), set well above the sampling noise of a few
	// hundred samples.
	MaxOwnShare float64
	// MinSamples is the fewest samples a profile needs for its shares to
	// mean anything.
	MinSamples int64
	// MinLabelled is the least share of the Scrypt category that must
	// carry the label nodepass.verify=scrypt (Report.ScryptLabelled): the
	// categories are read from the labels, and scrypt work that lost its
	// label would move to the runtime and GC shares unseen.
	MinLabelled float64
	// PerNodeTolerance is how far Report.PerNode may rise above the
	// baseline's, as a fraction of the baseline's.
	PerNodeTolerance float64
	// A share may move the wrong way from the baseline's (scrypt down;
	// own code, GC or runtime up) by at most Sigmas standard deviations
	// of the difference between two runs' shares. A share p measured
	// over n samples varies by p(1-p)/n from sampling alone, and by
	// p(1-p)/MachineSamples more from run to run on a shared machine, as
	// if the machine's own noise were a sample of MachineSamples.
	Sigmas         float64
	MachineSamples float64
}

// DefaultLimits are the limits make profile-check applies.
var DefaultLimits = Limits{
	MaxPerNode:       1.25,
	MaxOwnShare:      0.04,
	MinSamples:       150,
	MinLabelled:      0.95,
	PerNodeTolerance: 0.05,
	Sigmas:           3.5,
	MachineSamples:   50,
}

// Verdict is one figure Check looked at.
type Verdict struct {
	// Figure names what was checked.
	Figure string
	// OK is false when the figure is past its limit.
	OK bool
	// Detail says the value, the limit and, on failure, what it may mean.
	Detail string
}

func (v Verdict) String() string {
	status := "ok  "
	if !v.OK {
		status = "FAIL"
	}
	return fmt.Sprintf("%s %s: %s", status, v.Figure, v.Detail)
}

// Failed reports whether any verdict failed.
func Failed(vs []Verdict) bool {
	for _, v := range vs {
		if !v.OK {
			return true
		}
	}
	return false
}

// Check checks cur (which needs its run's figures, Report.AttachRun)
// against lim, and against base when base is not nil. Only shares and
// per-node ratios are compared, never absolute times: the machine the
// baseline was made on may be faster or busier.
func Check(cur, base *Report, lim Limits) []Verdict {
	var out []Verdict
	add := func(figure string, ok bool, format string, a ...any) {
		out = append(out, Verdict{Figure: figure, OK: ok, Detail: fmt.Sprintf(format, a...)})
	}
	switch {
	case cur.Run == nil:
		add("run figures", false, "no result for model %q in the run's JSON: scrypt CPU per joined node cannot be computed", cur.Name)
	case cur.Run.Stopped != "" || cur.Run.Joined < cur.Run.Nodes:
		add("run", false, "%d of %d nodes joined (%s): the profile does not cover a whole herd", cur.Run.Joined, cur.Run.Nodes, orDash(cur.Run.StopDetail))
	case cur.Samples < lim.MinSamples:
		add("samples", false, "%d samples, want at least %d: too few for the shares to mean anything (more nodes, a higher logN or a higher rate)", cur.Samples, lim.MinSamples)
	default:
		checkLimits(cur, lim, add)
		if base != nil {
			checkBaseline(cur, base, lim, add)
		}
	}
	return out
}

func checkLimits(cur *Report, lim Limits, add func(figure string, ok bool, format string, a ...any)) {
	labelled := float64(cur.ScryptLabelled) / float64(max(cur.CPU[Scrypt], 1))
	label := verify.ProfileLabel + "=" + verify.ProfileScrypt
	why := ""
	if labelled < lim.MinLabelled {
		why = ": the categories are read from that label. Did a scrypt computation lose it (verify's, or a model's in bench), or was the profile made before the labels?"
	}
	add("scrypt labelled", why == "", "%s of the scrypt work carried %s, want at least %s%s", pct(labelled), label, pct(lim.MinLabelled), why)
	perNode, ok := cur.PerNode()
	perNodeCPU, _ := cur.ScryptPerNode()
	oneScrypt, _ := cur.OneScrypt()
	switch {
	case !ok:
		add("scrypt per joined node", false, "the scrypt calls are not known: the run's JSON has no scrypt runs")
	case perNode > lim.MaxPerNode:
		add("scrypt per joined node", false, "%.2f × one scrypt's CPU, limit %.2f: %s of scrypt CPU per joined node, one scrypt %s in the same run "+
			"(%d scrypt calls for %d joined nodes). Is scrypt running more than once per node?",
			perNode, lim.MaxPerNode, ms(perNodeCPU), ms(oneScrypt), cur.Run.ScryptRuns, cur.Run.Joined)
	case perNode < 1/lim.MaxPerNode:
		add("scrypt per joined node", false, "%.2f scrypt calls per joined node: fewer than one, so the count is wrong (or nodes joined without scrypt, which a cold herd cannot)", perNode)
	default:
		add("scrypt per joined node", true, "%.2f × one scrypt's CPU (%s per node, one scrypt %s in the same run), limit %.2f", perNode, ms(perNodeCPU), ms(oneScrypt), lim.MaxPerNode)
	}
	own, why := cur.OwnShare(), ""
	if own > lim.MaxOwnShare {
		var parts []string
		for _, c := range OwnCode() {
			parts = append(parts, fmt.Sprintf("%s %s", c, pct(cur.Share(c))))
		}
		why = ": " + strings.Join(parts, ", ") + "; the module's overhead around scrypt has grown (see the top functions)"
	}
	add("own code", why == "", "%s of the sampled CPU, limit %s%s", pct(own), pct(lim.MaxOwnShare), why)
}

// checkBaseline checks how far cur moved from base: scrypt per joined
// node, and each share the wrong way (scrypt down; own code, GC or
// runtime up) past the noise (Limits.ShareTolerance).
func checkBaseline(cur, base *Report, lim Limits, add func(figure string, ok bool, format string, a ...any)) {
	perNode, _ := cur.PerNode()
	if bRatio, ok := base.PerNode(); ok && perNode > 0 {
		limit := bRatio * (1 + lim.PerNodeTolerance)
		add("scrypt per joined node vs baseline", perNode <= limit, "%.3f × one scrypt, baseline %.3f, limit %.3f (baseline + %.0f%%)",
			perNode, bRatio, limit, 100*lim.PerNodeTolerance)
	}
	for _, s := range []struct {
		name string
		cats []Category
		up   bool // a rise is the regression
	}{
		{"scrypt share", []Category{Scrypt}, false}, {"own code share", OwnCode(), true},
		{"gc share", []Category{GC}, true}, {"runtime share", []Category{Runtime}, true},
	} {
		pc, pb := cur.Share(s.cats...), base.Share(s.cats...)
		tol := lim.ShareTolerance(pb, base.Samples, pc, cur.Samples)
		moved, dir := pc-pb, "rise"
		if !s.up {
			moved, dir = -moved, "fall"
		}
		add(s.name+" vs baseline", moved <= tol, "%s, baseline %s (%+.1f points; a %s of up to %.1f points is within the noise)",
			pct(pc), pct(pb), 100*(pc-pb), dir, 100*tol)
	}
}

// ShareTolerance is how far a share may move between a baseline (share
// pb over nb samples) and a new profile (pc over nc samples) before Check
// calls it a regression: Sigmas standard deviations of the difference,
// sampling and machine noise together (see Limits). Each share is taken
// with half a sample added (p = (pn + 0.5)/(n + 1)), so that one seen in
// no sample does not get a tolerance of 0.
func (lim Limits) ShareTolerance(pb float64, nb int64, pc float64, nc int64) float64 {
	variance := func(p float64, n int64) float64 {
		v := 0.0
		if n > 0 {
			v += 1 / float64(n)
			// Half a sample more of the share and of the rest, so that
			// a share seen 0 times still has a variance.
			p = (p*float64(n) + 0.5) / float64(n+1)
		}
		if lim.MachineSamples > 0 {
			v += 1 / lim.MachineSamples
		}
		return p * (1 - p) * v
	}
	return lim.Sigmas * math.Sqrt(variance(pb, nb)+variance(pc, nc))
}
