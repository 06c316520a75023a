package agent

import (
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of Backoff.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffCap  = 15 * time.Second
)

// Backoff computes how long an agent waits after a failed attempt. After
// the n-th failure in a row the wait is
//
//	min(floor, Cap) + U[0, min(Cap, Base·2^(n-1)))
//
// where floor is what the servers asked for (Retry-After), or 0. The
// jitter is drawn after the cap, so agents at the cap do not retry in
// step. It comes on top of the floor, so agents told the same Retry-After
// do not come back in the same second. The zero Backoff has the default
// Base and Cap. A Backoff is not safe for concurrent use.
type Backoff struct {
	Base time.Duration // the first wait's ceiling; default DefaultBackoffBase
	Cap  time.Duration // the bound of ceiling and floor; default DefaultBackoffCap

	failures int // since the last Reset
}

// Next records a failure and returns the wait before the next attempt,
// at least floor (up to Cap).
func (b *Backoff) Next(floor time.Duration) time.Duration {
	base, ceil := b.bounds()
	floor = min(max(floor, 0), ceil)
	// base·2^failures, stopped at the cap before it can overflow.
	span := base
	for i := 0; i < b.failures && span < ceil; i++ {
		if span > ceil/2 {
			span = ceil
		} else {
			span *= 2
		}
	}
	b.failures++
	wait := floor + rand.N(span)
	if wait < floor { // past the largest Duration
		return math.MaxInt64
	}
	return wait
}

// Reset forgets the failures. Call it after a successful attempt.
func (b *Backoff) Reset() { b.failures = 0 }

// ceiling returns the cap in effect (Cap, or its default).
func (b *Backoff) ceiling() time.Duration {
	_, c := b.bounds()
	return c
}

func (b *Backoff) bounds() (base, ceil time.Duration) {
	base, ceil = b.Base, b.Cap
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if ceil <= 0 {
		ceil = DefaultBackoffCap
	}
	return base, max(ceil, base)
}
