package loadbalancer

import (
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"
)

// benchPaths are a backend's address and a LoadBalancer's in front of it
// alone: the same server, direct or through the proxy.
func benchPaths(b *testing.B) []struct{ name, addr string } {
	be := newBackend(b, "a")
	o := testOptions(b, be.addr)
	o.Probe = ProbeOptions{TLS: o.Probe.TLS} // the default probes: the tests' would be counted
	o.Logger = slog.New(slog.DiscardHandler) // b.Log would print into the results
	lb := newLB(b, o)
	return []struct{ name, addr string }{{"direct", be.addr}, {"proxy", lb.Addr()}}
}

func benchDial(b *testing.B, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkTransfer answers: what does the proxy cost a bulk transfer on
// loopback? 1 GiB from the server to the client per op, each over a new
// connection; MB/s is the throughput.
func BenchmarkTransfer(b *testing.B) {
	const size = 1 << 30
	for _, path := range benchPaths(b) {
		b.Run("path="+path.name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			buf := make([]byte, 256<<10)
			for b.Loop() {
				c := benchDial(b, path.addr)
				io.WriteString(c, "stream "+strconv.Itoa(size)+"\n")
				var n int64
				for {
					k, err := c.Read(buf)
					n += int64(k)
					if err != nil {
						break
					}
				}
				c.Close()
				if n != size {
					b.Fatalf("read %d bytes, want %d", n, size)
				}
			}
		})
	}
}

// BenchmarkRoundTrip answers: what latency does the proxy add to a small
// request? 64 bytes to the server and back over one kept connection, as
// an HTTP/2 client's ping or a small request would; p50-us and p99-us are
// the median and 99th percentile of the round trips.
func BenchmarkRoundTrip(b *testing.B) {
	for _, path := range benchPaths(b) {
		b.Run("path="+path.name, func(b *testing.B) {
			b.ReportAllocs()
			c := benchDial(b, path.addr)
			defer c.Close()
			io.WriteString(c, "echo\n")
			msg, back := make([]byte, 64), make([]byte, 64)
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, back); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkConnect answers: what does the proxy add to a new connection?
// Dial, one 64-byte round trip, close; through the proxy that is also an
// accept, the choice of a server and a dial to it.
func BenchmarkConnect(b *testing.B) {
	for _, path := range benchPaths(b) {
		b.Run("path="+path.name, func(b *testing.B) {
			b.ReportAllocs()
			msg := make([]byte, 64)
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				c := benchDial(b, path.addr)
				io.WriteString(c, "echo\n")
				c.Write(msg)
				if _, err := io.ReadFull(c, msg); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				c.Close()
			}
			reportPercentiles(b, lat)
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e3 }
	b.ReportMetric(at(0.50), "p50-us")
	b.ReportMetric(at(0.99), "p99-us")
}

// BenchmarkCandidates answers: what does choosing the servers cost a new
// connection, under each policy, with 3 servers and every core choosing?
func BenchmarkCandidates(b *testing.B) {
	for _, name := range []string{"roundrobin", "leastconns"} {
		b.Run("policy="+name, func(b *testing.B) {
			b.ReportAllocs()
			lb := selection(policies[name], 3, nil)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					s := lb.candidates()[0]
					lb.attach(s, nil, true)
				}
			})
		})
	}
}
