package pprofreport

import (
	"strings"
	"testing"
)

// verdict returns the verdict on figure, failing the test if there is
// none.
func verdict(t *testing.T, vs []Verdict, figure string) Verdict {
	t.Helper()
	for _, v := range vs {
		if v.Figure == figure {
			return v
		}
	}
	t.Fatalf("no verdict on %q in %v", figure, vs)
	return Verdict{}
}

func TestCheckPassesHealthyProfile(t *testing.T) {
	base := herd(t, healthy(), 200, 200)
	cur := herd(t, healthy(), 200, 200)
	vs := Check(cur, base, DefaultLimits)
	if Failed(vs) {
		t.Fatalf("a healthy profile failed:\n%s", join(vs))
	}
	if len(vs) != 8 {
		t.Errorf("%d verdicts, want 8 (the label, 2 limits, per node and 4 shares against the baseline):\n%s", len(vs), join(vs))
	}
}

func TestCheckFailsWhenScryptRunsTwicePerNode(t *testing.T) {
	base := herd(t, healthy(), 200, 200)
	twice := healthy()
	twice[&scryptStack] *= 2
	twice[&zeroStack] *= 2 // each call zeroes its own buffer
	cur := herd(t, twice, 200, 400)
	vs := Check(cur, base, DefaultLimits)
	v := verdict(t, vs, "scrypt per joined node")
	if v.OK || !strings.Contains(v.Detail, "2.00 × one scrypt") || !strings.Contains(v.Detail, "more than once per node") {
		t.Errorf("scrypt twice per node: %v", v)
	}
	if v := verdict(t, vs, "scrypt per joined node vs baseline"); v.OK {
		t.Errorf("against the baseline: %v", v)
	}
	// The same without a baseline: the limit alone catches it.
	if v := verdict(t, Check(cur, nil, DefaultLimits), "scrypt per joined node"); v.OK {
		t.Errorf("without a baseline: %v", v)
	}
}

func TestCheckFailsWhenOwnCodePassesFourPercent(t *testing.T) {
	base := herd(t, healthy(), 200, 200)
	heavy := healthy()
	heavy[&cacheStack] = 14 // 14 of 273 samples: 5.1%
	cur := herd(t, heavy, 200, 200)
	vs := Check(cur, base, DefaultLimits)
	v := verdict(t, vs, "own code")
	if v.OK || !strings.Contains(v.Detail, "5.1% of the sampled CPU, limit 4.0%") || !strings.Contains(v.Detail, "cache 5.1%") {
		t.Errorf("own code at 5.1%%: %v", v)
	}
	if v := verdict(t, vs, "scrypt per joined node"); !v.OK {
		t.Errorf("scrypt per node should pass: %v", v)
	}
	// 10 of 269 samples (3.7%) is within the limit.
	heavy[&cacheStack] = 10
	if v := verdict(t, Check(herd(t, heavy, 200, 200), nil, DefaultLimits), "own code"); !v.OK {
		t.Errorf("own code at 3.7%%: %v", v)
	}
}

func TestCheckShareAgainstBaseline(t *testing.T) {
	base := herd(t, healthy(), 200, 200)
	// GC from 8% to 61% of the samples, scrypt from 77% to 30%: far past
	// the noise.
	gcHeavy := healthy()
	gcHeavy[&gcStack] = 400
	vs := Check(herd(t, gcHeavy, 200, 200), base, DefaultLimits)
	if v := verdict(t, vs, "gc share vs baseline"); v.OK {
		t.Errorf("GC share up 53 points: %v", v)
	}
	if v := verdict(t, vs, "scrypt share vs baseline"); v.OK {
		t.Errorf("scrypt share down 47 points: %v", v)
	}
	// GC from 8% to 12%: within what two healthy runs differ by.
	gcHeavy[&gcStack] = 32
	if vs := Check(herd(t, gcHeavy, 200, 200), base, DefaultLimits); Failed(vs) {
		t.Errorf("GC share up 4 points failed:\n%s", join(vs))
	}
}

func TestCheckCannotCheck(t *testing.T) {
	r := herd(t, healthy(), 200, 200)
	r.Run = nil
	if vs := Check(r, nil, DefaultLimits); !Failed(vs) || !strings.Contains(vs[0].Detail, "no result") {
		t.Errorf("without run figures: %v", vs)
	}
	r = herd(t, healthy(), 200, 200)
	r.Run.Joined, r.Run.Stopped, r.Run.StopDetail = 150, "deadline", "150 of 200 nodes joined by the 1m30s deadline"
	if vs := Check(r, nil, DefaultLimits); !Failed(vs) || !strings.Contains(vs[0].Detail, "150 of 200") {
		t.Errorf("a run that stopped: %v", vs)
	}
	r = herd(t, cpuSpec{&scryptStack: 100}, 100, 100)
	if vs := Check(r, nil, DefaultLimits); !Failed(vs) || !strings.Contains(vs[0].Detail, "100 samples, want at least 150") {
		t.Errorf("too few samples: %v", vs)
	}
	r = herd(t, healthy(), 200, 200)
	r.Run.ScryptRuns = 0
	if v := verdict(t, Check(r, nil, DefaultLimits), "scrypt per joined node"); v.OK || !strings.Contains(v.Detail, "no scrypt runs") {
		t.Errorf("without the model's count: %v", v)
	}
	r.Run.ScryptRuns = 100
	if v := verdict(t, Check(r, nil, DefaultLimits), "scrypt per joined node"); v.OK {
		t.Errorf("half a scrypt per node passed: %v", v)
	}
}

// TestCheckByLabel: a profile whose scrypt work does not carry verify's
// label fails, whether made before the labels or by code that lost them.
func TestCheckByLabel(t *testing.T) {
	old := cpuSpec{}
	for st, n := range healthy() {
		u := unlabelled(*st)
		old[&u] = n
	}
	v := verdict(t, Check(herd(t, old, 200, 200), nil, DefaultLimits), "scrypt labelled")
	if v.OK || !strings.Contains(v.Detail, "0.0% of the scrypt work carried nodepass.verify=scrypt") {
		t.Errorf("a profile without labels: %v", v)
	}
	// 25 of 225 scrypt samples without the label: 88.9%.
	lost := healthy()
	u := unlabelled(scryptStack)
	lost[&scryptStack], lost[&u] = 175, 25
	if v := verdict(t, Check(herd(t, lost, 200, 200), nil, DefaultLimits), "scrypt labelled"); v.OK || !strings.Contains(v.Detail, "88.9%") {
		t.Errorf("a profile with scrypt work unlabelled: %v", v)
	}
	if v := verdict(t, Check(herd(t, healthy(), 200, 200), nil, DefaultLimits), "scrypt labelled"); !v.OK || !strings.Contains(v.Detail, "100.0%") {
		t.Errorf("a healthy profile: %v", v)
	}
}

func TestShareTolerance(t *testing.T) {
	lim := Limits{Sigmas: 2}
	// Sampling alone: p = 0.5 over 100 samples twice, sd of the difference 0.0707.
	if got := lim.ShareTolerance(0.5, 100, 0.5, 100); got < 0.141 || got > 0.142 {
		t.Errorf("ShareTolerance = %v, want 0.1414", got)
	}
	lim.MachineSamples = 100 // as much again from the machine
	if got := lim.ShareTolerance(0.5, 100, 0.5, 100); got < 0.199 || got > 0.201 {
		t.Errorf("with machine noise: ShareTolerance = %v, want 0.2", got)
	}
	// A share seen in no sample of either profile still gets a tolerance.
	if got := DefaultLimits.ShareTolerance(0, 250, 0, 250); got < 0.005 || got > 0.05 {
		t.Errorf("ShareTolerance(0, 250, 0, 250) = %v, want a point or two", got)
	}
}

func join(vs []Verdict) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString(v.String() + "\n")
	}
	return b.String()
}
