package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Policy is an agent's retry policy: how long it waits after a failed
// attempt before it asks again. Implementations must be safe for
// concurrent use; the randomness comes from the caller's source.
type Policy interface {
	// Delay returns the wait after the failures-th failed attempt in a row
	// (1 for the first). retryAfter is the server's Retry-After, or 0 when
	// it sent none.
	Delay(failures int, retryAfter time.Duration, rng *rand.Rand) time.Duration
	// String returns the policy's name, as ParsePolicy accepts it.
	String() string

	validate() error
	scaled(f float64) Policy
	// honoursRetryAfter reports whether the agent comes back when the
	// server's Retry-After says.
	honoursRetryAfter() bool
}

// Policy names accepted by ParsePolicy; PolicyNodepass is this module's
// agent.Client (ClientPolicy).
const (
	PolicyFixed    = "fixed-5s"
	PolicyJitter   = "jitter-5-10s"
	PolicyBackoff  = "backoff"
	PolicyNodepass = "nodepass"
)

var policyNames = []string{PolicyJitter, PolicyFixed, PolicyBackoff, PolicyNodepass, PolicyNodepass + "-lb"}

// PolicyNames returns the names ParsePolicy accepts, the default first.
func PolicyNames() []string { return slices.Clone(policyNames) }

// ParsePolicy returns the policy named name: "fixed-5s" (the k3s agent
// before jitter was added), "jitter-5-10s" (k3s agents today),
// "backoff" (k3s's agent with full-jitter exponential backoff, base 1 s,
// cap 30 s, honouring Retry-After), "nodepass" (this module's
// agent.Client, see ClientPolicy) or "nodepass-lb" (the same through its
// own load balancer).
func ParsePolicy(name string) (Policy, error) {
	switch name {
	case PolicyFixed:
		return JitterPolicy{Min: 5 * time.Second, Max: 5 * time.Second}, nil
	case PolicyJitter:
		return JitterPolicy{Min: 5 * time.Second, Max: 10 * time.Second}, nil
	case PolicyBackoff:
		return BackoffPolicy{Base: time.Second, Cap: 30 * time.Second}, nil
	case PolicyNodepass:
		return ClientPolicy{}, nil
	case PolicyNodepass + "-lb":
		return ClientPolicy{ViaLoadBalancer: true}, nil
	}
	return nil, fmt.Errorf("bench: unknown agent policy %q: want one of %q", name, policyNames)
}

// JitterPolicy waits a uniformly random time in [Min, Max) after every
// failure (Min when they are equal: a fixed wait) and ignores
// Retry-After.
type JitterPolicy struct{ Min, Max time.Duration }

// Delay returns a random duration in [Min, Max), or Min.
func (p JitterPolicy) Delay(_ int, _ time.Duration, rng *rand.Rand) time.Duration {
	return p.Min + randDur(rng, p.Max-p.Min)
}

func (p JitterPolicy) String() string {
	switch {
	case p.Min == 5*time.Second && p.Max == 10*time.Second:
		return PolicyJitter
	case p.Min == 5*time.Second && p.Max == p.Min:
		return PolicyFixed
	case p.Max == p.Min:
		return fmt.Sprintf("fixed-%v", p.Min)
	}
	return fmt.Sprintf("jitter-%v-%v", p.Min, p.Max)
}

func (p JitterPolicy) validate() error {
	if p.Min < 0 || p.Max < p.Min {
		return fmt.Errorf("bench: jitter policy: want 0 <= min <= max, have %v, %v", p.Min, p.Max)
	}
	return nil
}

func (JitterPolicy) honoursRetryAfter() bool { return false }

func (p JitterPolicy) scaled(f float64) Policy {
	return JitterPolicy{Min: scaleDur(p.Min, f), Max: scaleDur(p.Max, f)}
}

// BackoffPolicy is full-jitter exponential backoff: after the n-th failure
// in a row it waits a uniformly random time in [0, min(Cap, Base·2^(n-1))).
// When the server sent Retry-After it waits exactly that instead: the
// server's estimate already spreads the herd, and a nodepass server answers
// a retry that comes back then from its cache.
type BackoffPolicy struct{ Base, Cap time.Duration }

// Delay returns retryAfter when positive, else the full-jitter backoff.
func (p BackoffPolicy) Delay(failures int, retryAfter time.Duration, rng *rand.Rand) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	ceiling, shift := p.Cap, min(max(failures, 1)-1, 62)
	if c := p.Base << shift; c > 0 && c < ceiling && c>>shift == p.Base {
		ceiling = c // no overflow
	}
	return randDur(rng, ceiling)
}

func (p BackoffPolicy) String() string {
	if p.Base == time.Second && p.Cap == 30*time.Second {
		return PolicyBackoff
	}
	return fmt.Sprintf("backoff-%v-%v", p.Base, p.Cap)
}

func (p BackoffPolicy) validate() error {
	if p.Base <= 0 || p.Cap < p.Base {
		return fmt.Errorf("bench: backoff policy: want 0 < base <= cap, have %v, %v", p.Base, p.Cap)
	}
	return nil
}

func (BackoffPolicy) honoursRetryAfter() bool { return true }

func (p BackoffPolicy) scaled(f float64) Policy {
	return BackoffPolicy{Base: scaleDur(p.Base, f), Cap: scaleDur(p.Cap, f)}
}

// randDur returns a uniformly random duration in [0, d), or 0 if d <= 0.
func randDur(rng *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(d)))
}

func scaleDur(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }
