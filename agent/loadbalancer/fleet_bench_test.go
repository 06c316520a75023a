//go:build unix

package loadbalancer

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nodepass/nodepass/internal/testexec"
)

var (
	fleetLBs    = flag.Int("fleet.lbs", 2000, "BenchmarkFleet: how many load balancers")
	fleetStart  = flag.Duration("fleet.start", 10*time.Second, "BenchmarkFleet: the time over which the load balancers start, evenly")
	fleetWarmup = flag.Duration("fleet.warmup", 20*time.Second, "BenchmarkFleet: how long from the first start to the window")
	fleetWindow = flag.Duration("fleet.window", time.Minute, "BenchmarkFleet: how long the steady state is measured")
)

// BenchmarkFleet answers: what do a fleet's probes cost each server in
// steady state? fleet.lbs load balancers (one per agent, 2,000) at the
// default options, each in front of the same 3 HTTPS servers on
// 127.0.0.1; each server a process of its own (this binary, run as a
// server), so that its CPU is its own. No connection is proxied: every
// request is a probe, and the servers' CPU is the probes'. The load
// balancers start evenly over fleet.start (10 s), as a running fleet's
// agents did not start in the same millisecond. From fleet.warmup (20 s)
// after the first start, over fleet.window (60 s), it reports each server's
// requests a second and CPU (ms a second), the probes per agent per
// server per 10 s, the CPU per probe, the load balancers' own CPU, and
// the probe failures and failed servers the window saw, and a server's
// CPU for 10 s before the first start (its floor). Run it alone:
//
//	go test -run '^$' -bench Fleet -benchtime 1x ./agent/loadbalancer/
func BenchmarkFleet(b *testing.B) {
	if testing.Short() {
		b.Skip("80 s and 2,000 load balancers")
	}
	testexec.SkipUnlessExecutable(b)
	n := *fleetLBs
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(4*n+200) {
		b.Skipf("%d load balancers need %d file descriptors (a listener and 3 probes each); the limit is %d", n, 4*n+200, lim.Cur)
	}
	dir := b.TempDir()
	writeTestCert(b, dir)
	var servers [3]*fleetServer
	var addrs []string
	for i := range servers {
		servers[i] = startFleetServer(b, dir)
		addrs = append(addrs, servers[i].addr)
	}
	idle := fleetServersCPU(b, servers, 10*time.Second) // the servers' own floor, before any probe
	discard := slog.New(slog.DiscardHandler)
	defer closeFleet()
	first := time.Now()
	for i := range n {
		time.Sleep(time.Until(first.Add(*fleetStart * time.Duration(i) / time.Duration(n))))
		lb, err := New(&Options{Default: addrs[i%3], Servers: addrs, Logger: discard,
			Probe: ProbeOptions{TLS: &tls.Config{RootCAs: testPool}}})
		if err != nil {
			b.Fatal(err)
		}
		fleet = append(fleet, lb)
	}
	time.Sleep(time.Until(first.Add(*fleetWarmup)))

	var reqs, cpu [3]float64 // per second of the window
	var lbCPU, probeFailures float64
	for b.Loop() {
		var before [3]fleetFigures
		for i, s := range servers {
			before[i] = s.figures(b)
		}
		fails, self := fleetProbeFailures(), ownCPU()
		start := time.Now()
		time.Sleep(*fleetWindow)
		secs := time.Since(start).Seconds()
		for i, s := range servers {
			f := s.figures(b)
			reqs[i] = float64(f.requests-before[i].requests) / secs
			cpu[i] = float64(f.cpu-before[i].cpu) / 1e6 / secs
		}
		lbCPU = float64(ownCPU()-self) / 1e6 / secs
		probeFailures = float64(fleetProbeFailures() - fails)
	}
	failed := 0
	for _, lb := range fleet {
		for _, s := range lb.Stats() {
			if s.State == StateFailed {
				failed++
			}
		}
	}
	var allReqs, allCPU float64
	for i := range servers {
		b.ReportMetric(reqs[i], fmt.Sprintf("server%d-req/s", i))
		b.ReportMetric(cpu[i], fmt.Sprintf("server%d-cpu-ms/s", i))
		allReqs += reqs[i]
		allCPU += cpu[i]
	}
	b.ReportMetric(allReqs/float64(3*n)*10, "probes/agent/server/10s")
	b.ReportMetric(allCPU*1e3/allReqs, "server-cpu-us/probe")
	b.ReportMetric(idle, "server-idle-cpu-ms/s")
	b.ReportMetric(lbCPU, "lbs-cpu-ms/s")
	b.ReportMetric(probeFailures, "probe-failures")
	b.ReportMetric(float64(failed), "failed-at-end")
}

// fleetServersCPU is the servers' CPU time, in ms a second on average,
// over d.
func fleetServersCPU(b *testing.B, servers [3]*fleetServer, d time.Duration) float64 {
	var before time.Duration
	for _, s := range servers {
		before += s.figures(b).cpu
	}
	start := time.Now()
	time.Sleep(d)
	var after time.Duration
	for _, s := range servers {
		after += s.figures(b).cpu
	}
	return float64(after-before) / 1e6 / time.Since(start).Seconds() / float64(len(servers))
}

// fleet is BenchmarkFleet's load balancers, while it runs.
var fleet []*LoadBalancer

// closeFleet closes the fleet's load balancers all at once: one by one,
// each would wait for its probers among the others' still probing.
func closeFleet() {
	var wg sync.WaitGroup
	for _, lb := range fleet {
		wg.Go(func() { lb.Close() })
	}
	wg.Wait()
	fleet = nil
}

func fleetProbeFailures() (n uint64) {
	for _, lb := range fleet {
		for _, s := range lb.Stats() {
			n += s.ProbeFailures
		}
	}
	return n
}

// ownCPU is the CPU time this process has used, user and system.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeTestCert writes the backends' certificate and key to dir, for the
// servers in other processes.
func writeTestCert(b *testing.B, dir string) {
	c := testServerTLS.Certificates[0]
	key, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		b.Fatal(err)
	}
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), cert, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		b.Fatal(err)
	}
}

// fleetServerEnv, set to a directory holding cert.pem and key.pem, makes
// this binary a server of BenchmarkFleet: it serves HTTPS on a free port
// of 127.0.0.1 (every request answered "pong") and prints its address;
// then, for each line it reads, its requests so far and its CPU time in
// ns; it exits when its input ends.
const fleetServerEnv = "NODEPASS_LB_FLEET_SERVER"

func init() {
	if dir := os.Getenv(fleetServerEnv); dir != "" {
		serveFleet(dir)
		os.Exit(0)
	}
}

func serveFleet(dir string) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		fmt.Println("error", err)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		return
	}
	var requests atomic.Int64
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			requests.Add(1)
			io.WriteString(w, "pong")
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	go srv.ServeTLS(ln, "", "")
	fmt.Println(ln.Addr())
	for sc := bufio.NewScanner(os.Stdin); sc.Scan(); {
		fmt.Println(requests.Load(), int64(ownCPU()))
	}
}

// fleetServer is a server process of BenchmarkFleet.
type fleetServer struct {
	addr string
	in   io.WriteCloser
	out  *bufio.Scanner
}

type fleetFigures struct {
	requests int64
	cpu      time.Duration
}

// startFleetServer starts a server process; the benchmark's end stops it.
func startFleetServer(b *testing.B, dir string) *fleetServer {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), fleetServerEnv+"="+dir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	s := &fleetServer{in: in, out: bufio.NewScanner(out)}
	if !s.out.Scan() {
		b.Fatalf("a server process said nothing: %v", s.out.Err())
	}
	s.addr = s.out.Text()
	if _, _, err := net.SplitHostPort(s.addr); err != nil {
		b.Fatalf("a server process said %q", s.addr)
	}
	return s
}

// figures asks the server for its requests so far and its CPU time.
func (s *fleetServer) figures(b *testing.B) fleetFigures {
	var f fleetFigures
	var cpu int64
	if _, err := io.WriteString(s.in, "\n"); err != nil || !s.out.Scan() {
		b.Fatalf("a server process ended: %v", err)
	}
	if _, err := fmt.Sscan(s.out.Text(), &f.requests, &cpu); err != nil {
		b.Fatalf("a server process said %q", s.out.Text())
	}
	f.cpu = time.Duration(cpu)
	return f
}
