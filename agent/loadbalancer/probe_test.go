package loadbalancer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// The health rules of the package doc, one result at a time.
func TestHealthTransitions(t *testing.T) {
	const F, S = 3, 2
	for _, tc := range []struct {
		name    string
		results string // o: success, x: failure
		want    State
		changes int
	}{
		{"new", "", StateUnchecked, 0},
		{"first success", "o", StateHealthy, 1},
		{"unchecked fails F times", "xxx", StateFailed, 1},
		{"unchecked fails F-1 times", "xx", StateUnchecked, 0},
		{"a success breaks the run", "oxxoxx", StateHealthy, 1},
		{"healthy fails F times", "oxxx", StateFailed, 2},
		{"failed: one success is not enough", "oxxxo", StateFailed, 2},
		{"failed: S successes", "oxxxoo", StateHealthy, 3},
		{"failed: a failure restarts the count", "oxxxoxo", StateFailed, 2},
		{"failed stays failed", "xxxxxxx", StateFailed, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h health
			changes := 0
			for _, r := range tc.results {
				if h.observe(r == 'o', F, S) {
					changes++
				}
			}
			if h.state != tc.want || changes != tc.changes {
				t.Errorf("after %q: %v with %d changes, want %v with %d", tc.results, h.state, changes, tc.want, tc.changes)
			}
		})
	}
}

// How often a server is probed at the default options, in fake time
// over 5 minutes: a healthy server once every 10 to 15 s, whether clients
// use it or not, as k3s's etcd proxy probes (every 5 to 10 s,
// pkg/etcd/etcdproxy.go), where it was every second: a fleet of 5,000
// agents sends each server 330 to 500 probes a second, not 5,000. A
// server that refuses connections the same, after 1, 1, 1, 2, 4 and 8 s.
func TestProbeRate(t *testing.T) {
	const run = 5 * time.Minute
	for _, tc := range []struct {
		name      string
		down, use bool // the server refuses connections; a client asks it something every 2 s
	}{
		{"healthy unused", false, false},
		{"healthy in use", false, true},
		{"refusing", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const addr = "127.0.0.1:9345"
				n, l := newMemNet(), newMemListener()
				if !tc.down {
					n.add(addr, "a")
				}
				lb := memLB(t, n, l, &Options{Default: addr, Probe: ProbeOptions{TLS: memTLS()}, Logger: testLogger(t)})
				start := time.Now()
				asked := 0
				for tc.use && time.Since(start) < run-2*time.Second {
					time.Sleep(2 * time.Second)
					body, c := memGet(l, "/v1-k3s/config")
					c.Close()
					if body != "a" {
						t.Fatalf("a request answered %q", body)
					}
					asked++
				}
				time.Sleep(run - time.Since(start))
				st := statsOf(t, lb, addr)
				lo, hi := 1+uint64(run/(15*time.Second)), 1+uint64(run/(10*time.Second))
				if tc.down {
					hi += 5 // 1 s apart until failed, then 1, 2, 4 and 8 s
				}
				if st.Probes < lo || st.Probes > hi {
					t.Errorf("%d probes in %v (%d requests), want %d to %d", st.Probes, run, asked, lo, hi)
				}
				if want := map[bool]State{false: StateHealthy, true: StateFailed}[tc.down]; st.State != want {
					t.Errorf("%v, want %v", st.State, want)
				}
			})
		})
	}
}

// The hung-server guarantee, in fake time at the default options: a
// server that completes TLS and then answers nothing is failed within
// F × Interval + Timeout (3.8 s) of the first connection that waits on
// it, wherever that falls between its probes. That connection is closed
// then, later ones go to the other server, and once it answers again it
// is healthy within S × Interval. A connection answered in time makes
// no server suspect.
func TestDetection(t *testing.T) {
	const (
		F, S     = defaultFailures, defaultSuccesses
		interval = defaultProbeInterval
		bound    = F*interval + defaultProbeTimeout
	)
	for _, offset := range []time.Duration{0, 300 * time.Millisecond, 999 * time.Millisecond, 5 * time.Second, 9999 * time.Millisecond, 12500 * time.Millisecond} {
		t.Run(fmt.Sprint("hung at +", offset), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const aAddr, bAddr = "127.0.0.1:1", "127.0.0.1:2"
				n, l := newMemNet(), newMemListener()
				n.add(aAddr, "a")
				b := n.add(bAddr, "b")
				lb := memLB(t, n, l, &Options{Default: aAddr, Servers: []string{aAddr, bAddr},
					Probe: ProbeOptions{TLS: memTLS()}, Logger: testLogger(t)})
				for range 6 { // answered in no time: no server suspect
					if body, c := memGet(l, "/"); body == "" {
						t.Fatal("a request unanswered")
					} else {
						c.Close()
					}
				}
				steady := 20*time.Second + offset
				time.Sleep(steady)
				if st, most := statsOf(t, lb, bAddr), 1+uint64(steady/(10*time.Second)); st.State != StateHealthy || st.Suspect || st.Waits != 0 || st.Probes > most {
					t.Fatalf("b before it hangs: %+v; want healthy, not suspect, no wait, at most %d probes", st, most)
				}

				b.set(hung)
				var waitedAt time.Time
				for {
					waitedAt = time.Now()
					body, c := memGet(l, "/")
					c.Close()
					if body == "" { // it went to b, and was closed
						break
					}
				}
				st := statsOf(t, lb, bAddr)
				d := time.Since(waitedAt)
				if st.State != StateFailed || d > bound {
					t.Errorf("b %v %v after the first request that waited on it, want failed within %v", st.State, d, bound)
				}
				t.Logf("b failed %v after the first request that waited on it", d)
				if st.Waits != 1 || st.ProbeFailures != F {
					t.Errorf("b: %d waits, %d probe failures; want 1 and %d", st.Waits, st.ProbeFailures, F)
				}
				for range 4 {
					if body, c := memGet(l, "/"); body != "a" {
						t.Errorf("with b failed, a request answered by %q", body)
					} else {
						c.Close()
					}
				}

				b.set(healthy)
				start := time.Now()
				for statsOf(t, lb, bAddr).State != StateHealthy {
					time.Sleep(time.Millisecond)
				}
				if d := time.Since(start); d > S*interval {
					t.Errorf("b answering again: healthy after %v, want within %v", d, S*interval)
				}
			})
		})
	}
}

// A probe fails on each way a server can fail to answer, and costs a
// healthy server one TLS connection for many probes.
func TestProbe(t *testing.T) {
	t.Parallel()
	refused := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return ln.Addr().String()
	}
	// A listener that never accepts: the kernel completes TCP's handshake,
	// as for a SIGSTOPped server, and TLS never starts.
	silent := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln.Addr().String()
	}
	backendIn := func(m mode) func(t *testing.T) string {
		return func(t *testing.T) string {
			b := newBackend(t, "b")
			b.set(m)
			return b.addr
		}
	}
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) string
		tls    *tls.Config
		ok     bool
		isTime bool // the failure is the probe's timeout
	}{
		{"healthy", backendIn(healthy), nil, true, false},
		{"refused", refused, nil, false, false},
		{"reset", backendIn(resetting), nil, false, false},
		{"handshake never completes", silent, nil, false, true},
		{"TLS completes, no answer", backendIn(hung), nil, false, true},
		{"503", backendIn(failing), nil, false, false},
		{"another CA", backendIn(healthy), &tls.Config{RootCAs: x509.NewCertPool()}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := testOptions(t, "")
			o.Probe.Timeout = time.Second
			if tc.tls != nil {
				o.Probe.TLS = tc.tls
			}
			lb := &LoadBalancer{ctx: t.Context()}
			var err error
			if lb.opts, err = o.resolve(); err != nil {
				t.Fatal(err)
			}
			s := &server{addr: tc.server(t)}
			pr := newProber(lb, s)
			defer pr.disconnect()
			for range 3 {
				err := pr.probe(t.Context())
				if (err == nil) != tc.ok {
					t.Fatalf("probe: %v, want ok=%v", err, tc.ok)
				}
				if err != nil && errors.Is(err, context.DeadlineExceeded) != tc.isTime {
					t.Errorf("probe: %v; want a timeout: %v", err, tc.isTime)
				}
			}
			if tc.ok && pr.conn == nil {
				t.Error("the connection was not kept after a successful probe")
			}
			if got := s.probeFailures.Load(); tc.ok != (got == 0) {
				t.Errorf("%d probe failures counted", got)
			}
		})
	}
}

// A healthy server's probes share one TLS connection.
func TestProbeKeepsAlive(t *testing.T) {
	t.Parallel()
	b := newBackend(t, "a")
	o := testOptions(t, b.addr)
	lb := newLB(t, o)
	waitFor(t, "10 probes", func() bool { return statsOf(t, lb, b.addr).Probes >= 10 })
	if n := b.tlsConns.Load(); n != 1 {
		t.Errorf("10 probes took %d TLS connections, want 1", n)
	}
}

// A server that closes idle connections sooner than the next probe (an
// idle timeout under the probes' interval): the probe finds its kept
// connection closed, sends its GET again on a new one, and counts no
// failure.
func TestProbeReconnects(t *testing.T) {
	t.Parallel()
	b := newBackend(t, "a")
	b.set(closing)
	lb := newLB(t, testOptions(t, b.addr))
	waitFor(t, "10 probes", func() bool { return statsOf(t, lb, b.addr).Probes >= 10 })
	if st := statsOf(t, lb, b.addr); st.ProbeFailures != 0 || st.State != StateHealthy {
		t.Errorf("%+v: want healthy, no probe failure", st)
	}
	if n := b.tlsConns.Load(); n < 9 {
		t.Errorf("10 probes took %d connections, want one each", n)
	}
}
