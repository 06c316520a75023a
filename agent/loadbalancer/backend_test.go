package loadbalancer

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The servers of these tests are backends on 127.0.0.1: one port serves
// the load balancer's HTTPS probes (a connection that starts with a TLS
// record) and a raw protocol for the proxied connections (one that starts
// with a command line), so that each kind is counted apart:
//
//	who\n       the backend's name and "\n", then the connection is held until the client closes it
//	echo\n      every byte back, until EOF; then CloseWrite
//	stream N\n  N bytes, then close

// testServerTLS is a backend's TLS configuration; testPool trusts it.
var testServerTLS, testPool = testCert()

func testCert() (*tls.Config, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "loadbalancer test server"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}, pool
}

// mode is how a backend behaves.
type mode int32

const (
	healthy   mode = iota // probes answered 200, the raw protocol served
	hung                  // TLS completes, requests are read, nothing is ever answered
	failing               // probes answered 503, the raw protocol served
	resetting             // every connection reset as soon as it is accepted
	closing               // probes answered 200, then their connection closed without a word (an idle timeout)
)

type backend struct {
	name string
	addr string // fixed once started; down and up keep it
	mode atomic.Int32

	raw      atomic.Int64 // raw (proxied) connections accepted
	tlsConns atomic.Int64 // TLS (probe) connections accepted
	pings    atomic.Int64 // probe requests received
	lastRaw  atomic.Int64 // time of the last raw connection, UnixNano

	release   chan struct{} // closed by close: hung handlers return
	tlsQueue  chan net.Conn // to the HTTP server
	http      *http.Server
	closeOnce sync.Once

	mu    sync.Mutex
	ln    net.Listener // nil while down
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // the accept loop and raw handlers
}

// newBackend starts a healthy backend; the test's end closes it.
func newBackend(t testing.TB, name string) *backend {
	b := &backend{
		name:     name,
		release:  make(chan struct{}),
		tlsQueue: make(chan net.Conn),
		conns:    make(map[net.Conn]struct{}),
	}
	b.http = &http.Server{Handler: http.HandlerFunc(b.serveHTTP), ErrorLog: log.New(io.Discard, "", 0)}
	go b.http.Serve(tls.NewListener(&queueListener{b}, testServerTLS))
	b.up(t)
	t.Cleanup(b.close)
	return b
}

func (b *backend) set(m mode) { b.mode.Store(int32(m)) }

// up listens (again, on the same port after down).
func (b *backend) up(t testing.TB) {
	addr := b.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	b.mu.Lock()
	b.ln = ln
	b.mu.Unlock()
	b.wg.Go(func() { b.acceptLoop(ln) })
}

// down kills the backend: its listener and every connection closed, as
// when its process dies. Connections are then refused until up.
func (b *backend) down() {
	b.mu.Lock()
	if b.ln != nil {
		b.ln.Close()
		b.ln = nil
	}
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// close stops the backend for good; it may be called again.
func (b *backend) close() {
	b.closeOnce.Do(func() {
		b.down()
		close(b.release)
		b.http.Close()
	})
}

func (b *backend) acceptLoop(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if mode(b.mode.Load()) == resetting {
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
			continue
		}
		b.mu.Lock()
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Go(func() { b.serveConn(c) })
	}
}

// serveConn tells a probe's connection from a raw one by its first byte
// (22: a TLS handshake record).
func (b *backend) serveConn(c net.Conn) {
	bc := &bufferedConn{Conn: c, r: bufio.NewReader(c), b: b}
	br := bc.r
	first, err := br.Peek(1)
	if err != nil {
		bc.Close()
		return
	}
	if first[0] == 22 {
		b.tlsConns.Add(1)
		select {
		case b.tlsQueue <- bc: // the HTTP server closes it
		case <-b.release:
			bc.Close()
		}
		return
	}
	defer bc.Close()
	b.raw.Add(1)
	b.lastRaw.Store(time.Now().UnixNano())
	if mode(b.mode.Load()) == hung {
		io.Copy(io.Discard, br) // until the client (or down) closes it
		return
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return
	}
	cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch cmd {
	case "who":
		io.WriteString(c, b.name+"\n")
		io.Copy(io.Discard, br)
	case "echo":
		io.Copy(c, br)
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, br)
	case "stream":
		n, _ := strconv.ParseInt(arg, 10, 64)
		writeZeros(c, n)
	}
}

var zeros = make([]byte, 256<<10)

func writeZeros(w io.Writer, n int64) error {
	for n > 0 {
		k, err := w.Write(zeros[:min(n, int64(len(zeros)))])
		if err != nil {
			return err
		}
		n -= int64(k)
	}
	return nil
}

func (b *backend) serveHTTP(w http.ResponseWriter, r *http.Request) {
	b.pings.Add(1)
	switch mode(b.mode.Load()) {
	case hung:
		select {
		case <-r.Context().Done():
		case <-b.release:
		}
		panic(http.ErrAbortHandler) // no answer, even late
	case failing:
		http.Error(w, "failing", http.StatusServiceUnavailable)
	case resetting: // the probe's kept-alive connection too
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.(*tls.Conn).NetConn().(*bufferedConn).Conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	case closing:
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err == nil {
			brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\npong")
			brw.Flush()
			conn.Close()
		}
	default:
		io.WriteString(w, "pong")
	}
}

// bufferedConn reads what serveConn peeked first, and leaves the
// backend's connections when closed.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
	b *backend
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *bufferedConn) Close() error {
	c.b.mu.Lock()
	delete(c.b.conns, c.Conn)
	c.b.mu.Unlock()
	return c.Conn.Close()
}

// queueListener hands the HTTP server the TLS connections serveConn
// accepted.
type queueListener struct{ b *backend }

func (l *queueListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.b.tlsQueue:
		return c, nil
	case <-l.b.release:
		return nil, net.ErrClosed
	}
}
func (l *queueListener) Close() error   { return nil }
func (l *queueListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// testOptions are options for a test: servers by address, fast probes
// (20 ms apart, healthy or not; a generous timeout, since only a hung
// server waits it out), the test's log.
func testOptions(t testing.TB, def string, servers ...string) *Options {
	return &Options{
		Default: def,
		Servers: servers,
		Probe: ProbeOptions{TLS: &tls.Config{RootCAs: testPool},
			Interval: 20 * time.Millisecond, HealthyInterval: 20 * time.Millisecond, Timeout: 2 * time.Second},
		Logger: testLogger(t),
	}
}

// newLB starts a LoadBalancer the test's end closes.
func newLB(t testing.TB, opts *Options) *LoadBalancer {
	t.Helper()
	lb, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lb.Close(); err != nil {
			t.Error(err)
		}
	})
	return lb
}

// who opens a connection through addr and returns the name of the backend
// that answered ("" when the connection was closed first), and the
// connection, which the backend holds open until it is closed.
func who(t testing.TB, addr string) (string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "who\n"); err != nil {
		return "", c
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	c.SetReadDeadline(time.Time{})
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("no answer through %s in 10 s", addr)
		}
		return "", c
	}
	return strings.TrimSpace(line), c
}

// connTo opens connections through addr until one is answered by the
// backend named name, and returns it open; it closes the others.
func connTo(t testing.TB, addr, name string) net.Conn {
	t.Helper()
	for range 100 {
		got, c := who(t, addr)
		if got == name {
			return c
		}
		c.Close()
	}
	t.Fatalf("no connection through %s reached %s in 100", addr, name)
	return nil
}

// whoCounts opens n connections one after the other, counts them by the
// backend that answered ("" for those closed unanswered), and closes them.
func whoCounts(t testing.TB, addr string, n int) map[string]int {
	t.Helper()
	got := make(map[string]int)
	for range n {
		name, c := who(t, addr)
		got[name]++
		c.Close()
	}
	return got
}

// waitFor polls cond until it holds, for at most 20 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting, after 20 s, for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// statsOf returns the figures of the server at addr.
func statsOf(t testing.TB, lb *LoadBalancer, addr string) ServerStats {
	t.Helper()
	for _, s := range lb.Stats() {
		if s.Address == addr {
			return s
		}
	}
	t.Fatalf("no server %s in %+v", addr, lb.Stats())
	return ServerStats{}
}

// inState reports whether every server at addrs is in state st.
func inState(lb *LoadBalancer, st State, addrs ...string) func() bool {
	return func() bool {
		n := 0
		for _, s := range lb.Stats() {
			for _, a := range addrs {
				if s.Address == a && s.State == st {
					n++
				}
			}
		}
		return n == len(addrs)
	}
}

// testLogger writes to the test's log, and keeps the records.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(&recorder{t: t, mu: new(sync.Mutex), records: new([]slog.Record)})
}

type recorder struct {
	t       testing.TB
	mu      *sync.Mutex
	records *[]slog.Record
	attrs   []slog.Attr
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	rec.AddAttrs(r.attrs...)
	r.mu.Lock()
	*r.records = append(*r.records, rec.Clone())
	r.mu.Unlock()
	r.t.Log(recordText(rec))
	return nil
}

// recordText is a record's level, message and attributes.
func recordText(rec slog.Record) string {
	var sb strings.Builder
	sb.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		sb.WriteString(" " + a.String())
		return true
	})
	return sb.String()
}
func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.attrs = append(c.attrs[:len(c.attrs):len(c.attrs)], as...)
	return &c
}
func (r *recorder) WithGroup(string) slog.Handler { return r }

// logged returns the records of lb's logger whose message contains msg.
func logged(lb *LoadBalancer, msg string) []slog.Record {
	r := lb.log.Handler().(*recorder)
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range *r.records {
		if strings.Contains(rec.Message, msg) {
			out = append(out, rec)
		}
	}
	return out
}
