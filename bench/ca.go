package bench

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// benchCA is the certificate authority of a run's HTTPS servers: it signs
// their TLS certificate and the kubelet certificates the agents ask for,
// as a k3s server's CA does. It is safe for concurrent use.
type benchCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    []byte // cert, PEM-encoded: what GET /cacerts answers
	tls    *tls.Config
	serial atomic.Int64
	// caNotBefore: every certificate's NotBefore is the CA's own
	// (Scenario.CANotBefore).
	caNotBefore bool
	// legacy is the key k3s sends older agents (a GET, no CSR) with
	// their kubelet certificates, PEM-encoded: one key for every node.
	legacy    crypto.PublicKey
	legacyPEM []byte
}

// The validity of what k3s's CAs sign (rancher/dynamiclistener
// cert/cert.go NewSelfSignedCACert and NewSignedCert): a CA is valid for
// ten years from its creation, a certificate for a year from its issue.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	certLifetime = 365 * 24 * time.Hour
)

// newBenchCA makes a CA created age ago (Scenario.CAAge) and, signed by
// it, the servers' certificate for 127.0.0.1 (TLS 1.2 or later, HTTP/2 or
// HTTP/1.1, as the k3s supervisor offers). With caNotBefore it signs as
// older k3s releases did (Scenario.CANotBefore).
func newBenchCA(age time.Duration, caNotBefore bool) (*benchCA, error) {
	var keys [3]*ecdsa.PrivateKey // the CA's, the servers', and the legacy kubelet key
	for i := range keys {
		var err error
		if keys[i], err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, fmt.Errorf("bench: CA keys: %w", err)
		}
	}
	caKey, key, legacy := keys[0], keys[1], keys[2]
	created := time.Now().Add(-age)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("nodepass-bench-ca@%d", created.Unix())},
		NotBefore:             created,
		NotAfter:              created.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("bench: CA certificate: %w", err)
	}
	ca, err := parseCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), caKey, caNotBefore)
	if err != nil {
		return nil, err
	}
	serverDER, err := ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, key.Public())
	if err != nil {
		return nil, err
	}
	ca.tls = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{serverDER}, PrivateKey: key}},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
	}
	ca.legacy, ca.legacyPEM = legacy.Public(), encodeKey(legacy)
	return ca, nil
}

// parseCA returns the CA whose certificate certPEM is and whose key is
// key, signing as caNotBefore says: the servers' CA as it made itself,
// or, from Endpoint's PEM, on the agents' side of a split run, to sign
// the certificates an earlier join left them.
func parseCA(certPEM []byte, key *ecdsa.PrivateKey, caNotBefore bool) (*benchCA, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || key == nil {
		return nil, errors.New("bench: no CA certificate and key")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("bench: CA certificate: %w", err)
	}
	ca := &benchCA{cert: cert, key: key, pem: certPEM, caNotBefore: caNotBefore}
	ca.serial.Store(cert.SerialNumber.Int64())
	return ca, nil
}

func encodeKey(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil // a P-256 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func (ca *benchCA) keyPEM() []byte { return encodeKey(ca.key) }

// sign signs tmpl (its names and usage) for pub with the CA's key and
// returns the certificate's DER. It is valid as k3s makes them
// (rancher/dynamiclistener cert/cert.go NewSignedCert): NotAfter a year
// from now; NotBefore max(now - 1 h, the CA's NotBefore), as
// dynamiclistener's cert/validity.go CalculateNotBefore has it, or, with
// caNotBefore, the CA's NotBefore, as NewSignedCert had it before (RKE2
// v1.25 in the incident's log).
func (ca *benchCA) sign(tmpl *x509.Certificate, pub crypto.PublicKey) ([]byte, error) {
	now := time.Now()
	tmpl.SerialNumber = big.NewInt(ca.serial.Add(1))
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(certLifetime)
	if ca.caNotBefore || tmpl.NotBefore.Before(ca.cert.NotBefore) {
		tmpl.NotBefore = ca.cert.NotBefore
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("bench: signing a certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

// kubeletCert answers a verified node's request for a kubelet certificate
// (serving or client), as a k3s server does: for a POST, body is the
// agent's certificate signing request (DER) and the answer is a
// certificate for its public key, then the CA; for a GET (older agents),
// a certificate for the legacy key, the CA and that key. The CSR must name
// node (common name node or system:node:<node>); k3s parses it and signs
// its key without checking its signature, and so does this.
func (ca *benchCA) kubeletCert(node string, client bool, post bool, body []byte) ([]byte, error) {
	pub := ca.legacy
	if post {
		csr, err := x509.ParseCertificateRequest(body)
		if err != nil {
			return nil, fmt.Errorf("not a certificate request: %w", err)
		}
		if cn := strings.ToLower(csr.Subject.CommonName); cn != node && cn != "system:node:"+node {
			return nil, fmt.Errorf("certificate request for %q, want %q", csr.Subject.CommonName, node)
		}
		pub = csr.PublicKey
	}
	s := stepServingCert
	if client {
		s = stepClientCert
	}
	out, err := ca.issue(certTemplate(s, node), pub)
	if err == nil && !post {
		out = append(out, ca.legacyPEM...)
	}
	return out, err
}

// issue signs tmpl for pub and returns the certificate, then the CA, in
// PEM: what a k3s server answers a certificate request with.
func (ca *benchCA) issue(tmpl *x509.Certificate, pub crypto.PublicKey) ([]byte, error) {
	der, err := ca.sign(tmpl, pub)
	if err != nil {
		return nil, err
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.pem...), nil
}

// certTemplate returns the names and usage of the certificate that step
// s (one of the four POSTs) asks for node (k3s
// pkg/server/handlers/handlers.go): the kubelet's serving certificate for
// the node's name and IP, its client certificate for system:node:<node>,
// the kube-proxy's and the controller's client certificates.
func certTemplate(s step, node string) *x509.Certificate {
	client := func(subject pkix.Name) *x509.Certificate {
		return &x509.Certificate{Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	}
	switch s {
	case stepServingCert:
		return &x509.Certificate{Subject: pkix.Name{CommonName: node}, DNSNames: []string{node, "localhost"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	case stepClientCert:
		return client(pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}})
	case stepProxyCert:
		return client(pkix.Name{CommonName: "system:kube-proxy"}) // k3s: ClientKubeProxyCert
	}
	return client(pkix.Name{CommonName: "system:k3s-controller"}) // ClientControllerCert
}

// componentCert answers a request for the client certificate of a
// component (step s: the kube-proxy's, the k3s controller's): body is its
// certificate signing request (DER), which must be for that component;
// the answer is a client certificate for its key, then the CA.
func (ca *benchCA) componentCert(s step, body []byte) ([]byte, error) {
	csr, err := x509.ParseCertificateRequest(body)
	if err != nil {
		return nil, fmt.Errorf("not a certificate request: %w", err)
	}
	tmpl := certTemplate(s, "")
	if csr.Subject.CommonName != tmpl.Subject.CommonName {
		return nil, fmt.Errorf("certificate request for %q, want %q", csr.Subject.CommonName, tmpl.Subject.CommonName)
	}
	return ca.issue(tmpl, csr.PublicKey)
}

// earlierJoin writes to dir what a k3s agent's join leaves there: both CA
// files, and the four certificates for node with their keys, issued now
// as the servers issue them (see sign).
func (ca *benchCA) earlierJoin(dir, node string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	files := map[string][]byte{"client-ca.crt": ca.pem, "server-ca.crt": ca.pem}
	for name, s := range map[string]step{"serving-kubelet": stepServingCert, "client-kubelet": stepClientCert,
		"client-kube-proxy": stepProxyCert, "client-k3s-controller": stepControllerCert} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if files[name+".crt"], err = ca.issue(certTemplate(s, node), key.Public()); err != nil {
			return err
		}
		files[name+".key"] = encodeKey(key)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return nil
}

// agentKey is one agent's key and its certificate signing requests
// (DER) by step, each made once: the serving certificate's, for the
// node's name, the kubelet client certificate's, for system:node:<name>,
// and the kube-proxy's and the controller's.
type agentKey struct {
	key  *ecdsa.PrivateKey
	name string
	csrs map[step][]byte
}

// newAgentKey makes an agent's key and its requests for name; none for
// "" (an attacker's, until it picks a name).
func newAgentKey(name string) (*agentKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("bench: agent key: %w", err)
	}
	k := &agentKey{key: key, csrs: map[step][]byte{}}
	for s := stepServingCert; s <= stepControllerCert && name != ""; s++ {
		if _, err := k.request(name, s); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// request returns k's certificate request of step s (one of the four
// POSTs) for name. The node's two are made the first time they are
// asked for name, so that an attacker guessing under ever new names
// signs only the request it sends.
func (k *agentKey) request(name string, s step) ([]byte, error) {
	if s < stepServingCert {
		return nil, fmt.Errorf("bench: no certificate request for step %d", s)
	}
	if k.name != name {
		k.name = name
		delete(k.csrs, stepServingCert)
		delete(k.csrs, stepClientCert)
	}
	if k.csrs[s] == nil {
		b, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: certTemplate(s, name).Subject}, k.key)
		if err != nil {
			return nil, fmt.Errorf("bench: certificate request: %w", err)
		}
		k.csrs[s] = b
	}
	return k.csrs[s], nil
}
