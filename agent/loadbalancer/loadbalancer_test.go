package loadbalancer

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The incident's server: it completes TLS and then answers nothing. At
// the default probe options it stops getting new connections once a
// client has waited Timeout on it (it is suspect), is failed F probes
// later, and the connections it had are closed. It hangs just after its
// first probe answered, and clients need it at once, so the wall times,
// logged for BENCHMARKS.md and not asserted, are close to the worst case.
func TestHungServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs at the default probe interval and timeout: about 4 s")
	}
	t.Parallel()
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	lb := newLB(t, &Options{
		Default: a.addr,
		Servers: []string{a.addr, b.addr, c.addr},
		Probe:   ProbeOptions{TLS: &tls.Config{RootCAs: testPool}},
		Logger:  testLogger(t),
	})
	waitFor(t, "three healthy servers", inState(lb, StateHealthy, a.addr, b.addr, c.addr))
	open := connTo(t, lb.Addr(), "c") // a client's connection to c, from before it hangs
	defer open.Close()

	// Clients open a connection every 5 ms while c hangs, without waiting
	// for answers, until c is failed.
	rawAtHang, hungAt := c.raw.Load(), time.Now()
	c.set(hung)
	stop, stopped := make(chan struct{}), make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			conn, err := net.Dial("tcp", lb.Addr())
			if err != nil {
				t.Error(err)
				return
			}
			io.WriteString(conn, "who\n")
			conns = append(conns, conn)
		}
	}()
	waitFor(t, "c failed", inState(lb, StateFailed, c.addr))
	close(stop)
	<-stopped
	for _, conn := range conns {
		conn.Close()
	}

	st := statsOf(t, lb, c.addr)
	if st.ProbeFailures != 3 || st.ConsecutiveFailures != 3 || st.DialFailures != 0 {
		t.Errorf("c failed after %d probe failures (%d in a row) and %d dial failures, want 3, 3 and 0",
			st.ProbeFailures, st.ConsecutiveFailures, st.DialFailures)
	}
	// Its connection from before was closed by the load balancer.
	open.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, open); !closedByPeer(err) {
		t.Errorf("the connection to c was not closed: %v", err)
	}
	// No new connection goes to c.
	dials, raw := st.Dials, c.raw.Load()
	got := whoCounts(t, lb.Addr(), 30)
	if got["a"]+got["b"] != 30 || c.raw.Load() != raw || statsOf(t, lb, c.addr).Dials != dials {
		t.Errorf("after c failed: %v, %d more connections to c", got, c.raw.Load()-raw)
	}

	failedAt := logged(lb, "server failed")[0].Time
	lastToC := time.Unix(0, c.lastRaw.Load())
	bound := 3*defaultProbeInterval + defaultProbeTimeout
	t.Logf("c hung; failed after %v (bound %v), its last new connection %v after it hung; %d connections opened meanwhile, %d to c",
		failedAt.Sub(hungAt).Round(time.Millisecond), bound, lastToC.Sub(hungAt).Round(time.Millisecond), len(conns), raw-rawAtHang)
}

// A new server takes no connection while one known to answer is there,
// or may be soon: it is probed first. The case: a server learnt
// from the cluster that completes TLS and never answers took 1 of 4
// connections, which waited until it was marked failed 2.8 s later. At
// start, with every server unchecked, the first connections went to the
// listed server, hung, rather than to the standby that answered its
// first probe in milliseconds (cmd/bench -hung 1 -known 1).
func TestNewServerProbedFirst(t *testing.T) {
	t.Parallel()
	for _, learnt := range []bool{true, false} {
		t.Run(map[bool]string{true: "learnt", false: "at start"}[learnt], func(t *testing.T) {
			t.Parallel()
			a, h := newBackend(t, "a"), newBackend(t, "h")
			h.set(hung)
			var lb *LoadBalancer
			if learnt {
				lb = newLB(t, testOptions(t, a.addr, a.addr))
				waitFor(t, "a healthy", inState(lb, StateHealthy, a.addr))
				if err := lb.Update([]string{a.addr, h.addr}); err != nil {
					t.Fatal(err)
				}
			} else { // a the configured server, h the one listed: a standby for h
				lb = newLB(t, testOptions(t, a.addr, h.addr))
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			got := make(map[string]int)
			for range 4 {
				wg.Go(func() {
					name := whoWithin(t, lb.Addr(), 3*time.Second)
					mu.Lock()
					got[name]++
					mu.Unlock()
				})
			}
			wg.Wait()
			if got["a"] != 4 || h.raw.Load() != 0 {
				t.Errorf("4 connections: %v (\"\": unanswered in 3 s), %d to h", got, h.raw.Load())
			}
		})
	}
}

// whoWithin is who's answer, or "" when none comes within d.
func whoWithin(t testing.TB, addr string, d time.Duration) string {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d))
	io.WriteString(c, "who\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

// A server that resets every connection: the clients sent to it before it
// is failed see their connection closed (they do not hang), and then no
// connection goes to it.
func TestResettingServer(t *testing.T) {
	t.Parallel()
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	lb := newLB(t, testOptions(t, a.addr, a.addr, b.addr, c.addr))
	waitFor(t, "three healthy servers", inState(lb, StateHealthy, a.addr, b.addr, c.addr))
	c.set(resetting)
	for name, n := range whoCounts(t, lb.Addr(), 30) {
		if name != "a" && name != "b" && name != "" {
			t.Errorf("%d connections answered by %q", n, name)
		}
	}
	waitFor(t, "c failed", inState(lb, StateFailed, c.addr))
	dials := statsOf(t, lb, c.addr).Dials
	if got := whoCounts(t, lb.Addr(), 30); got["a"] != 15 || got["b"] != 15 || statsOf(t, lb, c.addr).Dials != dials {
		t.Errorf("after c failed: %v", got)
	}
}

// A dial that fails, or passes DialTimeout, moves the client's connection
// to the next server at once: every client is served. The failed dial
// makes the server suspect, so the next connections go to the others
// while its probes decide (here an hour apart: nothing else decides).
func TestFailoverPerConnection(t *testing.T) {
	t.Parallel()
	for _, blackhole := range []bool{false, true} {
		t.Run(map[bool]string{false: "refused", true: "dial times out"}[blackhole], func(t *testing.T) {
			t.Parallel()
			a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
			o := testOptions(t, a.addr, a.addr, b.addr, c.addr)
			o.Probe.Interval, o.Probe.HealthyInterval = time.Hour, time.Hour // one probe each
			o.DialTimeout = 100 * time.Millisecond
			var dead atomic.Bool
			o.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr == c.addr && dead.Load() && blackhole {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return new(net.Dialer).DialContext(ctx, network, addr)
			}
			lb := newLB(t, o)
			waitFor(t, "three healthy servers", inState(lb, StateHealthy, a.addr, b.addr, c.addr))
			dead.Store(true)
			if !blackhole {
				c.down()
			}
			got := whoCounts(t, lb.Addr(), 30)
			if got["a"]+got["b"] != 30 {
				t.Errorf("%v: %d clients not served", got, 30-got["a"]-got["b"])
			}
			if st := statsOf(t, lb, c.addr); st.Dials != 1 || st.DialFailures != 1 || !st.Suspect || st.State != StateHealthy {
				t.Errorf("dead server: %+v; want 1 failed dial, then no more, and suspect", st)
			}
		})
	}
}

// A server killed while it sends: the client sees its connection end,
// and once it closes its side nothing of the connection is left in the
// load balancer.
func TestKilledMidTransfer(t *testing.T) {
	t.Parallel()
	a, b := newBackend(t, "a"), newBackend(t, "b")
	lb := newLB(t, testOptions(t, a.addr, a.addr, b.addr))
	conn, err := net.Dial("tcp", lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 1 << 30
	io.WriteString(conn, "stream 1073741824\n")
	if _, err := io.CopyN(io.Discard, conn, 1<<20); err != nil {
		t.Fatal(err)
	}
	victim, other := a, b
	if b.raw.Load() == 1 {
		victim, other = b, a
	}
	victim.down()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	if !closedByPeer(err) {
		t.Fatalf("after the server was killed: %v", err)
	}
	if n+1<<20 >= size {
		t.Fatalf("read all %d bytes from a killed server", n)
	}
	conn.Close()
	waitFor(t, "no active connection", func() bool { return statsOf(t, lb, victim.addr).Active == 0 })
	waitFor(t, "the killed server failed", inState(lb, StateFailed, victim.addr))
	if got := whoCounts(t, lb.Addr(), 10); got[other.name] != 10 {
		t.Errorf("after the kill: %v", got)
	}
}

// A client that shuts its writing side still reads the whole answer,
// and sees the server's end: half-closes go through both ways.
func TestHalfClose(t *testing.T) {
	t.Parallel()
	a := newBackend(t, "a")
	lb := newLB(t, testOptions(t, a.addr))
	conn, err := net.Dial("tcp", lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	payload := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	go func() {
		io.WriteString(conn, "echo\n"+payload)
		conn.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(conn) // ends at the server's CloseWrite
	if err != nil || string(got) != payload {
		t.Fatalf("read %d bytes (%v), want the %d sent back", len(got), err, len(payload))
	}
}

// When a server is failed its connections are closed, unless the options
// keep them.
func TestConnectionsOnFailure(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "close", true: "keep"}[keep], func(t *testing.T) {
			t.Parallel()
			a, c := newBackend(t, "a"), newBackend(t, "c")
			o := testOptions(t, a.addr, a.addr, c.addr)
			o.KeepConnectionsOnFailure = keep
			lb := newLB(t, o)
			open := connTo(t, lb.Addr(), "c")
			defer open.Close()
			c.set(failing) // probes answered 503; the connection itself works
			waitFor(t, "c failed", inState(lb, StateFailed, c.addr))
			if keep {
				if st := statsOf(t, lb, c.addr); st.Active != 1 {
					t.Errorf("%d active connections to c, want 1", st.Active)
				}
				return
			}
			open.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, open); !closedByPeer(err) {
				t.Errorf("the connection to c was not closed: %v", err)
			}
			waitFor(t, "no active connection to c", func() bool { return statsOf(t, lb, c.addr).Active == 0 })
		})
	}
}

// Update adds and removes servers; the default is kept, as a standby when
// not in the list, with its connections.
func TestUpdate(t *testing.T) {
	t.Parallel()
	a, b, c, d := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c"), newBackend(t, "d")
	o := testOptions(t, a.addr, a.addr, b.addr, d.addr)
	lb := newLB(t, o)
	waitFor(t, "three healthy servers", inState(lb, StateHealthy, a.addr, b.addr, d.addr))
	held := map[string]net.Conn{"a": connTo(t, lb.Addr(), "a"), "d": connTo(t, lb.Addr(), "d")}
	defer held["a"].Close()
	defer held["d"].Close()

	if err := lb.Update([]string{b.addr, c.addr, b.addr}); err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, s := range lb.Stats() {
		list = append(list, s.Address)
		if (s.Address == a.addr) != (s.Default && s.Standby) {
			t.Errorf("%+v", s)
		}
	}
	if want := []string{a.addr, b.addr, c.addr}; strings.Join(list, " ") != strings.Join(want, " ") {
		t.Errorf("servers after Update: %v, want %v", list, want)
	}
	held["d"].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, held["d"]); !closedByPeer(err) {
		t.Errorf("the connection to the removed server was not closed: %v", err)
	}
	if st := statsOf(t, lb, a.addr); st.Active != 1 {
		t.Errorf("the standby default has %d connections, want its 1 kept", st.Active)
	}
	waitFor(t, "c healthy", inState(lb, StateHealthy, c.addr))
	if got := whoCounts(t, lb.Addr(), 20); got["b"] != 10 || got["c"] != 10 {
		t.Errorf("with a as standby: %v, want b and c 10 each", got)
	}

	before := lb.Stats()
	if err := lb.Update([]string{b.addr, "no-port"}); err == nil {
		t.Error("Update with an invalid address succeeded")
	}
	if after := lb.Stats(); len(after) != len(before) {
		t.Errorf("a failed Update changed the servers: %+v", after)
	}
	if err := lb.Update([]string{b.addr, lb.Addr()}); err == nil {
		t.Error("Update with the load balancer's own address succeeded")
	}
	if err := lb.Update([]string{a.addr, b.addr, c.addr}); err != nil {
		t.Fatal(err)
	}
	if statsOf(t, lb, a.addr).Standby {
		t.Error("a listed default is still a standby")
	}
	if got := whoCounts(t, lb.Addr(), 30); got["a"] != 10 || got["b"] != 10 || got["c"] != 10 {
		t.Errorf("a, b, c listed: %v, want 10 each", got)
	}
	n := len(logged(lb, "servers updated"))
	if err := lb.Update([]string{c.addr, a.addr, b.addr}); err != nil || len(logged(lb, "servers updated")) != n {
		t.Errorf("the same servers in another order: %v, logged as an update", err)
	}

	lb.Close()
	if err := lb.Update([]string{a.addr}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Update after Close: %v, want net.ErrClosed", err)
	}
}

// Every server down: connections are closed at once; every server back:
// they are served again, spread.
func TestAllDownAndBack(t *testing.T) {
	t.Parallel()
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	lb := newLB(t, testOptions(t, a.addr, a.addr, b.addr, c.addr))
	waitFor(t, "three healthy servers", inState(lb, StateHealthy, a.addr, b.addr, c.addr))
	for _, s := range []*backend{a, b, c} {
		s.down()
	}
	if got := whoCounts(t, lb.Addr(), 9); got[""] != 9 {
		t.Errorf("every server down: %v, want 9 connections closed", got)
	}
	waitFor(t, "three failed servers", inState(lb, StateFailed, a.addr, b.addr, c.addr))
	for _, s := range lb.Stats() {
		if s.DialFailures == 0 {
			t.Errorf("%s: no failed dial", s.Address)
		}
	}
	for _, s := range []*backend{a, b, c} {
		s.up(t)
	}
	waitFor(t, "three healthy servers", inState(lb, StateHealthy, a.addr, b.addr, c.addr))
	if got := whoCounts(t, lb.Addr(), 30); got["a"] != 10 || got["b"] != 10 || got["c"] != 10 {
		t.Errorf("every server back: %v, want 10 each", got)
	}
}

// Never empty: the listed servers first, then the standby default, then,
// when every server is failed, all of them in turn.
func TestNeverEmpty(t *testing.T) {
	t.Parallel()
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	lb := newLB(t, testOptions(t, a.addr, b.addr, c.addr)) // a is the default, not listed
	waitFor(t, "three healthy servers", inState(lb, StateHealthy, a.addr, b.addr, c.addr))
	if got := whoCounts(t, lb.Addr(), 20); got["b"] != 10 || got["c"] != 10 {
		t.Errorf("b and c healthy: %v, want 10 each", got)
	}
	b.set(failing)
	c.set(failing)
	waitFor(t, "b and c failed", inState(lb, StateFailed, b.addr, c.addr))
	if got := whoCounts(t, lb.Addr(), 10); got["a"] != 10 {
		t.Errorf("only the standby healthy: %v, want a 10", got)
	}
	a.set(failing)
	waitFor(t, "a failed", inState(lb, StateFailed, a.addr))
	if got := whoCounts(t, lb.Addr(), 30); got["a"] != 10 || got["b"] != 10 || got["c"] != 10 {
		t.Errorf("every server failed: %v, want 10 each", got)
	}
}

// 300 clients at once over 3 healthy servers: each gets its third, within
// 10 %, under either policy.
func TestSpread(t *testing.T) {
	t.Parallel()
	for name, p := range policies {
		t.Run("policy="+name, func(t *testing.T) {
			t.Parallel()
			a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
			o := testOptions(t, a.addr, a.addr, b.addr, c.addr)
			o.policy = p
			lb := newLB(t, o)
			waitFor(t, "three healthy servers", inState(lb, StateHealthy, a.addr, b.addr, c.addr))
			const clients = 300
			var wg sync.WaitGroup
			var mu sync.Mutex
			got := make(map[string]int)
			conns := make([]net.Conn, clients)
			for i := range clients {
				wg.Go(func() {
					name, conn := who(t, lb.Addr())
					conns[i] = conn
					mu.Lock()
					got[name]++
					mu.Unlock()
				})
			}
			wg.Wait()
			for _, conn := range conns {
				conn.Close()
			}
			worst := 0.0
			for _, name := range []string{"a", "b", "c"} {
				worst = max(worst, abs(float64(got[name])/(clients/3)-1))
			}
			t.Logf("%d clients at once: %v, the farthest %.1f %% from even", clients, got, 100*worst)
			if worst > 0.10 {
				t.Errorf("spread %v: %.1f %% from even, want within 10 %%", got, 100*worst)
			}
		})
	}
}

func abs(x float64) float64 { return max(x, -x) }

// policies are the alternatives TestSpread and TestPolicies compare.
var policies = map[string]policy{"roundrobin": roundRobin, "leastconns": leastConns}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free.Close()
	okTLS := ProbeOptions{TLS: &tls.Config{RootCAs: testPool}}
	self := "127.0.0.1:" + strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	for name, tc := range map[string]struct {
		o    *Options
		want string
	}{
		"nil options":   {nil, "Probe.TLS is required"},
		"no probe TLS":  {&Options{Default: "127.0.0.1:9345"}, "Probe.TLS is nil"},
		"default":       {&Options{Default: "127.0.0.1", Probe: okTLS}, "Options.Default"},
		"servers":       {&Options{Servers: []string{"127.0.0.1:0"}, Probe: okTLS}, "is not 1 to 65535"},
		"probe path":    {&Options{Probe: ProbeOptions{TLS: okTLS.TLS, Path: "/ping\r\nX: y"}}, "is not a path"},
		"negative":      {&Options{Probe: ProbeOptions{TLS: okTLS.TLS, Failures: -1}}, "negative"},
		"listen in use": {&Options{Listen: busy.Addr().String(), Probe: okTLS}, "address already in use"},
		"itself":        {&Options{Listen: self, Default: self, Probe: okTLS}, "own address"},
	} {
		lb, err := New(tc.o)
		if err == nil {
			lb.Close()
			t.Errorf("%s: New succeeded", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "loadbalancer: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want one starting with the package's name and saying %q", name, err, tc.want)
		}
	}
}

// A local host out of file descriptors (EMFILE on every dial, probes
// and proxied connections alike) fails no server: its state and
// consecutive failures stay as they were.
func TestOutOfFileDescriptors(t *testing.T) {
	t.Parallel()
	a := newBackend(t, "a")
	o := testOptions(t, a.addr)
	var short atomic.Bool
	o.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if short.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("socket", syscall.EMFILE)}
		}
		return new(net.Dialer).DialContext(ctx, network, addr)
	}
	lb := newLB(t, o)
	waitFor(t, "a healthy", inState(lb, StateHealthy, a.addr))
	short.Store(true)
	probes := statsOf(t, lb, a.addr).Probes
	waitFor(t, "ten probes", func() bool { return statsOf(t, lb, a.addr).Probes >= probes+10 })
	for range 5 {
		if c, err := net.Dial("tcp", lb.Addr()); err == nil {
			io.Copy(io.Discard, c) // closed: no server could be dialed
			c.Close()
		}
	}
	if st := statsOf(t, lb, a.addr); st.State != StateHealthy || st.ConsecutiveFailures != 0 || st.DialFailures == 0 {
		t.Errorf("%+v: want healthy, no failure counted, the dials failed", st)
	}
}
