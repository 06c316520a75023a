package loadbalancer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync/atomic"
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

// The detection bound of the package doc, in fake time: a server that
// hangs at any moment of a probe's interval is failed within
// F × Interval + Timeout, and healthy again within S × Interval (and the
// time of an answer) once it answers.
func TestProbeLoopDetection(t *testing.T) {
	const (
		F, S     = 3, 2
		interval = time.Second
		timeout  = 700 * time.Millisecond
		answer   = 10 * time.Millisecond
	)
	for _, offset := range []time.Duration{0, time.Millisecond, 300 * time.Millisecond, 999 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var hung atomic.Bool
			probe := func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				time.Sleep(answer)
				if hung.Load() {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			}
			var h health
			changed := make(chan State, 4)
			go probeLoop(ctx, interval, probe, func(err error) {
				if h.observe(err == nil, F, S) {
					changed <- h.state
				}
			})
			if st := <-changed; st != StateHealthy {
				t.Fatalf("first change to %v", st)
			}
			time.Sleep(5*interval + offset)
			start := time.Now()
			hung.Store(true)
			if st := <-changed; st != StateFailed {
				t.Fatalf("change to %v, want failed", st)
			}
			if d, bound := time.Since(start), F*interval+timeout; d > bound || d < (F-1)*interval {
				t.Errorf("hung at +%v: failed after %v, want within [%v, %v]", offset, d, (F-1)*interval, bound)
			}
			time.Sleep(offset)
			start = time.Now()
			hung.Store(false)
			if st := <-changed; st != StateHealthy {
				t.Fatalf("change to %v, want healthy", st)
			}
			if d, bound := time.Since(start), S*interval+answer; d > bound || d < (S-1)*interval {
				t.Errorf("answering at +%v: healthy after %v, want within [%v, %v]", offset, d, (S-1)*interval, bound)
			}
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
