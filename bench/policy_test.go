package bench

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestParsePolicy(t *testing.T) {
	for _, name := range PolicyNames() {
		p, err := ParsePolicy(name)
		if err != nil {
			t.Fatalf("ParsePolicy(%q): %v", name, err)
		}
		if p.String() != name {
			t.Errorf("ParsePolicy(%q).String() = %q", name, p.String())
		}
	}
	if _, err := ParsePolicy("jitter"); err == nil {
		t.Error("ParsePolicy(jitter) did not fail")
	}
}

func TestPolicyDelays(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fixed, _ := ParsePolicy(PolicyFixed)
	jitter, _ := ParsePolicy(PolicyJitter)
	backoff, _ := ParsePolicy(PolicyBackoff)
	for failures := 1; failures <= 100; failures++ {
		// Fixed and jitter ignore Retry-After, as k3s agents do.
		if d := fixed.Delay(failures, 3*time.Second, rng); d != 5*time.Second {
			t.Fatalf("fixed delay %v", d)
		}
		if d := jitter.Delay(failures, time.Second, rng); d < 5*time.Second || d >= 10*time.Second {
			t.Fatalf("jitter delay %v outside [5s, 10s)", d)
		}
		ceiling := 30 * time.Second // reached after 6 failures: 2^5 s > 30 s
		if failures <= 5 {
			ceiling = time.Second << (failures - 1)
		}
		if d := backoff.Delay(failures, 0, rng); d < 0 || d >= ceiling {
			t.Fatalf("backoff delay after %d failures: %v outside [0, %v)", failures, d, ceiling)
		}
		// Backoff honours Retry-After exactly.
		if d := backoff.Delay(failures, 7*time.Second, rng); d != 7*time.Second {
			t.Fatalf("backoff with Retry-After 7s waited %v", d)
		}
	}
}

// TestBackoffSpreads checks that full jitter uses its whole range: over
// many draws after the 5th failure some delays land in each quarter of
// [0, 16s).
func TestBackoffSpreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := BackoffPolicy{Base: time.Second, Cap: 30 * time.Second}
	var quarters [4]int
	for range 1000 {
		quarters[p.Delay(5, 0, rng)/(4*time.Second)]++
	}
	for q, n := range quarters {
		if n < 150 {
			t.Errorf("quarter %d of [0, 16s) got %d of 1000 delays", q, n)
		}
	}
}

func TestPolicyValidateAndScale(t *testing.T) {
	bad := []Policy{
		JitterPolicy{Min: -1, Max: -1},
		JitterPolicy{Min: 2, Max: 1},
		BackoffPolicy{Base: 0, Cap: 1},
		BackoffPolicy{Base: 2, Cap: 1},
	}
	for _, p := range bad {
		if p.validate() == nil {
			t.Errorf("%#v: no validation error", p)
		}
	}
	got := JitterPolicy{Min: 5 * time.Second, Max: 10 * time.Second}.scaled(0.1)
	if want := (JitterPolicy{Min: 500 * time.Millisecond, Max: time.Second}); got != want {
		t.Errorf("scaled jitter = %v, want %v", got, want)
	}
}
