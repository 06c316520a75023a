package loadbalancer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The tests in fake time (testing/synctest) cannot use sockets: a
// goroutine blocked on one is not durably blocked, so the clock would not
// move. They run the load balancer over memNet instead: its listener, its
// dials and its servers are in memory; everything else is the package's
// own code (the accept loop, the choice of a server, the pipes, the
// probes over TLS).

// memConn is one end of an in-memory connection. Unlike net.Pipe's, a
// Write does not wait for the peer to read it (a TLS server writes its
// session tickets while its client writes its Finished: on net.Pipe both
// would wait). Deadlines are not supported.
type memConn struct {
	in, out chan []byte
	buf     []byte        // read from in, not yet returned
	done    chan struct{} // closed by Close
	peer    *memConn
	once    sync.Once
}

func memPipe() (*memConn, *memConn) {
	ab, ba := make(chan []byte, 1024), make(chan []byte, 1024)
	a := &memConn{in: ba, out: ab, done: make(chan struct{})}
	b := &memConn{in: ab, out: ba, done: make(chan struct{})}
	a.peer, b.peer = b, a
	return a, b
}

func (c *memConn) Read(p []byte) (int, error) {
	if len(c.buf) == 0 {
		select {
		case c.buf = <-c.in:
		case <-c.done:
			return 0, net.ErrClosed
		case <-c.peer.done:
			select {
			case c.buf = <-c.in:
			default:
				return 0, io.EOF
			}
		}
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

func (c *memConn) Write(p []byte) (int, error) {
	select {
	case <-c.done:
		return 0, net.ErrClosed
	case <-c.peer.done:
		return 0, syscall.EPIPE
	case c.out <- bytes.Clone(p):
		return len(p), nil
	}
}

func (c *memConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

type memAddr string

func (a memAddr) Network() string { return "mem" }
func (a memAddr) String() string  { return string(a) }

var errNoDeadlines = errors.New("memConn: deadlines are not supported")

func (c *memConn) LocalAddr() net.Addr              { return memAddr("local") }
func (c *memConn) RemoteAddr() net.Addr             { return memAddr("remote") }
func (c *memConn) SetDeadline(time.Time) error      { return errNoDeadlines }
func (c *memConn) SetReadDeadline(time.Time) error  { return errNoDeadlines }
func (c *memConn) SetWriteDeadline(time.Time) error { return errNoDeadlines }

// memListener is the load balancer's listener; dial connects to it.
type memListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newMemListener() *memListener {
	return &memListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr("127.0.0.1:6444") }

// dial is a client's connection to the load balancer.
func (l *memListener) dial() net.Conn {
	c, s := memPipe()
	select {
	case l.ch <- s:
	case <-l.done:
		s.Close()
	}
	return c
}

// memNet is the servers by address; its dial is the load balancer's
// DialContext. An address with no server refuses the connection.
type memNet struct {
	mu      sync.Mutex
	servers map[string]*memServer
	dials   atomic.Int64
}

func newMemNet() *memNet { return &memNet{servers: make(map[string]*memServer)} }

// add starts a healthy server named name at addr.
func (n *memNet) add(addr, name string) *memServer {
	s := &memServer{name: name}
	n.mu.Lock()
	n.servers[addr] = s
	n.mu.Unlock()
	return s
}

func (n *memNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.dials.Add(1)
	n.mu.Lock()
	s := n.servers[addr]
	n.mu.Unlock()
	if s == nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	c, sc := memPipe()
	go s.serve(sc)
	return c, nil
}

// memServer is a backend in memory: HTTPS with the backends' certificate,
// /ping answered "pong" and any other path with the server's name, in
// the modes of backend (healthy, hung or failing: 503).
type memServer struct {
	name            string
	mode            atomic.Int32
	pings, requests atomic.Int64
}

func (s *memServer) set(m mode) { s.mode.Store(int32(m)) }

// serve serves one connection until its client closes it. Hung, it
// reads a request and answers nothing.
func (s *memServer) serve(c net.Conn) {
	tc := tls.Server(c, testServerTLS)
	defer tc.Close()
	br := bufio.NewReader(tc)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		status, body := "200 OK", s.name
		if req.URL.Path == "/ping" {
			s.pings.Add(1)
			body = "pong"
		} else {
			s.requests.Add(1)
		}
		switch mode(s.mode.Load()) {
		case hung:
			io.Copy(io.Discard, br) // until the client leaves
			return
		case failing:
			status = "503 Service Unavailable"
		}
		answer := "HTTP/1.1 " + status + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		if _, err := io.WriteString(tc, answer); err != nil {
			return
		}
	}
}

// memTLS verifies the backends' certificate at the time the tests
// started: in fake time the clock starts in 2000, before its NotBefore.
func memTLS() *tls.Config {
	return &tls.Config{RootCAs: testPool, Time: func() time.Time { return started }}
}

var started = time.Now()

// memGet sends a GET of path over a new connection to the load balancer,
// as an agent would, and returns the answer's body ("" when the
// connection ended first) and the connection, still open. It waits as
// long as the answer takes.
func memGet(l *memListener, path string) (string, net.Conn) {
	cfg := memTLS()
	cfg.ServerName = "127.0.0.1"
	c := tls.Client(l.dial(), cfg)
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", c
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", c
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", c
	}
	return strings.TrimSpace(string(body)), c
}

// memLB starts a LoadBalancer listening on l, dialing through n, with
// o's servers and probes. The test's end closes it.
func memLB(t testing.TB, n *memNet, l *memListener, o *Options) *LoadBalancer {
	t.Helper()
	o.DialContext = n.dial
	opts, err := o.resolve()
	if err != nil {
		t.Fatal(err)
	}
	lb := &LoadBalancer{opts: opts, log: opts.Logger, ln: l}
	lb.start(opts.Servers)
	t.Cleanup(func() { lb.Close() })
	return lb
}
