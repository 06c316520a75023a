package loadbalancer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// connectProxy is an HTTP proxy on 127.0.0.1 that opens CONNECT tunnels
// only, as a site's proxy does for k3s's agent when
// K3S_AGENT_HTTP_PROXY_ALLOWED is set (pkg/agent/loadbalancer/httpproxy.go
// dials every server through it with CONNECT). It counts the tunnels it
// opened, by target.
type connectProxy struct {
	addr string

	mu      sync.Mutex
	tunnels map[string]int
}

func newConnectProxy(t testing.TB) *connectProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{addr: ln.Addr().String(), tunnels: make(map[string]int)}
	var wg sync.WaitGroup // the tunnels' copies
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.serve(w, r, &wg)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close() // not the hijacked tunnels: their ends close them
		wg.Wait()
	})
	return p
}

func (p *connectProxy) serve(w http.ResponseWriter, r *http.Request, wg *sync.WaitGroup) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	up, err := net.Dial("tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	down, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	p.mu.Lock()
	p.tunnels[r.Host]++
	p.mu.Unlock()
	brw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
	brw.Flush()
	wg.Go(func() {
		io.Copy(up, brw) // what the client sent after its CONNECT, then the rest
		up.(*net.TCPConn).CloseWrite()
	})
	wg.Go(func() {
		io.Copy(down, up)
		down.Close()
		up.Close()
	})
}

func (p *connectProxy) count(target string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tunnels[target]
}

// dialThrough is a DialContext that reaches every address through an HTTP
// proxy's CONNECT tunnel.
func dialThrough(proxy string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := new(net.Dialer).DialContext(ctx, network, proxy)
		if err != nil {
			return nil, err
		}
		if d, ok := ctx.Deadline(); ok {
			c.SetDeadline(d)
		}
		req := &http.Request{Method: http.MethodConnect, Host: addr, Header: http.Header{}}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, req)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("proxy: %s", resp.Status)
		}
		if err == nil && br.Buffered() > 0 {
			err = fmt.Errorf("proxy: %d bytes after its answer", br.Buffered())
		}
		if err != nil {
			c.Close()
			return nil, err
		}
		c.SetDeadline(time.Time{})
		return c, nil
	}
}

// Behind an HTTP proxy every connection to a server goes through the
// dialer: the probes and the proxied connections. Each connection a
// server accepts came through a tunnel of the proxy.
func TestHTTPProxy(t *testing.T) {
	t.Parallel()
	a, b := newBackend(t, "a"), newBackend(t, "b")
	p := newConnectProxy(t)
	o := testOptions(t, a.addr, a.addr, b.addr)
	o.DialContext = dialThrough(p.addr)
	lb := newLB(t, o)
	waitFor(t, "two healthy servers", inState(lb, StateHealthy, a.addr, b.addr))
	if got := whoCounts(t, lb.Addr(), 10); got["a"] != 5 || got["b"] != 5 {
		t.Errorf("through the proxy: %v, want a and b 5 each", got)
	}
	lb.Close()
	for _, s := range []*backend{a, b} {
		probes, proxied := s.tlsConns.Load(), s.raw.Load()
		if probes < 1 || proxied != 5 || p.count(s.addr) != int(probes+proxied) {
			t.Errorf("%s accepted %d probe and %d proxied connections; the proxy opened %d tunnels to it", s.name, probes, proxied, p.count(s.addr))
		}
	}
}
