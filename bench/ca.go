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
	"fmt"
	"math/big"
	"net"
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
	// legacy is the key k3s sends older agents (a GET, no CSR) with
	// their kubelet certificates, PEM-encoded: one key for every node.
	legacy    crypto.PublicKey
	legacyPEM []byte
}

// newBenchCA makes a CA and, signed by it, the servers' certificate for
// 127.0.0.1 (TLS 1.2 or later, HTTP/2 or HTTP/1.1, as the k3s supervisor
// offers).
func newBenchCA() (*benchCA, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("bench: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nodepass bench CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("bench: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("bench: CA certificate: %w", err)
	}
	ca := &benchCA{cert: cert, key: caKey, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	ca.serial.Store(1)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("bench: server key: %w", err)
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

	legacy, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("bench: legacy kubelet key: %w", err)
	}
	legacyDER, err := x509.MarshalECPrivateKey(legacy)
	if err != nil {
		return nil, fmt.Errorf("bench: legacy kubelet key: %w", err)
	}
	ca.legacy, ca.legacyPEM = legacy.Public(), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: legacyDER})
	return ca, nil
}

// keyPEM returns the CA's key, PEM-encoded.
func (ca *benchCA) keyPEM() []byte {
	der, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return nil // a P-256 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// sign signs tmpl (its names and usage) for pub with the CA's key, valid
// for a day, and returns the certificate's DER.
func (ca *benchCA) sign(tmpl *x509.Certificate, pub crypto.PublicKey) ([]byte, error) {
	now := time.Now()
	tmpl.SerialNumber = big.NewInt(ca.serial.Add(1))
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
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
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: node},
		DNSNames:    []string{node, "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		tmpl = &x509.Certificate{
			Subject:     pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
	}
	der, err := ca.sign(tmpl, pub)
	if err != nil {
		return nil, err
	}
	out := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.pem...)
	if !post {
		out = append(out, ca.legacyPEM...)
	}
	return out, nil
}

// The common names of the kube-proxy's and the k3s controller's client
// certificates (k3s: pkg/server/handlers ClientKubeProxyCert,
// ClientControllerCert).
const (
	proxyCN      = "system:kube-proxy"
	controllerCN = "system:k3s-controller"
)

// componentCert answers a request for the client certificate of a
// component (the kube-proxy, the k3s controller): body is its
// certificate signing request (DER), which must be for cn; the answer is
// a client certificate for its key, then the CA.
func (ca *benchCA) componentCert(cn string, body []byte) ([]byte, error) {
	csr, err := x509.ParseCertificateRequest(body)
	if err != nil {
		return nil, fmt.Errorf("not a certificate request: %w", err)
	}
	if csr.Subject.CommonName != cn {
		return nil, fmt.Errorf("certificate request for %q, want %q", csr.Subject.CommonName, cn)
	}
	der, err := ca.sign(&x509.Certificate{Subject: pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, csr.PublicKey)
	if err != nil {
		return nil, err
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.pem...), nil
}

// agentKey is one agent's key and its certificate signing requests
// (DER), each made once: the serving certificate's, for the node's name,
// the kubelet client certificate's, for system:node:<name>, and the
// kube-proxy's and the controller's.
type agentKey struct {
	key                                *ecdsa.PrivateKey
	name                               string
	serving, client, proxy, controller []byte
}

// newAgentKey makes an agent's key and its requests for name.
func newAgentKey(name string) (*agentKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("bench: agent key: %w", err)
	}
	k := &agentKey{key: key}
	return k, k.rename(name)
}

// rename makes k's requests for name, if they are for another; none for
// "" (an attacker's, until it picks a name).
func (k *agentKey) rename(name string) error {
	if name == "" {
		return nil
	}
	for _, s := range []step{stepServingCert, stepClientCert, stepProxyCert, stepControllerCert} {
		if _, err := k.request(name, s); err != nil {
			return err
		}
	}
	return nil
}

// request returns k's certificate request of step s (one of the four
// POSTs) for name. The node's two are made the first time they are
// asked for name, so that an attacker guessing under ever new names
// signs only the request it sends.
func (k *agentKey) request(name string, s step) ([]byte, error) {
	if k.name != name {
		k.name, k.serving, k.client = name, nil, nil
	}
	var csr *[]byte
	var subject pkix.Name
	switch s {
	case stepServingCert:
		csr, subject = &k.serving, pkix.Name{CommonName: name}
	case stepClientCert:
		csr, subject = &k.client, pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}
	case stepProxyCert:
		csr, subject = &k.proxy, pkix.Name{CommonName: proxyCN}
	case stepControllerCert:
		csr, subject = &k.controller, pkix.Name{CommonName: controllerCN}
	default:
		return nil, fmt.Errorf("bench: no certificate request for step %d", s)
	}
	if *csr == nil {
		b, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, k.key)
		if err != nil {
			return nil, fmt.Errorf("bench: certificate request: %w", err)
		}
		*csr = b
	}
	return *csr, nil
}
