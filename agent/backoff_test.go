package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

const draws = 10000

// checkUniform checks that ds spread uniformly over [lo, hi): every one
// within, and each tenth of the range holding 10 % ± 2.5 % of them (six
// standard deviations at 10,000 draws).
func checkUniform(t *testing.T, name string, ds []time.Duration, lo, hi time.Duration) {
	t.Helper()
	var buckets [10]int
	for _, d := range ds {
		if d < lo || d >= hi {
			t.Fatalf("%s: %v outside [%v, %v)", name, d, lo, hi)
		}
		buckets[int(10*(d-lo)/(hi-lo))]++
	}
	for i, n := range buckets {
		if frac := float64(n) / float64(len(ds)); frac < 0.075 || frac > 0.125 {
			t.Errorf("%s: tenth %d of [%v, %v) holds %.1f %% of the waits, want 10 %%", name, i, lo, hi, 100*frac)
		}
	}
}

// At the cap, the waits spread over [0, Cap): the jitter is drawn after
// the cap, not clamped by it.
func TestBackoffJitterAfterCap(t *testing.T) {
	b := Backoff{Base: time.Second, Cap: 8 * time.Second}
	for range 10 {
		b.Next(0)
	}
	ds := make([]time.Duration, draws)
	for i := range ds {
		ds[i] = b.Next(0)
	}
	checkUniform(t, "at the cap", ds, 0, 8*time.Second)
}

// The n-th wait in a row spreads over [0, min(Cap, Base·2^(n-1))).
func TestBackoffExponential(t *testing.T) {
	for n, ceil := range []time.Duration{1, 2, 4, 8, 10, 10} {
		ceil *= time.Second
		ds := make([]time.Duration, draws)
		for i := range ds {
			b := Backoff{Base: time.Second, Cap: 10 * time.Second}
			for range n {
				b.Next(0)
			}
			ds[i] = b.Next(0)
		}
		checkUniform(t, fmt.Sprintf("wait %d", n+1), ds, 0, ceil)
	}
}

// Retry-After is a floor bounded by the cap, with the jitter on top: an
// hour counts as the cap, and agents told the same Retry-After spread
// over the jitter's range after it.
func TestBackoffRetryAfterBounded(t *testing.T) {
	top := 8 * time.Second
	for _, tc := range []struct {
		retryAfter, lo, hi time.Duration
	}{
		{time.Hour, top, 2 * top},
		{3 * time.Second, 3 * time.Second, 4 * time.Second}, // first failure: jitter over [0, Base)
	} {
		ds := make([]time.Duration, draws)
		for i := range ds {
			b := Backoff{Base: time.Second, Cap: top}
			if tc.retryAfter == time.Hour {
				for range 10 {
					b.Next(0)
				}
			}
			ds[i] = b.Next(tc.retryAfter)
		}
		checkUniform(t, fmt.Sprintf("Retry-After %v", tc.retryAfter), ds, tc.lo, tc.hi)
	}
}

// After Reset the waits start again from [0, Base).
func TestBackoffReset(t *testing.T) {
	b := Backoff{Base: time.Second, Cap: 8 * time.Second}
	ds := make([]time.Duration, draws)
	for i := range ds {
		for range 5 {
			b.Next(0)
		}
		b.Reset()
		ds[i] = b.Next(0)
	}
	checkUniform(t, "after Reset", ds, 0, time.Second)
}

func TestBackoffZeroValue(t *testing.T) {
	var b Backoff
	for range 20 {
		if d := b.Next(time.Hour); d < DefaultBackoffCap || d >= 2*DefaultBackoffCap {
			t.Fatalf("zero Backoff waited %v, want within [cap, 2·cap) of the default cap", d)
		}
	}
}

// Get's waits between attempts, in fake time, over many runs: after a
// failure the backoff's draw; after a 403 at least the cap; after a
// server's Retry-After at least that (bounded by the cap); reset once an
// attempt succeeds.
func TestRetryWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const base, top = time.Second, 8 * time.Second
		dir := t.TempDir()
		c, err := New(&Options{Server: "https://127.0.0.1:1", Token: "secret", NodeName: "n", DataDir: dir,
			NodePasswordFile: filepath.Join(dir, "pw"), Backoff: Backoff{Base: base, Cap: top}, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Each run: a failure, a 403, a 503 with Retry-After 5 s, a
		// success, a failure.
		var gaps [4][]time.Duration
		for range 2000 {
			var times []time.Time
			script := []func() error{
				func() error { return errors.New("agent: connection refused") },
				func() error { return fmt.Errorf("%w: 403", ErrNodePasswordRejected) },
				func() error {
					c.askedUntil = time.Now().Add(5 * time.Second) // a server's Retry-After
					return errors.New("agent: 503")
				},
				func() error { return nil },
			}
			attempt := func(context.Context) (*Result, error) {
				times = append(times, time.Now())
				err := script[0]()
				script = script[1:]
				if err != nil {
					return nil, err
				}
				return &Result{}, nil
			}
			c.mu.Lock()
			if _, err := c.retry(t.Context(), attempt, false); err != nil {
				t.Fatal(err)
			}
			c.mu.Unlock()
			// After the success, the next failure waits [0, base) again.
			start := time.Now()
			c.mu.Lock()
			script = []func() error{func() error { return errors.New("again") }, func() error { return nil }}
			if _, err := c.retry(t.Context(), attempt, false); err != nil {
				t.Fatal(err)
			}
			c.mu.Unlock()
			gaps[0] = append(gaps[0], times[1].Sub(times[0]))
			gaps[1] = append(gaps[1], times[2].Sub(times[1]))
			gaps[2] = append(gaps[2], times[3].Sub(times[2]))
			gaps[3] = append(gaps[3], time.Since(start))
		}
		checkSpread(t, "first failure", gaps[0], 0, base)
		checkSpread(t, "after a 403", gaps[1], top, top+2*base)
		checkSpread(t, "after Retry-After 5s", gaps[2], 5*time.Second, 5*time.Second+4*base)
		checkSpread(t, "after a success", gaps[3], 0, base)
	})
}

// checkSpread checks that ds lie within [lo, hi) and cover most of it.
func checkSpread(t *testing.T, name string, ds []time.Duration, lo, hi time.Duration) {
	t.Helper()
	least, most := ds[0], ds[0]
	for _, d := range ds {
		if d < lo || d >= hi {
			t.Fatalf("%s: waited %v, want within [%v, %v)", name, d, lo, hi)
		}
		least, most = min(least, d), max(most, d)
	}
	if span := hi - lo; least-lo > span/20 || hi-most > span/20 {
		t.Errorf("%s: waits within [%v, %v], want spread over [%v, %v)", name, least, most, lo, hi)
	}
}

// A cap of 2^62 ns or more: the waits stay positive and within twice the
// cap, after a Retry-After at the cap too, however many failures.
func TestBackoffHugeCap(t *testing.T) {
	for _, ceil := range []time.Duration{1 << 62, math.MaxInt64} {
		b := Backoff{Base: time.Second, Cap: ceil}
		for i := range 200 {
			floor := time.Duration(0)
			if i%2 == 1 {
				floor = ceil // after a 401 or 403
			}
			if d := b.Next(floor); d < floor || d < 0 {
				t.Fatalf("cap %v, failure %d: wait %v", ceil, i+1, d)
			}
		}
	}
}
