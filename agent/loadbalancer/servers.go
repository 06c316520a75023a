package loadbalancer

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/agent/internal/local"
)

// State is a server's health; the package doc has its transitions.
type State int

const (
	// StateUnchecked is a server added and not yet probed; it is used
	// only when no server is known to answer.
	StateUnchecked State = iota
	// StateHealthy is a server whose last probes answered; it is used.
	StateHealthy
	// StateFailed is a server that failed Failures times in a row; it gets
	// connections only when no server is usable.
	StateFailed
)

func (s State) String() string {
	switch s {
	case StateUnchecked:
		return "unchecked"
	case StateHealthy:
		return "healthy"
	case StateFailed:
		return "failed"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// server is one server of a LoadBalancer. addr, isDefault, stop and wake
// never change; the fields marked so are guarded by the LoadBalancer's
// mu; the counters are atomic.
type server struct {
	addr      string
	isDefault bool
	stop      context.CancelFunc // ends its probes
	wake      chan struct{}      // capacity 1: a send asks its prober for a probe now

	standby bool               // mu: the default, not in the list
	removed bool               // mu: Update removed it; set once
	health  health             // mu
	conns   map[*pipe]struct{} // mu: the connections proxied to it now
	pending int                // mu: new connections it is the first candidate of, being dialed

	connections, dials, dialFailures, waits, probes, probeFailures atomic.Uint64
}

// newServerLocked makes a server for addr and starts its probes.
func (lb *LoadBalancer) newServerLocked(addr string, isDefault bool) *server {
	ctx, cancel := context.WithCancel(lb.ctx)
	s := &server{addr: addr, isDefault: isDefault, stop: cancel, wake: make(chan struct{}, 1), conns: make(map[*pipe]struct{})}
	pr := newProber(lb, s)
	lb.wg.Go(func() { pr.run(ctx) })
	return s
}

// probeNow asks s's prober for a probe as soon as Interval allows.
func (s *server) probeNow() {
	select {
	case s.wake <- struct{}{}:
	default: // one is asked for already
	}
}

// Ranks of the package doc's order: known to answer, suspect, unchecked,
// each listed then standby, and failed last.
const (
	rankHealthy   = 0
	rankSuspect   = 2
	rankUnchecked = 4
	rankFailed    = 6
	ranks         = 7
)

// rankLocked is s's place in the order in which new connections try the
// servers (see the package doc); lower first.
func (s *server) rankLocked() int {
	r := rankHealthy
	switch {
	case s.health.state == StateFailed:
		return rankFailed
	case s.health.state == StateUnchecked:
		r = rankUnchecked
	case s.health.suspect():
		r = rankSuspect
	}
	if s.standby {
		r++
	}
	return r
}

// health is a server's state and the consecutive results it changes on.
// The zero value is an unchecked server.
type health struct {
	state      State
	fails, oks int
	// waited: a proxied connection waited past Probe.Timeout for an
	// answer since the last result.
	waited bool
}

// suspect reports whether a server not failed is in doubt: a client
// waited on it, or its last probe or dial failed.
func (h *health) suspect() bool {
	return h.state != StateFailed && (h.waited || h.fails > 0)
}

// observe records one result and reports whether the state changed, by the
// rules of the package doc.
func (h *health) observe(ok bool, failures, successes int) bool {
	h.waited = false
	if ok {
		h.oks++
		h.fails = 0
	} else {
		h.fails++
		h.oks = 0
	}
	switch {
	case ok && h.state == StateUnchecked,
		ok && h.state == StateFailed && h.oks >= successes:
		h.state = StateHealthy
	case !ok && h.state != StateFailed && h.fails >= failures:
		h.state = StateFailed
	default:
		return false
	}
	return true
}

// nextProbe is the time from the start of a probe to the start of the
// next, by the rules of the package doc; spread is a random number in
// [0, 1) that stretches the long waits by up to half, so that agents
// started together do not probe together.
func (h *health) nextProbe(o *ProbeOptions, spread float64) time.Duration {
	long := o.HealthyInterval + time.Duration(spread*float64(o.HealthyInterval)/2)
	switch {
	case h.state == StateHealthy && !h.suspect():
		return long
	case h.state == StateFailed && h.oks == 0:
		// Interval, doubled at each failure after the F-th, up to long.
		if d := o.Interval << min(max(h.fails-o.Failures, 0), 20); d < o.HealthyInterval {
			return d
		}
		return long
	}
	return o.Interval
}

// record counts one result of a probe or a dial (what) against s's
// health, and closes s's connections when it fails (unless the options
// keep them). The local host running out of descriptors (EMFILE) is no
// result: it says nothing of s. It returns the time from this probe's
// start to the next one's.
func (lb *LoadBalancer) record(s *server, what string, err error) time.Duration {
	o := &lb.opts.Probe
	if local.Shortage(err) {
		lb.log.Warn("loadbalancer: "+what, "server", s.addr, "err", err)
		return o.Interval
	}
	lb.mu.Lock()
	if lb.closed || s.removed {
		lb.mu.Unlock()
		return o.Interval
	}
	from := s.health.state
	changed := s.health.observe(err == nil, o.Failures, o.Successes)
	to := s.health.state
	next := s.health.nextProbe(o, rand.Float64())
	if changed && to == StateHealthy {
		close(lb.answered)
		lb.answered = make(chan struct{})
	}
	var drop []*pipe
	if changed && to == StateFailed && !lb.opts.KeepConnectionsOnFailure {
		for p := range s.conns {
			drop = append(drop, p)
		}
	}
	lb.mu.Unlock()
	for _, p := range drop {
		p.close()
	}
	switch {
	case !changed:
	case to == StateFailed:
		lb.log.Warn("loadbalancer: server failed", "server", s.addr, "after", what, "err", err, "closed_connections", len(drop))
	default:
		lb.log.Info("loadbalancer: server healthy", "server", s.addr, "was", from.String())
	}
	return next
}

// waited notes that a client of s waited past Probe.Timeout for an
// answer: s is suspect until a probe answers, and probed now (a failed s,
// used because no server is usable, is probed now too).
func (lb *LoadBalancer) waited(s *server) {
	s.waits.Add(1)
	lb.mu.Lock()
	live := !lb.closed && !s.removed
	first := live && s.health.state != StateFailed && !s.health.waited
	if first {
		s.health.waited = true
	}
	lb.mu.Unlock()
	if first {
		lb.log.Debug("loadbalancer: a client waits on the server: probing it", "server", s.addr, "waited", lb.opts.Probe.Timeout)
	}
	if live {
		s.probeNow()
	}
}

// policy orders the servers of one tier for the n-th new connection.
// Alternatives sit side by side; the package doc says why roundRobin.
type policy func(tier []*server, n uint64)

// roundRobin starts at the n-th server of the tier and wraps around.
func roundRobin(tier []*server, n uint64) {
	if len(tier) > 1 {
		k := int(n % uint64(len(tier)))
		slices.Reverse(tier[:k])
		slices.Reverse(tier[k:])
		slices.Reverse(tier)
	}
}

// leastConns puts the servers with the fewest connections (proxied or
// being dialed) first, ties in round-robin order. Its caller holds mu.
func leastConns(tier []*server, n uint64) {
	roundRobin(tier, n)
	slices.SortStableFunc(tier, func(a, b *server) int {
		return cmp.Compare(len(a.conns)+a.pending, len(b.conns)+b.pending)
	})
}
