// Package testproxy is an HTTP proxy on 127.0.0.1 for tests, such as a
// site's proxy is for k3s's agent with K3S_AGENT_HTTP_PROXY_ALLOWED set
// (k3s pkg/agent/loadbalancer/httpproxy.go dials every server through a
// CONNECT tunnel). It serves CONNECT alone and records each tunnel's
// target.
package testproxy

import (
	"encoding/base64"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// Options configures a Proxy. The zero value is a plain proxy over TCP
// that asks for no credentials and dials each target as it is named.
type Options struct {
	// User, if set, is the only client the proxy serves (basic
	// Proxy-Authorization); others get 407.
	User *url.Userinfo
	// TLS serves the proxy over TLS (an https:// proxy).
	TLS bool
	// Dial is the address the proxy dials for a tunnel's target; nil
	// dials the target itself.
	Dial func(target string) string
}

// Proxy is a running proxy, closed when its test ends.
type Proxy struct {
	URL    string // http://[user@]127.0.0.1:port, or https://
	Addr   string // its host:port
	CAFile string // with Options.TLS, the file of the certificate to trust it with

	mu      sync.Mutex
	targets []string   // each tunnel's
	conns   []net.Conn // each tunnel's two, closed when the test ends
}

// New starts a proxy for t.
func New(t testing.TB, o Options) *Proxy {
	t.Helper()
	p := &Proxy{}
	auth := ""
	if o.User != nil {
		pw, _ := o.User.Password()
		auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(o.User.Username()+":"+pw))
	}
	var wg sync.WaitGroup // the tunnels' copies
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		if auth != "" && r.Header.Get("Proxy-Authorization") != auth {
			http.Error(w, "who are you?", http.StatusProxyAuthRequired)
			return
		}
		addr := r.Host
		if o.Dial != nil {
			addr = o.Dial(r.Host)
		}
		up, err := net.Dial("tcp", addr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		down, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		p.mu.Lock()
		p.targets = append(p.targets, r.Host)
		p.conns = append(p.conns, up, down)
		p.mu.Unlock()
		rw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
		rw.Flush()
		wg.Go(func() {
			io.Copy(up, rw) // what the client sent after its CONNECT, then the rest
			up.(*net.TCPConn).CloseWrite()
		})
		wg.Go(func() {
			io.Copy(down, up)
			down.Close()
			up.Close()
		})
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if o.TLS {
		srv.StartTLS()
		p.CAFile = filepath.Join(t.TempDir(), "proxy-ca.pem")
		if err := os.WriteFile(p.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		srv.Close() // not the hijacked tunnels
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	u, _ := url.Parse(srv.URL)
	p.Addr = u.Host
	u.User = o.User
	p.URL = u.String()
	return p
}

// Tunnels returns the targets of the tunnels opened so far, in order.
func (p *Proxy) Tunnels() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.targets)
}

// Count returns how many tunnels were opened to target.
func (p *Proxy) Count(target string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, t := range p.targets {
		if t == target {
			n++
		}
	}
	return n
}
