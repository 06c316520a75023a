package loadbalancer

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/nodepass/nodepass/agent/internal/local"
)

// State is a server's health; the package doc has its transitions.
type State int

const (
	// StateUnchecked is a server added and not yet probed; it is used.
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

// server is one server of a LoadBalancer. addr, isDefault, probe and stop
// never change; the fields marked so are guarded by the LoadBalancer's mu;
// the counters are atomic.
type server struct {
	addr      string
	isDefault bool
	stop      context.CancelFunc // ends its probes

	standby bool               // mu: the default, not in the list
	removed bool               // mu: Update removed it; set once
	health  health             // mu
	conns   map[*pipe]struct{} // mu: the connections proxied to it now
	pending int                // mu: new connections it is the first candidate of, being dialed

	connections, dials, dialFailures, probes, probeFailures atomic.Uint64
}

// newServerLocked makes a server for addr and starts its probes.
func (lb *LoadBalancer) newServerLocked(addr string, isDefault bool) *server {
	ctx, cancel := context.WithCancel(lb.ctx)
	s := &server{addr: addr, isDefault: isDefault, stop: cancel, conns: make(map[*pipe]struct{})}
	pr := newProber(lb, s)
	lb.wg.Go(func() { pr.run(ctx) })
	return s
}

// tierLocked is s's tier in the order of the package doc: 0 usable and
// listed, 1 usable standby, 2 failed.
func (s *server) tierLocked() int {
	switch {
	case s.health.state == StateFailed:
		return 2
	case s.standby:
		return 1
	}
	return 0
}

// health is a server's state and the consecutive results it changes on.
// The zero value is an unchecked server.
type health struct {
	state      State
	fails, oks int
}

// observe records one result and reports whether the state changed, by the
// rules of the package doc.
func (h *health) observe(ok bool, failures, successes int) bool {
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

// record counts one result of a probe or a dial (what) against s's
// health, and closes s's connections when it fails (unless the options
// keep them). The local host running out of descriptors (EMFILE) is no
// result: it says nothing of s.
func (lb *LoadBalancer) record(s *server, what string, err error) {
	if local.Shortage(err) {
		lb.log.Warn("loadbalancer: "+what, "server", s.addr, "err", err)
		return
	}
	lb.mu.Lock()
	if lb.closed || s.removed {
		lb.mu.Unlock()
		return
	}
	from := s.health.state
	changed := s.health.observe(err == nil, lb.opts.Probe.Failures, lb.opts.Probe.Successes)
	to := s.health.state
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
