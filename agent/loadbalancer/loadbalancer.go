// Package loadbalancer is a k3s/RKE2 agent's local TCP load balancer: it
// listens on a loopback address (k3s: 127.0.0.1:6444 for the supervisor,
// another port for the API server) and proxies every connection it accepts
// to one of the servers, bytes both ways.
//
// It differs from k3s's own (pkg/agent/loadbalancer) in four ways:
//
//   - It spreads: new connections go round robin over the servers known
//     to answer, from a random start, instead of all to one active server.
//   - It checks health where failure shows: a server that accepts TCP, or
//     completes TLS, and then answers nothing is failed within seconds of
//     the first connection that waits on it. k3s checks its supervisor and
//     API servers only by its websocket tunnel to each, which such a
//     server keeps up.
//   - It fails over per connection: a dial that fails or passes
//     [Options.DialTimeout] moves the same client connection to the next
//     server at once.
//   - It keeps every server it knew across restarts, in k3s's state file
//     format (see [Options.StateFile]).
//
// # Health
//
// A server is unchecked when added, then healthy or failed:
//
//	unchecked --1 success------------> healthy
//	unchecked, healthy --F failures--> failed   (F = ProbeOptions.Failures, consecutive)
//	failed --S successes-------------> healthy  (S = ProbeOptions.Successes, consecutive)
//
// A success is a probe, an HTTPS GET of [ProbeOptions.Path], answered 2xx.
// A failure is a probe that fails (refused or reset, no TLS, no answer
// within [ProbeOptions.Timeout], another status) or a failed dial of a
// proxied connection.
//
// The connections in use tell when to probe. A server not failed is
// suspect when its last probe or dial failed, or when the client of a new
// connection sent bytes and the server sent none back within Timeout. A
// suspect server is probed at once, then every Interval (1 s) until a
// probe answers. So is an unchecked one. A healthy server is probed every
// HealthyInterval to 1.5 × HealthyInterval (10 to 15 s), as k3s's etcd
// proxy probes: 5,000 agents send each server 330 to 500 probes a second.
// Bytes on its connections do not spare it a probe: TLS 1.3 session
// tickets and HTTP/2 settings come before any handler runs. A failed
// server is probed every Interval, doubling up to HealthyInterval.
//
// A server that hangs is failed at most
//
//	detection ≤ F × Interval + Timeout   (3 × 1 s + 0.8 s = 3.8 s by default)
//
// after the first new connection that waits on it: that connection makes
// it suspect within Timeout, the next probe starts within Interval of the
// last one, and the F-th failing probe ends Timeout after it starts. That
// holds while Timeout is below Interval. When a server is marked failed,
// its connections are closed (unless [Options.KeepConnectionsOnFailure]),
// so that their clients reconnect to a server that answers. A connection
// is watched until its server has answered twice (a TLS handshake, then
// a request) or sent 64 KiB; later silences are a connection at rest.
//
// # Choosing a server
//
// Each new connection tries the servers in this order, round robin
// within each rank, until a dial succeeds:
//
//  1. healthy and not suspect: known to answer;
//  2. suspect;
//  3. unchecked: a new server waits for its first probe while another
//     is known to answer; when none is, a new connection waits for one
//     to answer its first probe, Timeout at most;
//  4. failed: when no server is usable, connections still go to all of
//     them in turn rather than nowhere.
//
// In each of the first three ranks, the configured server
// ([Options.Default]) comes after the listed ones when it is not in the
// list: a standby, as in k3s (it may be a name in front of the same
// servers).
//
// Round robin rather than least connections: an agent's own few
// connections say nothing of a server's load, and least connections would
// send every agent's next connections to a server that has just
// recovered, the herd on the server least ready for it (TestPolicies).
//
// # Use
//
//	lb, err := loadbalancer.New(&loadbalancer.Options{
//		Listen:    "127.0.0.1:6444",
//		Default:   "10.0.0.1:9345",
//		StateFile: "/var/lib/rancher/k3s/agent/etc/k3s-agent-load-balancer.json",
//		Probe:     loadbalancer.ProbeOptions{TLS: &tls.Config{RootCAs: serverCAs}},
//	})
//	...
//	err = lb.Update(addressesFromTheCluster) // the configured server is kept
//	defer lb.Close()
//
// and clients dial lb.Addr() in place of the server.
package loadbalancer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/agent/internal/statefile"
)

// Options configure a LoadBalancer. A zero field means that field's
// default; Probe.TLS has none and must be set.
type Options struct {
	// Listen is the local address clients dial. Default "127.0.0.1:0":
	// a free port on loopback, read back with Addr.
	Listen string
	// Default is the configured server, host:port. It is never dropped
	// (see Update). Default none: only Servers, the state file and Update.
	Default string
	// Servers are other servers known at start, host:port, in addition to
	// those in StateFile. Default none.
	Servers []string
	// StateFile, when set, keeps the server list across restarts: New reads
	// it (a corrupt one is logged and ignored) and every change is written
	// atomically. A file that cannot be written is logged. Default "": none. k3s's file is
	// <data-dir>/agent/etc/k3s-agent-load-balancer.json.
	StateFile string

	// Probe is the health check of every server.
	Probe ProbeOptions

	// DialTimeout bounds one dial to one server, after which the client's
	// connection is dialed to the next. Default 2 s: a dial on a LAN takes
	// milliseconds, and 2 s still waits out one lost SYN (resent after 1 s).
	DialTimeout time.Duration
	// DialContext dials every connection to a server, proxied or probe
	// (e.g. through an HTTP proxy, as k3s's agent does when
	// K3S_AGENT_HTTP_PROXY_ALLOWED is set). Default a net.Dialer's.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// KeepConnectionsOnFailure leaves connections open to a server marked
	// failed. Default false: they are closed, as k3s does, so that their
	// clients reconnect to a server that answers.
	KeepConnectionsOnFailure bool
	// Logger receives server state changes and the state file's problems.
	// Default slog.Default().
	Logger *slog.Logger

	// policy orders a tier's servers; roundRobin unless a test sets it.
	policy policy
}

// ProbeOptions configure the health probe: an HTTPS GET of Path, over a
// kept-alive connection (a probe costs a server one small request, not a
// TLS handshake), as often as the package doc says.
type ProbeOptions struct {
	// TLS verifies the servers; required. Give RootCAs the servers' CA
	// (k3s: server-ca.crt), or set InsecureSkipVerify explicitly: a probe
	// sends no credential, and only chooses among the servers you configured.
	TLS *tls.Config
	// Path is requested on each server. Default "/ping", which k3s's
	// supervisor answers without authentication (on k3s's 6443 too, which
	// it fronts). An API server alone (RKE2's 6443) refuses anonymous
	// requests: its 401 is a failure.
	Path string
	// Interval is the time between the starts of two probes of a server in
	// doubt: unchecked, suspect, or failed and answering again. Default
	// 1 s, as k3s checks its servers.
	Interval time.Duration
	// HealthyInterval is the time between two probes of a healthy server
	// that no client waits on, stretched at random by up to half. Default
	// 10 s, as k3s's etcd proxy probes (5 to 10 s).
	HealthyInterval time.Duration
	// Timeout bounds one probe (dial, TLS, answer and body), and how long
	// a new connection's client waits for the server's answer before the
	// server is suspect. Default 800 ms: a ping takes milliseconds, even
	// from a server busy with a herd.
	Timeout time.Duration
	// Failures is how many consecutive failures mark a server failed.
	// Default 3: one slow answer does not drop a server.
	Failures int
	// Successes is how many consecutive successes bring a failed server
	// back. Default 2: a server that flaps does not get connections back at
	// each good answer.
	Successes int
}

// Defaults of Options and ProbeOptions.
const (
	defaultListen        = "127.0.0.1:0"
	defaultDialTimeout   = 2 * time.Second
	defaultProbePath     = "/ping"
	defaultProbeInterval = time.Second
	defaultProbeHealthy  = 10 * time.Second
	defaultProbeTimeout  = 800 * time.Millisecond
	defaultFailures      = 3
	defaultSuccesses     = 2
)

// LoadBalancer proxies the connections it accepts to its servers. It is
// safe for concurrent use. Make one with New; the zero value is not usable.
type LoadBalancer struct {
	opts Options // resolved; never changes
	log  *slog.Logger
	ln   net.Listener

	// ctx ends with Close: probes and dials in progress stop.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts every goroutine the LoadBalancer starts; Close waits for it.
	wg sync.WaitGroup
	// next is the round-robin turn; it starts at random, so that agents
	// started together spread.
	next atomic.Uint64
	// saveMu serialises the changes of the list with their writes to the
	// state file, so the file ends with the last list.
	saveMu sync.Mutex

	// mu guards servers, closed and every server's fields marked so.
	mu      sync.Mutex
	servers []*server // the default first, then in the order added
	closed  bool
	// answered is closed, and replaced, when a server turns healthy; mu.
	answered chan struct{}
}

// New checks opts, reads the state file, listens at once and starts
// probing every server. Close it to stop.
func New(opts *Options) (*LoadBalancer, error) {
	if opts == nil {
		return nil, errors.New("loadbalancer: nil Options: Probe.TLS is required")
	}
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	lb := &LoadBalancer{opts: o, log: o.Logger}
	lb.next.Store(rand.Uint64())

	listed := o.Servers
	if o.StateFile != "" {
		listed = union(listed, lb.loadState())
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("loadbalancer: %w", err)
	}
	lb.ln = ln
	if err := lb.checkNotSelf(append([]string{o.Default}, listed...)); err != nil {
		ln.Close()
		return nil, err
	}
	lb.start(listed)
	if err := lb.saveState(); err != nil {
		lb.log.Warn("loadbalancer: the server list is in use but not saved", "err", err)
	}
	lb.log.Info("loadbalancer: listening", "addr", lb.Addr(), "servers", lb.addresses(), "default", o.Default)
	return lb, nil
}

// start starts probing the default and listed servers, and serving lb.ln.
func (lb *LoadBalancer) start(listed []string) {
	lb.ctx, lb.cancel = context.WithCancel(context.Background())
	lb.answered = make(chan struct{})
	lb.mu.Lock()
	if lb.opts.Default != "" {
		lb.servers = append(lb.servers, lb.newServerLocked(lb.opts.Default, true))
	}
	lb.setListLocked(listed)
	lb.mu.Unlock()
	lb.wg.Go(lb.acceptLoop)
}

func (opts *Options) resolve() (Options, error) {
	o := *opts
	if o.Listen == "" {
		o.Listen = defaultListen
	}
	if o.Default != "" {
		if err := statefile.CheckAddress(o.Default); err != nil {
			return o, fmt.Errorf("loadbalancer: Options.Default: %w", err)
		}
	}
	for _, a := range o.Servers {
		if err := statefile.CheckAddress(a); err != nil {
			return o, fmt.Errorf("loadbalancer: Options.Servers: %w", err)
		}
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = defaultDialTimeout
	}
	if o.DialContext == nil {
		o.DialContext = new(net.Dialer).DialContext
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.policy == nil {
		o.policy = roundRobin
	}
	p := &o.Probe
	if p.TLS == nil {
		return o, errors.New("loadbalancer: Options.Probe.TLS is nil: give RootCAs the servers' CA, or set InsecureSkipVerify explicitly")
	}
	if p.Path == "" {
		p.Path = defaultProbePath
	}
	if err := checkPath(p.Path); err != nil {
		return o, err
	}
	if p.Interval == 0 {
		p.Interval = defaultProbeInterval
	}
	if p.HealthyInterval == 0 {
		p.HealthyInterval = defaultProbeHealthy
	}
	if p.Timeout == 0 {
		p.Timeout = defaultProbeTimeout
	}
	if p.Failures == 0 {
		p.Failures = defaultFailures
	}
	if p.Successes == 0 {
		p.Successes = defaultSuccesses
	}
	if o.DialTimeout < 0 || p.Interval < 0 || p.HealthyInterval < 0 || p.Timeout < 0 || p.Failures < 0 || p.Successes < 0 {
		return o, errors.New("loadbalancer: Options: negative DialTimeout, Probe.Interval, HealthyInterval, Timeout, Failures or Successes")
	}
	return o, nil
}

// checkNotSelf refuses the load balancer's own address as a server's:
// every connection would come back to it.
func (lb *LoadBalancer) checkNotSelf(addresses []string) error {
	if self := lb.Addr(); slices.Contains(addresses, self) {
		return fmt.Errorf("loadbalancer: %s is the load balancer's own address, not a server's", self)
	}
	return nil
}

// Addr is the local address clients dial, such as "127.0.0.1:6444".
func (lb *LoadBalancer) Addr() string { return lb.ln.Addr().String() }

// acceptLoop serves every connection the listener accepts, until Close.
func (lb *LoadBalancer) acceptLoop() {
	var delay time.Duration
	for {
		c, err := lb.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, most likely: wait, as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			lb.log.Warn("loadbalancer: accept", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-lb.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		lb.wg.Go(func() { lb.serve(c) })
	}
}

// serve proxies one client connection to the first server of its
// candidates that can be dialed, and closes it when none can.
func (lb *LoadBalancer) serve(client net.Conn) {
	lb.awaitAnswer()
	for i, s := range lb.candidates() {
		var conn net.Conn
		err := lb.ctx.Err()
		if err == nil {
			conn, err = lb.dial(s)
		}
		var p *pipe
		if err == nil {
			p = &pipe{client: client, server: conn,
				watch: watch{timeout: lb.opts.Probe.Timeout, waited: func() { lb.waited(s) }}}
		}
		if !lb.attach(s, p, i == 0) {
			if conn != nil {
				conn.Close()
			}
			if lb.ctx.Err() != nil {
				break
			}
			continue
		}
		p.run()
		lb.detach(s, p)
		return
	}
	lb.log.Debug("loadbalancer: no server could be dialed; closing the client's connection", "client", client.RemoteAddr())
	client.Close()
}

// awaitAnswer waits while no server is known to answer and one is
// unchecked, until one turns healthy, for Probe.Timeout at most (when
// every first probe has ended): a new server is probed before it is used.
func (lb *LoadBalancer) awaitAnswer() {
	lb.mu.Lock()
	best := ranks
	for _, s := range lb.servers {
		best = min(best, s.rankLocked())
	}
	answered := lb.answered
	lb.mu.Unlock()
	if best < rankUnchecked || best >= rankFailed {
		return
	}
	t := time.NewTimer(lb.opts.Probe.Timeout)
	defer t.Stop()
	select {
	case <-answered:
	case <-t.C:
	case <-lb.ctx.Done():
	}
}

// candidates is the order in which a new connection tries the servers:
// by rank (see the package doc), each rank ordered by the policy.
func (lb *LoadBalancer) candidates() []*server {
	n := lb.next.Add(1)
	lb.mu.Lock()
	defer lb.mu.Unlock()
	out := make([]*server, 0, len(lb.servers))
	for rank := range ranks {
		start := len(out)
		for _, s := range lb.servers {
			if s.rankLocked() == rank {
				out = append(out, s)
			}
		}
		lb.opts.policy(out[start:], n)
	}
	if len(out) > 0 {
		out[0].pending++ // until attach
	}
	return out
}

// dial dials s within DialTimeout; a failure counts against its health,
// and asks for a probe.
func (lb *LoadBalancer) dial(s *server) (net.Conn, error) {
	s.dials.Add(1)
	ctx, cancel := context.WithTimeout(lb.ctx, lb.opts.DialTimeout)
	defer cancel()
	conn, err := lb.opts.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		s.dialFailures.Add(1)
		lb.log.Debug("loadbalancer: dial", "server", s.addr, "err", err)
		if lb.ctx.Err() == nil {
			lb.record(s, "dial", err)
			s.probeNow()
		}
		return nil, err
	}
	return conn, nil
}

// attach counts p among s's connections, unless p is nil (its dial
// failed), s was removed or the LoadBalancer closed meanwhile. first says
// s was the first candidate, counted as pending until now.
func (lb *LoadBalancer) attach(s *server, p *pipe, first bool) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if first {
		s.pending--
	}
	if p == nil || lb.closed || s.removed {
		return false
	}
	s.conns[p] = struct{}{}
	s.connections.Add(1)
	return true
}

func (lb *LoadBalancer) detach(s *server, p *pipe) {
	lb.mu.Lock()
	delete(s.conns, p)
	lb.mu.Unlock()
}

// Update makes addresses (host:port each) the list of servers: new ones
// are added unchecked and probed, those not in it are removed and their
// connections closed. The configured server ([Options.Default]) is kept
// whatever the list: when it is not in it, as a standby (see the package
// doc), with its connections. The list is written to the state file.
// An invalid address, or the load balancer's own, is an error, and
// nothing changes; so is a call after Close.
func (lb *LoadBalancer) Update(addresses []string) error {
	for _, a := range addresses {
		if err := statefile.CheckAddress(a); err != nil {
			return fmt.Errorf("loadbalancer: Update: %w", err)
		}
	}
	if err := lb.checkNotSelf(addresses); err != nil {
		return err
	}
	lb.saveMu.Lock()
	defer lb.saveMu.Unlock()
	lb.mu.Lock()
	if lb.closed {
		lb.mu.Unlock()
		return fmt.Errorf("loadbalancer: Update: %w", net.ErrClosed)
	}
	changed, drop := lb.setListLocked(union(addresses))
	lb.mu.Unlock()
	for _, p := range drop {
		p.close()
	}
	if !changed {
		return nil
	}
	lb.log.Info("loadbalancer: servers updated", "servers", lb.addresses(), "default", lb.opts.Default)
	if err := lb.saveState(); err != nil {
		lb.log.Warn("loadbalancer: the server list is in use but not saved", "err", err)
	}
	return nil
}

// setListLocked makes list (deduplicated) the listed servers. It returns
// whether anything changed, and the connections of the removed servers,
// for the caller to close once it has released mu.
func (lb *LoadBalancer) setListLocked(list []string) (changed bool, drop []*pipe) {
	in := make(map[string]bool, len(list))
	for _, a := range list {
		in[a] = true
	}
	kept := lb.servers[:0]
	have := make(map[string]bool, len(lb.servers))
	for _, s := range lb.servers {
		have[s.addr] = true
		switch {
		case s.isDefault:
			if s.standby == in[s.addr] {
				s.standby = !in[s.addr]
				changed = true
			}
		case !in[s.addr]:
			s.removed = true
			s.stop()
			for p := range s.conns {
				drop = append(drop, p)
			}
			changed = true
			continue
		}
		kept = append(kept, s)
	}
	clear(lb.servers[len(kept):])
	lb.servers = kept
	for _, a := range list {
		if !have[a] {
			lb.servers = append(lb.servers, lb.newServerLocked(a, false))
			changed = true
		}
	}
	return changed, drop
}

// union is the addresses of lists, in order, each once.
func union(lists ...[]string) []string {
	seen := make(map[string]bool)
	var out []string
	for _, l := range lists {
		for _, a := range l {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// addresses are the listed servers (the default unless it is a standby).
func (lb *LoadBalancer) addresses() []string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	out := make([]string, 0, len(lb.servers))
	for _, s := range lb.servers {
		if !s.standby {
			out = append(out, s.addr)
		}
	}
	return out
}

// Close stops accepting, closes every proxied connection and every probe's,
// and returns once every goroutine of the LoadBalancer has ended. Later
// calls return nil.
func (lb *LoadBalancer) Close() error {
	lb.mu.Lock()
	if lb.closed {
		lb.mu.Unlock()
		return nil
	}
	lb.closed = true
	var drop []*pipe
	for _, s := range lb.servers {
		for p := range s.conns {
			drop = append(drop, p)
		}
	}
	lb.mu.Unlock()
	lb.cancel()
	err := lb.ln.Close()
	for _, p := range drop {
		p.close()
	}
	lb.wg.Wait()
	if err != nil {
		return fmt.Errorf("loadbalancer: %w", err)
	}
	return nil
}

// ServerStats are one server's figures. Counters count from when the
// server was added.
type ServerStats struct {
	Address string
	State   State
	// Suspect is a server not failed that is in doubt: a client waited
	// on it, or its last probe or dial failed. It is probed every
	// Interval until a probe answers.
	Suspect bool
	// Default is the configured server; Standby, that it is not in the
	// list, so used only when no listed server is usable.
	Default, Standby bool
	// Active is the connections proxied now; Connections, all so far.
	Active      int
	Connections uint64
	// Dials are the dials of proxied connections, DialFailures the ones
	// that failed or timed out.
	Dials, DialFailures uint64
	// Waits are the proxied connections whose client waited past
	// Probe.Timeout for an answer.
	Waits uint64
	// Probes are the health probes started, ProbeFailures those that failed.
	Probes, ProbeFailures uint64
	// ConsecutiveFailures (probes and dials) and ConsecutiveSuccesses
	// (probes) are the counts the state changes on.
	ConsecutiveFailures, ConsecutiveSuccesses int
}

// Stats returns every server's figures, the default first, then in the
// order the servers were added.
func (lb *LoadBalancer) Stats() []ServerStats {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	out := make([]ServerStats, 0, len(lb.servers))
	for _, s := range lb.servers {
		out = append(out, ServerStats{
			Address:              s.addr,
			State:                s.health.state,
			Suspect:              s.health.suspect(),
			Default:              s.isDefault,
			Standby:              s.standby,
			Active:               len(s.conns),
			Connections:          s.connections.Load(),
			Dials:                s.dials.Load(),
			DialFailures:         s.dialFailures.Load(),
			Waits:                s.waits.Load(),
			Probes:               s.probes.Load(),
			ProbeFailures:        s.probeFailures.Load(),
			ConsecutiveFailures:  s.health.fails,
			ConsecutiveSuccesses: s.health.oks,
		})
	}
	return out
}
