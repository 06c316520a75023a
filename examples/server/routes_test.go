package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// startWithToken starts a server with -token-file holding tokenFile and
// -data-dir, plus extra flags, and returns it sending the token.
func startWithToken(t *testing.T, tokenFile, token string, extra ...string) *server {
	t.Helper()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	tf := filepath.Join(dir, "token")
	if err := os.WriteFile(tf, []byte(tokenFile), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-addr", "127.0.0.1:0", "-logn", "4", "-ca-file", caFile, "-data-dir", dir, "-token-file", tf}, extra...)
	s := start(t, caFile, func(ctx context.Context, out io.Writer) error { return run(ctx, args, out, out) }).withCAs(t, dir)
	s.token = token
	return s
}

// TestAgentRoutes: with -token-file, a k3s agent's whole attempt is
// served, each route behind the join token; without the token, or with a
// wrong one, 401 and a basic-auth challenge.
func TestAgentRoutes(t *testing.T) {
	s := startWithToken(t, "join-secret,node,node,k3s:agent\nother,server,server\n", "join-secret",
		"-apiservers", "10.0.0.1:9345,10.0.0.2:9345", "-store", "dir")
	n := nodes(2)[1]
	if resp, body := s.get(t, "/ping", "", "", ""); resp.StatusCode != 200 || string(body) != "pong" {
		t.Errorf("/ping: %d %q", resp.StatusCode, body)
	}
	for path, want := range map[string][]byte{"/v1-k3s/client-ca.crt": s.clientCA, "/v1-k3s/server-ca.crt": s.ca} {
		if resp, body := s.get(t, path, "", "", ""); resp.StatusCode != 200 || !bytes.Equal(body, want) {
			t.Errorf("%s: %d, not the CA", path, resp.StatusCode)
		}
	}
	resp, body := s.get(t, "/v1-k3s/apiservers", "", "", "")
	var servers []string
	if err := json.Unmarshal(body, &servers); resp.StatusCode != 200 || err != nil || strings.Join(servers, ",") != "10.0.0.1:9345,10.0.0.2:9345" {
		t.Errorf("/apiservers: %d %q", resp.StatusCode, body)
	}
	resp, body = s.get(t, "/v1-k3s/config", "", "", "")
	var cfg map[string]any
	if err := json.Unmarshal(body, &cfg); resp.StatusCode != 200 || err != nil || cfg["SupervisorPort"] == nil {
		t.Errorf("/config: %d %q", resp.StatusCode, body)
	}
	for _, c := range []struct{ path, cn string }{
		{"/v1-k3s/client-kube-proxy.crt", "system:kube-proxy"},
		{"/v1-k3s/client-k3s-controller.crt", "system:k3s-controller"},
	} {
		key, csr := newCSR(t, c.cn)
		resp, body := s.send(t, http.MethodPost, c.path, "", "", "", csr)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.path, resp.StatusCode, body)
		}
		checkKubeletCert(t, body, s.clientCA, c.cn, nil, x509.ExtKeyUsageClientAuth, &key.PublicKey)
		_, other := newCSR(t, "system:node:"+n.name)
		if resp, _ := s.send(t, http.MethodPost, c.path, "", "", "", other); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s with a CSR for another name: %d, want 400", c.path, resp.StatusCode)
		}
	}
	key, csr := newCSR(t, n.name)
	resp, body = s.send(t, http.MethodPost, "/v1-k3s/serving-kubelet.crt", n.name, n.password, n.ip, csr)
	if resp.StatusCode != 200 {
		t.Fatalf("serving-kubelet.crt: %d %s", resp.StatusCode, body)
	}
	checkKubeletCert(t, body, s.kubeletCA, n.name, []net.IP{net.ParseIP(n.ip)}, x509.ExtKeyUsageServerAuth, &key.PublicKey)

	// A wrong token for a user is answered later and later (the
	// Verifier's failure delay), so only the missing one goes everywhere.
	for _, token := range []string{"", "wrong", "other"} {
		s.token = token
		paths := []string{"/v1-k3s/config", "/v1-k3s/serving-kubelet.crt"}
		if token == "" {
			paths = append(paths, "/v1-k3s/client-ca.crt", "/v1-k3s/apiservers", "/v1-k3s/client-kube-proxy.crt")
		}
		for _, path := range paths {
			method := http.MethodGet
			if strings.Contains(path, "kube-proxy") {
				method = http.MethodPost
			}
			resp, _ := s.send(t, method, path, n.name, n.password, n.ip, nil)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm="k3s"` {
				t.Errorf("%s with token %q: %d %q, want 401 with a challenge", path, token, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
	s.token = ""
	if resp, _ := s.get(t, "/cacerts", "", "", ""); resp.StatusCode != 200 {
		t.Errorf("/cacerts without a token: %d, want 200", resp.StatusCode)
	}
	// /metrics is behind the join token too.
	if resp, _ := s.get(t, "/metrics", "", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d, want 401", resp.StatusCode)
	}
	s.token = "join-secret"
	// The tokens were hashed once each at load; checking them cost none.
	if m := s.metrics(t); m["nodepass_scrypt_runs_total"] != 3 {
		t.Errorf("scrypt runs %g, want 3: two tokens loaded, one node enrolled", m["nodepass_scrypt_runs_total"])
	}
}

// TestTokenFileForms: a file of one token is read as k3s reads its
// --token-file and writes its passwd file from it (k3s pkg/util/file.go
// ReadFile trims white space; pkg/daemons/control/deps/deps.go genUsers
// and getNodePass give the user "node" the password of a
// [K10<hash>::]<user>:<password> token, else the token, and "server" the
// token; pkg/passwd/passwd.go EnsureUser cuts "K10...::<user>:" off,
// Write quotes with encoding/csv; pkg/clientaccess/token.go parseToken
// reads the token). Quotes and commas are part of the password.
func TestTokenFileForms(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, c := range []struct {
		file          string
		user, token   string // accepted
		refusedTokens []string
	}{
		{"bare-secret\n", "node", "bare-secret", []string{"bare-secret\n"}},
		{" bare-secret \n", "server", "bare-secret", nil},
		{`"cluster-secret"`, "node", `"cluster-secret"`, []string{"cluster-secret"}},
		{`a"b`, "node", `a"b`, []string{"a"}},
		{`"`, "node", `"`, nil},
		{"K10" + hash + "::node:k10-secret", "node", "k10-secret", []string{"K10" + hash + "::node:k10-secret"}},
		{"K10" + hash + `::node:p"w,x`, "node", `p"w,x`, []string{"p"}},
		{"K10" + hash + "::server:srv-secret", "server", "srv-secret", nil},
		{"K10" + hash + "::server:srv-secret", "node", "srv-secret", nil},
		{"user:pass", "node", "user:pass", []string{"pass"}},
		{"K10abc:def", "node", "def", []string{"abc:def"}},
	} {
		s := startWithToken(t, c.file, c.token)
		s.tokenUser = c.user
		if resp, body := s.get(t, "/v1-k3s/config", "", "", ""); resp.StatusCode != 200 {
			t.Errorf("token file %q, %s:%s: %d %s", c.file, c.user, c.token, resp.StatusCode, body)
		}
		for _, wrong := range c.refusedTokens {
			s.token = wrong
			if resp, _ := s.get(t, "/v1-k3s/config", "", "", ""); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("token file %q, %s:%s: %d, want 401", c.file, c.user, wrong, resp.StatusCode)
			}
		}
	}
	dir := t.TempDir()
	for name, c := range map[string]struct{ file, err string }{
		"empty":        {"", "holds no token"},
		"bad K10":      {"K10abc::nocolon", "CA hash has 3 characters"},
		"no password":  {"K10" + hash + "::node:", "not K10<CA hash>::<user>:<password>"},
		"short line":   {"a,b\n", "want at least 3"},
		"short hash":   {"K10abcdef::node:k10-secret", "CA hash has 6 characters"},
		"no separator": {"K10nocolon", "not K10<CA hash>::<user>:<password>"},
	} {
		tf := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		os.WriteFile(tf, []byte(c.file), 0o600)
		err := run(t.Context(), []string{"-addr", "127.0.0.1:0", "-logn", "4", "-token-file", tf}, io.Discard, io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), "server: -token-file") || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want a -token-file error saying %q", name, err, c.err)
		}
	}
}

// TestKubeletCertificateRefusals: names and addresses a node cannot have
// a certificate for (issue F): the server's own, loopback, wildcards, too
// many addresses.
func TestKubeletCertificateRefusals(t *testing.T) {
	s := startWithToken(t, "join-secret\n", "join-secret", "-tls-san", "192.0.2.200,api.example.com")
	for i, c := range []struct{ name, ips, want string }{
		{"worker-1", "127.0.0.1", "not a node's address"},
		{"worker-2", "::1", "not a node's address"},
		{"worker-3", "0.0.0.0", "not a node's address"},
		{"worker-4", "192.0.2.200", "an address of this server"},
		{"localhost", "192.0.2.1", "a name of this server"},
		{"api.example.com", "192.0.2.1", "a name of this server"},
		{"*.example.com", "192.0.2.1", ""},
		{"worker-5", strings.Repeat("192.0.2.9,", 9) + "192.0.2.9", "at most 8"},
	} {
		pw := strings.Repeat("ab", 16)[:31] + string(rune('0'+i))
		_, csr := newCSR(t, c.name)
		resp, body := s.send(t, http.MethodPost, "/v1-k3s/serving-kubelet.crt", c.name, pw, c.ips, csr)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), c.want) || bytes.Contains(body, []byte("CERTIFICATE-----")) {
			t.Errorf("%s at %s: %d %q, want 400 with %q", c.name, c.ips, resp.StatusCode, body, c.want)
		}
	}
}

// TestSharedDataDir: servers started at once on one -data-dir share their
// CAs, so an agent that trusts one trusts all.
func TestSharedDataDir(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	got := make([]*authorities, 4)
	errs := make([]error, 4)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = newAuthorities(dir, caOptions{now: time.Now, notBefore: notBeforeRecent}) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		for j, ca := range got[i].each() {
			if !bytes.Equal((*ca).pem, (*got[0].each()[j]).pem) {
				t.Errorf("server %d's %s differs from server 0's", i, caNames[j])
			}
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "tls", "server-ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("server-ca.key: %v, mode %v", err, fi.Mode())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("data dir holds %v, want tls alone", ents)
	}
}
