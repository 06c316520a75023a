package agent

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkJoin answers: what does one node's Get cost the node and its
// servers, in requests, TLS handshakes and time, against servers on
// 127.0.0.1 that answer at once (no scrypt)? certs=cold is a first join
// (k3s: ten requests and ten handshakes per attempt); certs=valid a
// restart with valid certificates (k3s: the same ten); hung=1 a first
// join whose remembered server completes TLS and never answers (k3s:
// never joins), with a 100 ms header timeout.
func BenchmarkJoin(b *testing.B) {
	for _, bc := range []struct {
		name  string
		valid bool
		hung  bool
	}{
		{"certs=cold", false, false},
		{"certs=valid", true, false},
		{"certs=cold/hung=1", false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cl := newCluster(b)
			s := newSupervisor(b, cl)
			var known []string
			if bc.hung {
				hung, _ := hungServer(b, cl.serverCA, "h2", "http/1.1")
				known = []string{hung}
				s.announce = []string{hung, s.addr}
			}
			opts := func(dir string) *Options {
				return &Options{Server: "https://" + s.addr, Token: cl.token(), NodeName: "worker-1", DataDir: dir,
					NodePassword: "0123456789abcdef0123456789abcdef", Servers: known,
					HeaderTimeout: 100 * time.Millisecond, Logger: discard}
			}
			var total Stats
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				dir := b.TempDir()
				if bc.valid {
					b.StopTimer()
					join(b, opts(dir))
					b.StartTimer()
				}
				st := join(b, opts(dir))
				total.Requests += st.Requests
				total.Handshakes += st.Handshakes
				total.Requested += st.Requested
				total.Failovers += st.Failovers
			}
			n := float64(b.N)
			b.ReportMetric(float64(total.Requests)/n, "requests/op")
			b.ReportMetric(float64(total.Handshakes)/n, "handshakes/op")
			b.ReportMetric(float64(total.Requested)/n, "certs-requested/op")
			b.ReportMetric(float64(total.Failovers)/n, "failovers/op")
		})
	}
}

// join runs a Client's Get to the end and returns its Stats.
func join(b *testing.B, opts *Options) Stats {
	c, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Get(ctx); err != nil {
		b.Fatal(fmt.Errorf("join: %w", err))
	}
	return c.Stats()
}

// BenchmarkHerdRestart answers: how long do 320 nodes that all hold
// valid certificates take to start at once against one server on
// 127.0.0.1 (issue 29's -certs valid, without the herd harness): every
// node's Get concurrently, timed from the first to the last. The nodes
// joined before the timer starts.
func BenchmarkHerdRestart(b *testing.B) {
	const nodes = 320
	cl := newCluster(b)
	s := newSupervisor(b, cl)
	opts := make([]*Options, nodes)
	for i := range opts {
		opts[i] = &Options{Server: "https://" + s.addr, Token: cl.token(), NodeName: fmt.Sprintf("node-%d", i),
			DataDir: b.TempDir(), NodePassword: "0123456789abcdef0123456789abcdef", Logger: discard}
		join(b, opts[i])
	}
	var total Stats
	for b.Loop() {
		stats := make([]Stats, nodes)
		done := make(chan int)
		for i := range opts {
			go func() {
				stats[i] = join(b, opts[i])
				done <- i
			}()
		}
		for range nodes {
			<-done
		}
		for _, st := range stats {
			total.Requests += st.Requests
			total.Handshakes += st.Handshakes
			total.Requested += st.Requested
		}
	}
	n := float64(b.N * nodes)
	b.ReportMetric(float64(total.Requests)/n, "requests/node")
	b.ReportMetric(float64(total.Handshakes)/n, "handshakes/node")
	b.ReportMetric(float64(total.Requested)/n, "certs-requested/node")
}
