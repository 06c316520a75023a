package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodepass/nodepass/kube"
	"github.com/nodepass/nodepass/kube/kubefake"
)

// output collects what the server writes and reports its address once it
// listens.
type output struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan string
	once  sync.Once
}

func newOutput() *output { return &output{ready: make(chan string, 1)} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i := bytes.Index(p, []byte("listening on https://")); i >= 0 {
		addr := strings.TrimSpace(string(p[i+len("listening on https://"):]))
		o.once.Do(func() { o.ready <- addr })
	}
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// server is a running example server.
type server struct {
	url    string
	client *http.Client
	ca     []byte // the server CA: -ca-file, /cacerts
	// clientCA and kubeletCA sign its client and kubelet serving
	// certificates; read from -data-dir by withCAs.
	clientCA, kubeletCA []byte
	out                 *output
	token               string // if not "", every request carries basic auth <tokenUser>:<token>
	tokenUser           string // "" means node
}

// withCAs reads s's client and kubelet CAs from its -data-dir, and checks
// that the three are apart.
func (s *server) withCAs(t *testing.T, dataDir string) *server {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dataDir, "tls", name+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if server := read("server-ca"); !bytes.Equal(server, s.ca) {
		t.Fatal("-data-dir's server CA is not -ca-file's")
	}
	s.clientCA, s.kubeletCA = read("client-ca"), read("kubelet-ca")
	if bytes.Equal(s.clientCA, s.ca) || bytes.Equal(s.kubeletCA, s.ca) || bytes.Equal(s.clientCA, s.kubeletCA) {
		t.Fatal("two of the CAs are one")
	}
	return s
}

// start runs serveFn (run or serve) in the background until the test ends
// and returns once it listens. Its output is logged if the test fails.
func start(t *testing.T, caFile string, serveFn func(ctx context.Context, out io.Writer) error) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := newOutput()
	done := make(chan error, 1)
	go func() { done <- serveFn(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server returned %v", err)
		}
		if t.Failed() {
			t.Logf("server output:\n%s", out)
		}
	})
	var addr string
	select {
	case addr = <-out.ready:
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("server stopped before listening: %v\n%s", err, out)
	case <-time.After(30 * time.Second):
		t.Fatalf("server not listening after 30s:\n%s", out)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return &server{url: "https://" + addr, client: trusting(t, caFile), ca: ca, out: out}
}

// trusting returns an HTTPS client that trusts the CA bundle in caFile.
func trusting(t *testing.T, caFile string) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s", caFile)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// get sends a request with the k3s node headers; empty values are left out.
func (s *server) get(t *testing.T, path, node, password, ip string) (*http.Response, []byte) {
	t.Helper()
	return s.send(t, http.MethodGet, path, node, password, ip, nil)
}

// send is get with any method and body.
func (s *server) send(t *testing.T, method, path, node, password, ip string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for h, v := range map[string]string{"K3s-Node-Name": node, "K3s-Node-Password": password, "K3s-Node-Ip": ip} {
		if v != "" {
			req.Header.Set(h, v)
		}
	}
	if s.token != "" {
		user := s.tokenUser
		if user == "" {
			user = "node"
		}
		req.SetBasicAuth(user, s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, answer
}

// join asks for node's serving certificate as an agent would, honouring
// Retry-After on 503 a few times, and returns the final status and body.
func (s *server) join(t *testing.T, node, password, ip string) (int, []byte) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		resp, body := s.get(t, "/v1-k3s/serving-kubelet.crt", node, password, ip)
		if resp.StatusCode != http.StatusServiceUnavailable || attempt == 5 {
			return resp.StatusCode, body
		}
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		time.Sleep(time.Duration(max(secs, 1)) * time.Second)
	}
}

// checkKubeletCert checks an answer to a certificate request: the leaf,
// then the CA, then the leaf's private key (a GET: csrKey nil); or, to a
// POST with a CSR, the leaf for csrKey and the CA, and no key.
func checkKubeletCert(t *testing.T, body, ca []byte, cn string, ips []net.IP, usage x509.ExtKeyUsage, csrKey *ecdsa.PublicKey) {
	t.Helper()
	blocks := pemBlocks(body)
	switch {
	case csrKey == nil && (len(blocks) != 3 || blocks[2].Type != "EC PRIVATE KEY"):
		t.Fatalf("%s: answer is not certificate, CA, key:\n%s", cn, body)
	case csrKey != nil && len(blocks) != 2:
		t.Fatalf("%s: answer is not certificate, CA:\n%s", cn, body)
	case blocks[0].Type != "CERTIFICATE" || blocks[1].Type != "CERTIFICATE":
		t.Fatalf("%s: answer does not start with certificate, CA:\n%s", cn, body)
	}
	if !bytes.Equal(pem.EncodeToMemory(blocks[1]), ca) {
		t.Errorf("%s: second certificate is not the CA", cn)
	}
	leaf, err := x509.ParseCertificate(blocks[0].Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("%s: certificate does not verify against the CA: %v", cn, err)
	}
	if leaf.Subject.CommonName != cn {
		t.Errorf("CN = %q, want %q", leaf.Subject.CommonName, cn)
	}
	if len(leaf.IPAddresses) != len(ips) {
		t.Errorf("%s: IP SANs %v, want %v", cn, leaf.IPAddresses, ips)
	}
	for i := range min(len(ips), len(leaf.IPAddresses)) {
		if !leaf.IPAddresses[i].Equal(ips[i]) {
			t.Errorf("%s: IP SANs %v, want %v", cn, leaf.IPAddresses, ips)
		}
	}
	if csrKey == nil {
		key, err := x509.ParseECPrivateKey(blocks[2].Bytes)
		if err != nil {
			t.Fatal(err)
		}
		csrKey = &key.PublicKey
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(csrKey) {
		t.Errorf("%s: the certificate is not for the key", cn)
	}
}

// pemBlocks returns the PEM blocks of b.
func pemBlocks(b []byte) []*pem.Block {
	var blocks []*pem.Block
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return blocks
		}
		blocks = append(blocks, block)
	}
}

// metrics scrapes /metrics and returns the value of each unlabelled sample.
func (s *server) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	resp, body := s.get(t, "/metrics", "", "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	m := make(map[string]float64)
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if f, err := strconv.ParseFloat(value, 64); err == nil {
			m[name] = f
		}
	}
	return m
}

type node struct{ name, password, ip string }

func nodes(n int) []node {
	out := make([]node, n)
	for i := range out {
		// Some names in upper case: the server lower-cases them, as k3s.
		name := fmt.Sprintf("worker-%02d", i)
		if i%5 == 0 {
			name = strings.ToUpper(name)
		}
		out[i] = node{name, fmt.Sprintf("%032x", 0xc0ffee+i), fmt.Sprintf("192.0.2.%d", i+1)}
	}
	return out
}

// joinAll joins every node at once and checks each certificate.
func joinAll(t *testing.T, s *server, ns []node) {
	t.Helper()
	var wg sync.WaitGroup
	for _, n := range ns {
		wg.Go(func() {
			status, body := s.join(t, n.name, n.password, n.ip)
			if status != http.StatusOK {
				t.Errorf("%s: %d %s", n.name, status, body)
				return
			}
			checkKubeletCert(t, body, s.kubeletCA, strings.ToLower(n.name), []net.IP{net.ParseIP(n.ip)}, x509.ExtKeyUsageServerAuth, nil)
		})
	}
	wg.Wait()
}

// TestJoin50Nodes starts the server as main does, on loopback with real
// HTTPS and the memory store, and joins 50 nodes at once.
func TestJoin50Nodes(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	args := []string{"-addr", "127.0.0.1:0", "-logn", "4", "-ca-file", caFile, "-data-dir", dir}
	s := start(t, caFile, func(ctx context.Context, out io.Writer) error { return run(ctx, args, out, out) }).withCAs(t, dir)

	ns := nodes(50)
	joinAll(t, s, ns)
	joinAll(t, s, ns) // rejoin: answered from the verified-tuple cache

	if status, _ := s.join(t, ns[1].name, "wrong-password", ns[1].ip); status != http.StatusForbidden {
		t.Errorf("wrong password: %d, want 403", status)
	}
	if resp, _ := s.get(t, "/v1-k3s/serving-kubelet.crt", "worker-01", "", ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("missing password: %d, want 400", resp.StatusCode)
	}
	if resp, _ := s.get(t, "/v1-k3s/serving-kubelet.crt", ns[1].name, ns[1].password, "not-an-ip"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad K3s-Node-Ip: %d, want 400", resp.StatusCode)
	}
	resp, body := s.get(t, "/v1-k3s/client-kubelet.crt", ns[2].name, ns[2].password, ns[2].ip)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("client-kubelet.crt: %d %s", resp.StatusCode, body)
	}
	checkKubeletCert(t, body, s.clientCA, "system:node:worker-02", nil, x509.ExtKeyUsageClientAuth, nil)
	if resp, body := s.get(t, "/cacerts", "", "", ""); resp.StatusCode != http.StatusOK || !bytes.Equal(body, s.ca) {
		t.Errorf("/cacerts: %d, and not the CA file", resp.StatusCode)
	}

	m := s.metrics(t)
	if m["nodepass_enrollments_total"] != 50 {
		t.Errorf("nodepass_enrollments_total = %g, want 50", m["nodepass_enrollments_total"])
	}
	if m["nodepass_mismatches_total"] != 1 {
		t.Errorf("nodepass_mismatches_total = %g, want 1", m["nodepass_mismatches_total"])
	}
	// Each rejoin (and the client certificate) is a cache hit.
	if m["nodepass_cache_hits_total"] < 51 {
		t.Errorf("nodepass_cache_hits_total = %g, want at least 51", m["nodepass_cache_hits_total"])
	}
	// One scrypt per enrollment; the wrong password may cost one more.
	if runs := m["nodepass_scrypt_runs_total"]; runs < 50 || runs > 51 || runs != m["nodepass_scrypt_seconds_count"] || runs != m["nodepass_queue_wait_seconds_count"] {
		t.Errorf("scrypt runs %g, histogram counts %g and %g: want equal, 50 or 51",
			runs, m["nodepass_scrypt_seconds_count"], m["nodepass_queue_wait_seconds_count"])
	}
	if _, ok := m["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
	t.Logf("scrypt runs %g, cache hits %g, shared %g, shed %g",
		m["nodepass_scrypt_runs_total"], m["nodepass_cache_hits_total"], m["nodepass_shared_total"], m["nodepass_shed_total"])
}

// TestKubeStore serves over kube.Store on a fake clientset and checks that
// the joins leave secrets as k3s would.
func TestKubeStore(t *testing.T) {
	client, err := kubefake.New()
	if err != nil {
		t.Fatal(err)
	}
	store, err := kube.New(client, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() }) // after the server has stopped
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	cfg, err := parseFlags([]string{"-addr", "127.0.0.1:0", "-logn", "4", "-ca-file", caFile, "-store", "kube", "-data-dir", dir}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, caFile, func(ctx context.Context, out io.Writer) error {
		return serve(ctx, cfg, store, newLogger(out, true), out)
	}).withCAs(t, dir)

	ns := nodes(10)
	joinAll(t, s, ns)
	joinAll(t, s, ns)
	for _, n := range ns {
		name := strings.ToLower(n.name) + ".node-password.k3s"
		sec, err := client.Secrets("kube-system").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("no secret for %s: %v", n.name, err)
			continue
		}
		if sec.Type != corev1.SecretType("k3s.cattle.io/node-password") || sec.Immutable == nil || !*sec.Immutable || !strings.HasPrefix(string(sec.Data["hash"]), "$1:") {
			t.Errorf("secret %s: type %q, immutable %v, hash %q", name, sec.Type, sec.Immutable, sec.Data["hash"])
		}
	}
	if m := s.metrics(t); m["nodepass_enrollments_total"] != 10 || m["nodepass_store_errors_total"] != 0 {
		t.Errorf("enrollments %g, store errors %g; want 10 and 0", m["nodepass_enrollments_total"], m["nodepass_store_errors_total"])
	}
}
