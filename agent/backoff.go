package agent

import (
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of Backoff; the package doc says why.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffCap  = 15 * time.Second
)

// Backoff computes how long an agent waits after a failed attempt:
// exponential with full jitter, the jitter drawn after the cap. After the
// n-th failure in a row (n = 1, 2, ...) the wait is
//
//	min(floor, Cap) + U[0, min(Cap, Base·2^(n-1)))
//
// where floor is what the servers asked for (Retry-After) or 0. The
// jitter is drawn over the capped ceiling, so agents at the cap still
// spread over [0, Cap) instead of retrying in step; and it is added on top
// of the floor, so agents told the same Retry-After do not come back in
// the same second. A wait is therefore at most 2·Cap.
//
// The zero Backoff uses DefaultBackoffBase and DefaultBackoffCap. A
// Backoff is not safe for concurrent use: each agent has its own.
type Backoff struct {
	// Base is the ceiling of the first wait. Zero means DefaultBackoffBase.
	Base time.Duration
	// Cap bounds the ceiling and the floor. Zero means DefaultBackoffCap.
	Cap time.Duration

	failures int // since the last Reset
}

// Next records a failure and returns the wait before the next attempt.
// floor is the least the servers asked to wait (their Retry-After, or
// how long until one of them may be tried again); it counts up to Cap.
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
	span = min(span, ceil)
	b.failures++
	wait := floor + rand.N(span)
	if wait < floor { // past the largest Duration
		return math.MaxInt64
	}
	return wait
}

// Reset forgets the failures: the next wait is drawn from [0, Base) again.
// Call it after a successful attempt.
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
