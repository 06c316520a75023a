package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodepass/nodepass/internal/testproxy"
)

var proxyUser = url.UserPassword("agent", "pr0xy")

// newConnectProxy starts a proxy (over TLS if overTLS) that serves
// clients authenticated as proxyUser and sends proxiedName to 127.0.0.1.
func newConnectProxy(t *testing.T, overTLS bool) *testproxy.Proxy {
	return testproxy.New(t, testproxy.Options{User: proxyUser, TLS: overTLS, Dial: func(target string) string {
		return strings.Replace(target, proxiedName+":", "127.0.0.1:", 1)
	}})
}

// runEnv runs the command with args in the tests' environment, its proxy
// settings replaced by env, and returns its exit code and stderr.
func runEnv(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := command(t, ctx, args...)
	cmd.Env = proxyEnv(cmd.Env, env...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), errOut.String()
}

// proxyEnv is env without its proxy settings (every *_PROXY, either
// case, and *_AGENT_HTTP_PROXY_ALLOWED), then add.
func proxyEnv(env []string, add ...string) []string {
	env = slices.DeleteFunc(env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return strings.HasSuffix(strings.ToUpper(k), "_PROXY") || strings.HasSuffix(k, "_AGENT_HTTP_PROXY_ALLOWED")
	})
	return append(env, add...)
}

// hostIP is an address of this host that is not loopback (net/http never
// proxies loopback), that of the default route; nil if there is none.
func hostIP() net.IP {
	conn, err := net.Dial("udp", "198.51.100.1:9")
	if err != nil {
		return nil
	}
	defer conn.Close()
	if ip := conn.LocalAddr().(*net.UDPAddr).IP; !ip.IsLoopback() {
		return ip
	}
	return nil
}

// The command reaches its servers through an HTTP proxy as k3s's agent
// does (pkg/agent/loadbalancer/httpproxy.go SetHTTPProxy): only with
// K3S_AGENT_HTTP_PROXY_ALLOWED true, through HTTPS_PROXY's proxy, unless
// NO_PROXY names the server, with an HTTP CONNECT tunnel. The proxied
// server is named supervisor.invalid, which only the proxy resolves.
func TestHTTPProxy(t *testing.T) {
	p := newConnectProxy(t, false)
	f := newFakeSupervisor(t)
	proxied := strings.Replace(f.url, "127.0.0.1", proxiedName, 1)
	allowed := "K3S_AGENT_HTTP_PROXY_ALLOWED=true"
	args := func(server string) []string {
		return append(baseArgs(f, t.TempDir()), "-server", server, "-timeout", "10s")
	}

	// An https:// proxy is trusted with the host's roots, here set by
	// SSL_CERT_FILE.
	overTLS := newConnectProxy(t, true)
	for _, pr := range []*testproxy.Proxy{p, overTLS} {
		code, errOut := runEnv(t, []string{allowed, "HTTPS_PROXY=" + pr.URL, "SSL_CERT_FILE=" + pr.CAFile}, args(proxied)...)
		tunnels := pr.Tunnels()
		if code != 0 || len(tunnels) == 0 {
			t.Fatalf("through %s: exit %d, %d tunnels; want 0 and some:\n%s", pr.URL, code, len(tunnels), errOut)
		}
		for _, tun := range tunnels {
			if tun != strings.TrimPrefix(proxied, "https://") {
				t.Errorf("a tunnel to %s", tun)
			}
		}
	}

	code, errOut := runEnv(t, []string{allowed, "HTTPS_PROXY=socks5://127.0.0.1:1080"}, args(proxied)...)
	if want := "agent: K3S_AGENT_HTTP_PROXY_ALLOWED: proxy socks5://127.0.0.1:1080: the scheme is not http or https"; code != 2 || strings.TrimSpace(errOut) != want {
		t.Errorf("a socks5 proxy: exit %d, stderr %q; want 2, %q", code, errOut, want)
	}

	ip := hostIP()
	if ip == nil {
		t.Skip("no address but loopback, which is never proxied: cannot tell a direct connection")
	}
	direct := newFakeSupervisorOn(t, ip)
	for _, env := range [][]string{
		{"HTTPS_PROXY=" + p.URL}, // not allowed
		{"K3S_AGENT_HTTP_PROXY_ALLOWED=false", "HTTPS_PROXY=" + p.URL}, // not allowed
		{allowed, "HTTP_PROXY=" + p.URL},                               // no proxy for https://
		{allowed, "HTTPS_PROXY=" + p.URL, "NO_PROXY=" + ip.String() + "/32"},
		{allowed, "https_proxy=" + p.URL, "no_proxy=" + ip.String()},
	} {
		before := len(p.Tunnels())
		code, errOut := runEnv(t, env, append(baseArgs(direct, t.TempDir()), "-timeout", "10s")...)
		if n := len(p.Tunnels()) - before; code != 0 || n != 0 {
			t.Errorf("%q: exit %d, %d tunnels; want 0, none:\n%s", env, code, n, errOut)
		}
	}
}

// With -wait -lb-listen, the load balancer reaches the servers through
// the same proxy, its probes and the connections it proxies, as k3s's
// load balancer dials through the proxy's dialer
// (pkg/agent/loadbalancer/httpproxy.go SetHTTPProxy, servers.go
// dialContext). The server is named supervisor.invalid, which only the
// proxy resolves: a GET /ping through the load balancer answers only if
// the load balancer went through the proxy.
func TestHTTPProxyLoadBalancer(t *testing.T) {
	p := newConnectProxy(t, false)
	f := newFakeSupervisor(t)
	proxied := strings.Replace(f.url, "127.0.0.1", proxiedName, 1)
	addr := freeAddr(t) // the load balancer listens there
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := command(t, ctx, append(baseArgs(f, t.TempDir()), "-server", proxied, "-wait", "-lb-listen", addr)...)
	cmd.Env = proxyEnv(cmd.Env, "K3S_AGENT_HTTP_PROXY_ALLOWED=true", "HTTPS_PROXY="+p.URL)
	stdout, errOut, err := startLB(t, cmd, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	go io.Copy(io.Discard, stdout)
	before := len(p.Tunnels())

	code, body, err := ping(addr, f.caPEM, proxiedName)
	if err != nil {
		t.Fatalf("GET /ping through the load balancer: %v\n%s", err, errOut.String())
	}
	if body != "pong" {
		t.Errorf("through the load balancer: %d %q", code, body)
	}
	if n := len(p.Tunnels()) - before; n < 1 {
		t.Errorf("%d tunnels for the load balancer's connection, want 1 or more", n)
	}
}
