package agent

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// rotation is the servers an agent knows: the configured one and those
// the servers announce. Each request starts at the next server in
// round-robin order (the first at a random one, so that a herd of agents
// spreads over the servers) and moves along the order the servers are in.
// A server marked down is left out of the order until the time it was
// marked down until, unless every server is. The configured server stays
// in the list whatever the servers announce. A rotation is safe for
// concurrent use.
type rotation struct {
	mu         sync.Mutex
	configured string
	addrs      []string             // configured included; guarded by mu
	next       int                  // where the next Order starts; guarded by mu
	down       map[string]time.Time // address → until when it is left out; guarded by mu
}

// newRotation returns a rotation over configured and known (host:port
// addresses), known in its order, then configured if known does not hold
// it. Empty and repeated addresses are dropped.
func newRotation(configured string, known []string) *rotation {
	s := &rotation{configured: configured, down: make(map[string]time.Time)}
	s.addrs = merge(configured, known)
	if len(s.addrs) > 0 {
		s.next = rand.IntN(len(s.addrs))
	}
	return s
}

// merge is known without empty or repeated entries, then configured if
// it was not among them.
func merge(configured string, known []string) []string {
	out := make([]string, 0, len(known)+1)
	seen := make(map[string]bool, len(known)+1)
	for _, a := range append(slices.Clip(known), configured) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// order returns the servers the next request may try, in the order it
// tries them: every server that is not down at now, starting from the
// next one in round-robin order. When every server is down, it is the one
// that comes back first alone: an agent that has waited out its backoff
// asks it rather than none. Each call moves the round-robin position by
// one.
func (s *rotation) order(now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.addrs)
	out := make([]string, 0, n)
	first := ""
	for i := range n {
		a := s.addrs[(s.next+i)%n]
		if until, ok := s.down[a]; ok && now.Before(until) {
			if first == "" || until.Before(s.down[first]) {
				first = a
			}
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 && first != "" {
		out = append(out, first)
	}
	if n > 0 {
		s.next = (s.next + 1) % n
	}
	return out
}

// markDown leaves addr out of order until the time until. A later call
// for the same server replaces the time.
func (s *rotation) markDown(addr string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[addr] = until
}

// nextUp returns how long after now the first server comes back: 0 when
// one is up at now (or the list is empty).
func (s *rotation) nextUp(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Duration
	for i, a := range s.addrs {
		until, ok := s.down[a]
		if !ok || !now.Before(until) {
			return 0
		}
		if d := until.Sub(now); i == 0 || d < first {
			first = d
		}
	}
	return first
}

// update replaces the servers learnt earlier with announced (host:port
// addresses, as /v1-k3s/apiservers lists them), keeping the configured
// server, and reports whether the list changed. A server that stays keeps
// its down time.
func (s *rotation) update(announced []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	addrs := merge(s.configured, announced)
	if slices.Equal(addrs, s.addrs) {
		return false
	}
	for a := range s.down {
		if !slices.Contains(addrs, a) {
			delete(s.down, a)
		}
	}
	s.addrs = addrs
	if len(addrs) > 0 {
		s.next %= len(addrs)
	}
	return true
}

// addresses returns the servers in the rotation, configured included.
func (s *rotation) addresses() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.addrs)
}

// configuredAddr returns the configured server's address.
func (s *rotation) configuredAddr() string { return s.configured }
