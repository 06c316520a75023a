package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// connectProxy is an HTTP proxy on 127.0.0.1 that serves CONNECT alone,
// to clients that authenticate as proxyUser. It sends proxiedName to
// 127.0.0.1, and records the target of each tunnel.
type connectProxy struct {
	url     string // http://user:password@127.0.0.1:port, or https://
	caFile  string // for https://, the file of the CA to trust it with
	mu      sync.Mutex
	targets []string
}

var proxyUser = url.UserPassword("agent", "pr0xy")

// newConnectProxy starts a proxy, over TLS if overTLS.
func newConnectProxy(t *testing.T, overTLS bool) *connectProxy {
	t.Helper()
	p := &connectProxy{}
	var wg sync.WaitGroup
	var conns []net.Conn
	pw, _ := proxyUser.Password()
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(proxyUser.Username()+":"+pw))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		if r.Header.Get("Proxy-Authorization") != auth {
			http.Error(w, "who are you?", http.StatusProxyAuthRequired)
			return
		}
		p.mu.Lock()
		p.targets = append(p.targets, r.Host)
		p.mu.Unlock()
		up, err := net.Dial("tcp", strings.Replace(r.Host, proxiedName+":", "127.0.0.1:", 1))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		down, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		rw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
		rw.Flush()
		p.mu.Lock()
		conns = append(conns, up, down)
		p.mu.Unlock()
		wg.Go(func() { io.Copy(up, rw); up.Close() })
		wg.Go(func() { io.Copy(down, up); down.Close() })
	}))
	if overTLS {
		srv.StartTLS()
		p.caFile = filepath.Join(t.TempDir(), "proxy-ca.pem")
		if err := os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		srv.Close()
		p.mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	u, _ := url.Parse(srv.URL)
	u.User = proxyUser
	p.url = u.String()
	return p
}

func (p *connectProxy) tunnels() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.targets)
}

// runEnv runs the command with args in the tests' environment, its proxy
// settings replaced by env, and returns its exit code and stderr.
func runEnv(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := command(t, ctx, args...)
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return strings.HasSuffix(strings.ToUpper(k), "_PROXY") || strings.HasSuffix(k, "_AGENT_HTTP_PROXY_ALLOWED")
	})
	cmd.Env = append(cmd.Env, env...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), errOut.String()
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
	for _, pr := range []*connectProxy{p, overTLS} {
		code, errOut := runEnv(t, []string{allowed, "HTTPS_PROXY=" + pr.url, "SSL_CERT_FILE=" + pr.caFile}, args(proxied)...)
		tunnels := pr.tunnels()
		if code != 0 || len(tunnels) == 0 {
			t.Fatalf("through %s: exit %d, %d tunnels; want 0 and some:\n%s", pr.url, code, len(tunnels), errOut)
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
		{"HTTPS_PROXY=" + p.url}, // not allowed
		{"K3S_AGENT_HTTP_PROXY_ALLOWED=false", "HTTPS_PROXY=" + p.url}, // not allowed
		{allowed, "HTTP_PROXY=" + p.url},                               // no proxy for https://
		{allowed, "HTTPS_PROXY=" + p.url, "NO_PROXY=" + ip.String() + "/32"},
		{allowed, "https_proxy=" + p.url, "no_proxy=" + ip.String()},
	} {
		before := len(p.tunnels())
		code, errOut := runEnv(t, env, append(baseArgs(direct, t.TempDir()), "-timeout", "10s")...)
		if n := len(p.tunnels()) - before; code != 0 || n != 0 {
			t.Errorf("%q: exit %d, %d tunnels; want 0, none:\n%s", env, code, n, errOut)
		}
	}
}
