package loadbalancer

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/nodepass/nodepass/internal/testproxy"
)

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
	p := testproxy.New(t, testproxy.Options{})
	o := testOptions(t, a.addr, a.addr, b.addr)
	o.DialContext = dialThrough(p.Addr)
	lb := newLB(t, o)
	waitFor(t, "two healthy servers", inState(lb, StateHealthy, a.addr, b.addr))
	if got := whoCounts(t, lb.Addr(), 10); got["a"] != 5 || got["b"] != 5 {
		t.Errorf("through the proxy: %v, want a and b 5 each", got)
	}
	lb.Close()
	for _, s := range []*backend{a, b} {
		probes, proxied := s.tlsConns.Load(), s.raw.Load()
		if probes < 1 || proxied != 5 || p.Count(s.addr) != int(probes+proxied) {
			t.Errorf("%s accepted %d probe and %d proxied connections; the proxy opened %d tunnels to it", s.name, probes, proxied, p.Count(s.addr))
		}
	}
}
