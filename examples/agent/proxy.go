package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// The command reaches its servers through an HTTP proxy when the
// environment says so, as k3s's agent does
// (pkg/agent/loadbalancer/httpproxy.go SetHTTPProxy):
//
//   - only when K3S_AGENT_HTTP_PROXY_ALLOWED (RKE2_... with -program
//     rke2) is true, as strconv.ParseBool reads it; unset or false, every
//     connection is direct, whatever HTTPS_PROXY says;
//   - then through the proxy that HTTPS_PROXY, NO_PROXY and their
//     lower-case forms give for the -server URL, read as net/http reads
//     them (golang.org/x/net/http/httpproxy, which k3s calls): none for
//     an address NO_PROXY names, nor for localhost or a loopback address;
//   - decided once, for -server: the proxy then carries the connections
//     to every server, as in k3s.
//
// The proxy is http:// or https://, its port 8080 or 443 when it has
// none (as k3s's dialer, github.com/mwitkow/go-http-dialer, defaults
// them), and the tunnel an HTTP CONNECT. User information in its URL goes
// in Proxy-Authorization, which k3s's dialer does not send. k3s also
// takes socks5:// proxies; this command refuses them.

// proxyTimeout bounds the connection to the proxy, as k3s bounds it.
const proxyTimeout = 10 * time.Second

// proxyDial returns the dialer of the connections to the servers that
// the environment asks for, or nil for direct connections.
func proxyDial(program, server string, log *slog.Logger) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	allowed := strings.ToUpper(program) + "_AGENT_HTTP_PROXY_ALLOWED"
	if ok, _ := strconv.ParseBool(os.Getenv(allowed)); !ok {
		return nil, nil
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("agent: -server %q: %w", server, err)
	}
	proxy, err := http.ProxyFromEnvironment(&http.Request{URL: u})
	if err != nil {
		return nil, fmt.Errorf("agent: %s: the proxy for %s: %w", allowed, server, err)
	}
	if proxy == nil {
		log.Debug("agent: "+allowed+" is true, but no proxy is set for the server", "server", server)
		return nil, nil
	}
	d := &connectDialer{proxy: proxy, addr: proxy.Host}
	switch proxy.Scheme {
	case "http":
		if proxy.Port() == "" {
			d.addr = net.JoinHostPort(proxy.Hostname(), "8080")
		}
	case "https":
		if proxy.Port() == "" {
			d.addr = net.JoinHostPort(proxy.Hostname(), "443")
		}
		d.tls = &tls.Config{ServerName: proxy.Hostname()}
	default:
		return nil, fmt.Errorf("agent: %s: proxy %s: the scheme is not http or https", allowed, proxy.Redacted())
	}
	log.Info("agent: connecting to the servers through a proxy", "proxy", proxy.Redacted())
	return d.DialContext, nil
}

// connectDialer makes connections through an HTTP proxy's CONNECT
// tunnels.
type connectDialer struct {
	proxy *url.URL
	addr  string      // the proxy's host:port
	tls   *tls.Config // for an https:// proxy; nil for http://
}

// DialContext connects to addr through the proxy. ctx bounds the
// connection to the proxy and the CONNECT exchange.
func (d *connectDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	dialer := net.Dialer{Timeout: proxyTimeout}
	conn, err := dialer.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", d.proxy.Redacted(), err)
	}
	if d.tls != nil {
		tc := tls.Client(conn, d.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("proxy %s: %w", d.proxy.Redacted(), err)
		}
		conn = tc
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	br, err := d.connect(conn, addr)
	if !stop() {
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("proxy %s: %w", d.proxy.Redacted(), err)
	}
	if br.Buffered() > 0 { // what the server sent after the proxy's answer
		return &bufferedConn{conn, br}, nil
	}
	return conn, nil
}

// connect asks the proxy on conn for a tunnel to addr.
func (d *connectDialer) connect(conn net.Conn, addr string) (*bufio.Reader, error) {
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr, Header: make(http.Header)}
	if u := d.proxy.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("CONNECT %s: %s", addr, resp.Status)
	}
	return br, nil
}

// bufferedConn is a connection whose first bytes were read into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
