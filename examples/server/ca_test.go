package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodepass/nodepass/agent"
	"github.com/nodepass/nodepass/internal/atomicfile"
)

// TestIssuedValidity: the CAs sign as k3s's do through rancher/dynamiclistener
// (cert/validity.go CalculateNotBefore, cert/cert.go NewSignedCert): today
// NotBefore is max(now - 1 h, the CA's NotBefore) and NotAfter a year
// after it; before CalculateNotBefore, NotBefore was the CA's and NotAfter
// a year from now (the incident's RKE2 v1.25 log: notBefore the CA's
// creation, notAfter issue + 365 days). CAs are backdated by -ca-age-years
// and an hour (NewSelfSignedCACert).
func TestIssuedValidity(t *testing.T) {
	made := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		rule          notBeforeRule
		age           time.Duration
		issued        time.Time
		before, after time.Time // want
	}{
		{notBeforeRecent, 0, made.Add(48 * time.Hour), made.Add(47 * time.Hour), made.Add(47*time.Hour + year)},
		{notBeforeRecent, 5 * year, made.Add(48 * time.Hour), made.Add(47 * time.Hour), made.Add(47*time.Hour + year)},
		// A clock set back: the CA's NotBefore is later than now - 1 h.
		{notBeforeRecent, 0, made.Add(-30 * time.Minute), made.Add(-time.Hour), made.Add(-time.Hour + year)},
		{notBeforeCA, 0, made.Add(48 * time.Hour), made.Add(-time.Hour), made.Add(48*time.Hour + year)},
		{notBeforeCA, 5 * year, made.Add(48 * time.Hour), made.Add(-5*year - time.Hour), made.Add(48*time.Hour + year)},
	} {
		now := made
		cas, err := newAuthorities("", caOptions{now: func() time.Time { return now }, notBefore: c.rule, age: c.age})
		if err != nil {
			t.Fatal(err)
		}
		if ca := cas.kubelet.cert; !ca.NotBefore.Equal(made.Add(-c.age-time.Hour)) || !ca.NotAfter.Equal(made.Add(-c.age-time.Hour+10*year)) {
			t.Errorf("%s, age %v: CA valid %v to %v, want from %v for 10 years", c.rule, c.age, ca.NotBefore, ca.NotAfter, made.Add(-c.age-time.Hour))
		}
		now = c.issued
		_, csr := newCSR(t, "worker-1")
		req, _ := x509.ParseCertificateRequest(csr)
		out, err := cas.kubelet.issueFor(servingLeaf("worker-1", nil), req.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		certs := pemCerts(t, out)
		if got := certs[0]; !got.NotBefore.Equal(c.before) || !got.NotAfter.Equal(c.after) {
			t.Errorf("%s, CA age %v, issued %v: valid %v to %v, want %v to %v", c.rule, c.age, c.issued, got.NotBefore, got.NotAfter, c.before, c.after)
		}
	}
}

// TestCertificatesLikeK3s: over HTTPS, the certificates the server issues
// to agents, and its own, follow k3s's rule (see TestIssuedValidity):
// by default NotBefore is an hour before the request, not a minute, so an
// agent whose clock lags by up to an hour accepts them; with -not-before
// ca and -ca-age-years 5 they start when the 5-year-old CA does and end a
// year after the request.
func TestCertificatesLikeK3s(t *testing.T) {
	n := nodes(2)[1]
	for _, c := range []struct {
		flags []string
		rule  notBeforeRule
		age   time.Duration
	}{
		{nil, notBeforeRecent, 0},
		{[]string{"-ca-age-years", "5"}, notBeforeRecent, 5 * year},
		{[]string{"-ca-age-years", "5", "-not-before", "ca"}, notBeforeCA, 5 * year},
	} {
		before := time.Now()
		s := startWithToken(t, "join-secret\n", "join-secret", c.flags...)
		_, csr := newCSR(t, n.name)
		resp, body := s.send(t, http.MethodPost, "/v1-k3s/serving-kubelet.crt", n.name, n.password, n.ip, csr)
		after := time.Now()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: %d %s", c.flags, resp.StatusCode, body)
		}
		ca := pemCerts(t, s.kubeletCA)[0]
		if lo, hi := before.Add(-c.age-time.Hour).Truncate(time.Second), after.Add(-c.age-time.Hour); ca.NotBefore.Before(lo) || ca.NotBefore.After(hi) {
			t.Errorf("%q: CA NotBefore %v, want %v to %v", c.flags, ca.NotBefore, lo, hi)
		}
		for what, cert := range map[string]*x509.Certificate{"kubelet": pemCerts(t, body)[0], "server": resp.TLS.PeerCertificates[0]} {
			if c.rule == notBeforeCA {
				if what == "server" {
					ca = pemCerts(t, s.ca)[0]
				}
				if !cert.NotBefore.Equal(ca.NotBefore) {
					t.Errorf("%q: %s certificate's NotBefore %v, want the CA's, %v", c.flags, what, cert.NotBefore, ca.NotBefore)
				}
				if lo, hi := before.Add(year).Truncate(time.Second), after.Add(year); cert.NotAfter.Before(lo) || cert.NotAfter.After(hi) {
					t.Errorf("%q: %s certificate's NotAfter %v, want %v to %v", c.flags, what, cert.NotAfter, lo, hi)
				}
				continue
			}
			if lo, hi := before.Add(-time.Hour).Truncate(time.Second), after.Add(-time.Hour); cert.NotBefore.Before(lo) || cert.NotBefore.After(hi) {
				t.Errorf("%q: %s certificate's NotBefore %v, want an hour before the request, %v to %v", c.flags, what, cert.NotBefore, lo, hi)
			}
			if !cert.NotAfter.Equal(cert.NotBefore.Add(year)) {
				t.Errorf("%q: %s certificate valid %v to %v, want 365 days", c.flags, what, cert.NotBefore, cert.NotAfter)
			}
		}
	}
}

// TestCAChain: with -ca-chain, each CA is an intermediate of a root, as a
// k3s cluster with a custom CA (k3s contrib/util/generate-custom-ca-certs.sh):
// /cacerts is the CA then the root; the hash the server logs is the one
// a K10 token pins, k3s's pkg/clientaccess/token.go hashCA of /cacerts
// (the root's);
// a client that trusts the root alone connects; a kubelet serving
// certificate leads to a root of its own, never to the pinned one; a
// restart on the same -data-dir serves the same chain.
func TestCAChain(t *testing.T) {
	dir := t.TempDir()
	tf := filepath.Join(dir, "token")
	if err := os.WriteFile(tf, []byte("join-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	args := []string{"-addr", "127.0.0.1:0", "-logn", "4", "-ca-file", caFile, "-data-dir", dir, "-token-file", tf, "-store", "dir"}
	s := start(t, caFile, func(ctx context.Context, out io.Writer) error { return run(ctx, append(args, "-ca-chain"), out, out) }).withCAs(t, dir)
	s.token = "join-secret"

	// hashCA takes for roots the bundle's later certificates without an
	// authority key ID (or with their own), and hashes the DER of the
	// root the first certificate verifies to.
	_, cacerts := s.get(t, "/cacerts", "", "", "")
	bundle := pemCerts(t, cacerts)
	if len(bundle) != 2 || !bundle[0].IsCA || !bytes.Equal(bundle[0].AuthorityKeyId, bundle[1].SubjectKeyId) ||
		len(bundle[1].AuthorityKeyId) != 0 || bundle[1].CheckSignatureFrom(bundle[1]) != nil {
		t.Fatalf("/cacerts is not a CA then its self-signed root:\n%s", cacerts)
	}
	root := bundle[1]
	roots := x509.NewCertPool()
	roots.AddCert(root)
	if _, err := bundle[0].Verify(x509.VerifyOptions{Roots: roots}); err != nil {
		t.Fatalf("/cacerts' CA does not verify to its root: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "tls", "root-ca.crt")); err != nil || !bytes.Equal(pemCerts(t, b)[0].Raw, root.Raw) {
		t.Errorf("tls/root-ca.crt is not the root: %v", err)
	}
	if want := sha256.Sum256(root.Raw); loggedCAHash(t, s) != hex.EncodeToString(want[:]) {
		t.Errorf("logged ca-hash %s, want the root's, %x", loggedCAHash(t, s), want)
	}

	// Trust the root alone: the server's chain leads to it, and so do
	// the client certificates it issues; a kubelet serving certificate
	// leads to the kubelet CA's own root.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer tr.CloseIdleConnections()
	s.client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	n := nodes(2)[1]
	key, csr := newCSR(t, n.name)
	resp, body := s.send(t, http.MethodPost, "/v1-k3s/serving-kubelet.crt", n.name, n.password, n.ip, csr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("serving-kubelet.crt trusting the root alone: %d %s", resp.StatusCode, body)
	}
	issued := pemCerts(t, body)
	if len(issued) != 3 || !issued[1].Equal(pemCerts(t, s.kubeletCA)[0]) || issued[2].Equal(root) || issued[2].CheckSignatureFrom(issued[2]) != nil {
		t.Fatalf("answer is not the certificate, the kubelet CA, a self-signed root other than the pinned one:\n%s", body)
	}
	inter, kubeletRoot := x509.NewCertPool(), x509.NewCertPool()
	inter.AddCert(issued[1])
	kubeletRoot.AddCert(issued[2])
	serverAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if _, err := issued[0].Verify(x509.VerifyOptions{Roots: kubeletRoot, Intermediates: inter, KeyUsages: serverAuth}); err != nil || !key.PublicKey.Equal(issued[0].PublicKey) {
		t.Errorf("the serving certificate does not lead to the kubelet CA's root, or is not for the key: %v", err)
	}
	if _, err := issued[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: serverAuth}); err == nil {
		t.Errorf("the serving certificate leads to the root agents pin")
	}
	_, csr = newCSR(t, "system:node:"+n.name)
	resp, body = s.send(t, http.MethodPost, "/v1-k3s/client-kubelet.crt", n.name, n.password, n.ip, csr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("client-kubelet.crt: %d %s", resp.StatusCode, body)
	}
	if issued := pemCerts(t, body); len(issued) != 3 || !issued[2].Equal(root) {
		t.Errorf("the client certificate does not come with the client CA and the root:\n%s", body)
	}

	// Restarted on the same -data-dir, without -ca-chain: the same chain.
	caFile2 := filepath.Join(t.TempDir(), "ca.crt")
	args2 := []string{"-addr", "127.0.0.1:0", "-logn", "4", "-ca-file", caFile2, "-data-dir", dir, "-store", "dir"}
	s2 := start(t, caFile2, func(ctx context.Context, out io.Writer) error { return run(ctx, args2, out, out) })
	if _, again := s2.get(t, "/cacerts", "", "", ""); !bytes.Equal(again, cacerts) || loggedCAHash(t, s2) != loggedCAHash(t, s) {
		t.Errorf("after a restart /cacerts or its hash differs")
	}
}

// TestCAHashOneCertificate: without -ca-chain, the hash the server logs is
// that of /cacerts' bytes, what `sha256sum` of -ca-file prints (k3s
// pkg/clientaccess/token.go hashCA of a bundle of one certificate).
func TestCAHashOneCertificate(t *testing.T) {
	s := startWithToken(t, "join-secret\n", "join-secret")
	_, cacerts := s.get(t, "/cacerts", "", "", "")
	sum := sha256.Sum256(cacerts)
	if got := loggedCAHash(t, s); got != hex.EncodeToString(sum[:]) {
		t.Errorf("logged ca-hash %s, want sha256 of /cacerts %x", got, sum)
	}
}

// loggedCAHash returns the ca-hash of s's "server: ready" log line.
func loggedCAHash(t *testing.T, s *server) string {
	t.Helper()
	m := regexp.MustCompile(`msg="server: ready".* ca-hash=([0-9a-f]{64})`).FindStringSubmatch(s.out.String())
	if m == nil {
		t.Fatalf("no ca-hash in the log:\n%s", s.out)
	}
	return m[1]
}

// pemCerts parses every certificate in b.
func pemCerts(t *testing.T, b []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for _, block := range pemBlocks(b) {
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		t.Fatalf("no certificate in %q", b)
	}
	return certs
}

// TestNodeCannotPoseAsServer: with -ca-chain, a node gets a kubelet
// serving certificate for a name the agent dials (this machine's host
// name, or an address of one of its interfaces) and serves it, with the
// kubelet CA bundle it came with, as an impostor of the server, which
// answers /cacerts with the server's genuine bundle. An agent holding the
// token that pins the server's root, on its first join and with the
// server CA on disk, refuses the impostor's certificate at every
// handshake and never sends it the join token or a node password.
func TestNodeCannotPoseAsServer(t *testing.T) {
	host, nodeName, nodeIP, listen := impostorHost(t)
	dir := t.TempDir()
	tf := filepath.Join(dir, "token")
	if err := os.WriteFile(tf, []byte("join-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	args := []string{"-addr", "127.0.0.1:0", "-logn", "4", "-ca-file", caFile, "-data-dir", dir, "-token-file", tf, "-ca-chain"}
	s := start(t, caFile, func(ctx context.Context, out io.Writer) error { return run(ctx, args, out, out) })
	s.token = "join-secret"
	token := "K10" + loggedCAHash(t, s) + "::node:join-secret"

	key, csr := newCSR(t, nodeName)
	resp, body := s.send(t, http.MethodPost, "/v1-k3s/serving-kubelet.crt", nodeName, "impostor-node-password", nodeIP, csr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the node's serving certificate: %d %s", resp.StatusCode, body)
	}
	var cert tls.Certificate
	for _, c := range pemCerts(t, body) {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	cert.PrivateKey = key

	for _, onDisk := range []bool{false, true} {
		t.Run(fmt.Sprintf("server CA on disk=%v", onDisk), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var hellos atomic.Int32
			var leaked atomic.Value // string: what the impostor was sent
			mux := http.NewServeMux()
			mux.HandleFunc("GET /cacerts", func(w http.ResponseWriter, _ *http.Request) { w.Write(s.ca) })
			mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "" || r.Header.Get("K3s-Node-Password") != "" {
					leaked.Store(r.Method + " " + r.URL.Path + " with the token or a node password")
					cancel()
				}
				http.NotFound(w, r)
			})
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				t.Fatal(err)
			}
			impostor := &http.Server{Handler: mux, ErrorLog: log.New(io.Discard, "", 0), TLSConfig: &tls.Config{
				Certificates: []tls.Certificate{cert},
				GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
					if hellos.Add(1) >= 4 {
						cancel()
					}
					return nil, nil
				},
			}}
			go impostor.ServeTLS(ln, "", "")
			defer impostor.Close()

			_, port, _ := net.SplitHostPort(ln.Addr().String())
			dataDir := t.TempDir()
			if onDisk {
				if err := os.MkdirAll(filepath.Join(dataDir, "agent"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dataDir, "agent", "server-ca.crt"), s.ca, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := agent.New(&agent.Options{
				Server: "https://" + net.JoinHostPort(host, port), Token: token,
				NodeName: "worker-9", NodeIP: "192.0.2.9", NodePassword: "worker-9-password", DataDir: dataDir,
				Backoff: agent.Backoff{Base: time.Millisecond, Cap: 10 * time.Millisecond}, RecoveryDelay: time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Get(ctx)
			if l, _ := leaked.Load().(string); l != "" {
				t.Fatalf("the agent sent the impostor %s", l)
			}
			if err == nil || hellos.Load() < 4 {
				t.Fatalf("Get = %v after %d handshakes with the impostor; want an error after 4", err, hellos.Load())
			}
		})
	}
}

// impostorHost returns what an agent can dial to reach this machine and
// a node can have a serving certificate for: this machine's host name
// when it resolves to an address here (then nodeName is the host name),
// else an address of an interface other than loopback (then nodeIP is
// that address). listen is where an impostor listens for it.
func impostorHost(t *testing.T) (host, nodeName, nodeIP, listen string) {
	t.Helper()
	if name, err := os.Hostname(); err == nil && regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`).MatchString(name) {
		if addrs, err := net.LookupHost(name); err == nil {
			for _, a := range addrs {
				if ln, err := net.Listen("tcp", net.JoinHostPort(a, "0")); err == nil {
					ln.Close()
					return name, name, "", net.JoinHostPort(a, "0")
				}
			}
		}
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() && n.IP.To4() != nil {
			return n.IP.String(), "impostor", n.IP.String(), net.JoinHostPort(n.IP.String(), "0")
		}
	}
	t.Skip("no host name that resolves here and no address but loopback: nothing a node's certificate can name that an agent can dial")
	return
}

// TestKubeletCAUnderServerRootRefused: CAs on disk whose kubelet CA hangs
// from the root of the server CA (as -ca-chain made them before the
// kubelet CA had a root of its own) are refused at start, with one line
// and exit 1: a node's serving certificate would pass for a server.
func TestKubeletCAUnderServerRootRefused(t *testing.T) {
	dataDir := t.TempDir()
	o := caOptions{now: time.Now, notBefore: notBeforeRecent, chain: true}
	root, err := newAuthority("root", nil, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(dataDir, "tls")
	var files []atomicfile.File
	for _, name := range caNames {
		ca, err := newAuthority(name, root, o)
		if err != nil {
			t.Fatal(err)
		}
		f, err := ca.files(name)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f...)
	}
	if err := atomicfile.CreateDir(dir, files); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCommand(t, "-addr", "127.0.0.1:0", "-logn", "4", "-data-dir", dataDir)
	want := "server: the kubelet CA in " + dir + " chains to the server CA agents trust"
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit 1 and one line %q...", code, stderr, want)
	}
}
