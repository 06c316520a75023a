package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// newCSR makes a key and a certificate signing request for cn, DER, as a
// k3s agent sends it.
func newCSR(t *testing.T, cn string) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

// TestCertificateSigningRequests: current k3s agents POST a CSR to both
// kubelet certificate routes, over HTTPS; the server signs its key for the
// node (the names are the server's), refuses a CSR for another node or no
// CSR at all, and still answers older agents' GETs.
func TestCertificateSigningRequests(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	args := []string{"-addr", "127.0.0.1:0", "-logn", "4", "-ca-file", caFile, "-data-dir", dir}
	s := start(t, caFile, func(ctx context.Context, out io.Writer) error { return run(ctx, args, out, out) }).withCAs(t, dir)
	n := nodes(3)[1] // worker-01
	ip := []net.IP{net.ParseIP(n.ip)}
	const serving, client = "/v1-k3s/serving-kubelet.crt", "/v1-k3s/client-kubelet.crt"

	key, csr := newCSR(t, n.name)
	resp, body := s.send(t, http.MethodPost, serving, n.name, n.password, n.ip, csr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST serving-kubelet.crt: %d %s", resp.StatusCode, body)
	}
	checkKubeletCert(t, body, s.kubeletCA, n.name, ip, x509.ExtKeyUsageServerAuth, &key.PublicKey)

	key, csr = newCSR(t, "system:node:"+n.name)
	csrPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr})
	resp, body = s.send(t, http.MethodPost, client, n.name, n.password, n.ip, csrPEM)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST client-kubelet.crt (PEM): %d %s", resp.StatusCode, body)
	}
	checkKubeletCert(t, body, s.clientCA, "system:node:"+n.name, nil, x509.ExtKeyUsageClientAuth, &key.PublicKey)

	resp, body = s.get(t, serving, n.name, n.password, n.ip)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET serving-kubelet.crt: %d %s", resp.StatusCode, body)
	}
	checkKubeletCert(t, body, s.kubeletCA, n.name, ip, x509.ExtKeyUsageServerAuth, nil)

	_, other := newCSR(t, "worker-02")
	for _, c := range []struct {
		name       string
		body       []byte
		password   string
		wantStatus int
		wantText   string
	}{
		{"a CSR for another node", other, n.password, http.StatusBadRequest, `"worker-02"`},
		{"no CSR", nil, n.password, http.StatusBadRequest, "no certificate request in the body"},
		{"not a CSR", []byte("hello"), n.password, http.StatusBadRequest, "not a certificate request"},
		{"a certificate, not a CSR", s.ca, n.password, http.StatusBadRequest, "want CERTIFICATE REQUEST"},
		{"too large", make([]byte, maxCSRSize+1), n.password, http.StatusBadRequest, "larger than"},
		{"a wrong password", csr, "wrong-password", http.StatusForbidden, ""},
	} {
		resp, body := s.send(t, http.MethodPost, serving, n.name, c.password, n.ip, c.body)
		if resp.StatusCode != c.wantStatus || !strings.Contains(string(body), c.wantText) || strings.Contains(string(body), "CERTIFICATE-----") {
			t.Errorf("%s: %d %q, want %d and %q", c.name, resp.StatusCode, body, c.wantStatus, c.wantText)
		}
	}
	m := s.metrics(t)
	if m["nodepass_scrypt_runs_total"] != 1 || m["nodepass_enrollments_total"] != 1 {
		t.Errorf("scrypt runs %g, enrollments %g; want 1 and 1 (every later request a cache hit or a known-match refusal)",
			m["nodepass_scrypt_runs_total"], m["nodepass_enrollments_total"])
	}
}

// TestCSRAsK3sAgentMakesIt: k3s's agent POSTs a CSR with no subject to
// every certificate route (k3s pkg/agent/config/config.go getCSRBytes:
// x509.CreateCertificateRequest(cryptorand.Reader,
// &x509.CertificateRequest{}, key)); the server signs its key with the
// names it chooses.
func TestCSRAsK3sAgentMakesIt(t *testing.T) {
	s := startWithToken(t, "join-secret\n", "join-secret")
	n := nodes(2)[1]
	node := strings.ToLower(n.name)
	for _, c := range []struct {
		path, cn string
		ca       []byte
		ips      []net.IP
		usage    x509.ExtKeyUsage
	}{
		{"/v1-k3s/serving-kubelet.crt", node, s.kubeletCA, []net.IP{net.ParseIP(n.ip)}, x509.ExtKeyUsageServerAuth},
		{"/v1-k3s/client-kubelet.crt", "system:node:" + node, s.clientCA, nil, x509.ExtKeyUsageClientAuth},
		{"/v1-k3s/client-kube-proxy.crt", "system:kube-proxy", s.clientCA, nil, x509.ExtKeyUsageClientAuth},
		{"/v1-k3s/client-k3s-controller.crt", "system:k3s-controller", s.clientCA, nil, x509.ExtKeyUsageClientAuth},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := s.send(t, http.MethodPost, c.path, n.name, n.password, n.ip, csr)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s with k3s's CSR: %d %s", c.path, resp.StatusCode, body)
			continue
		}
		checkKubeletCert(t, body, c.ca, c.cn, c.ips, c.usage, &key.PublicKey)
	}
}
