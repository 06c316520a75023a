package main

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
	"time"
)

// leafValidity is how long the certificates the CA signs are valid.
const leafValidity = 365 * 24 * time.Hour

// authority is a certificate authority made at startup: it signs the
// server's own TLS certificate and the kubelet certificates nodes ask for.
// It is safe for concurrent use.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte // cert, PEM-encoded
	now  func() time.Time
}

func newAuthority(name string, now func() time.Time) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("server: CA key: %w", err)
	}
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             t.Add(-time.Hour),
		NotAfter:              t.Add(10 * leafValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("server: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("server: CA certificate: %w", err)
	}
	return &authority{
		cert: cert,
		key:  key,
		pem:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		now:  now,
	}, nil
}

// leaf is what the CA is asked to sign.
type leaf struct {
	commonName   string
	organization []string
	dnsNames     []string
	ips          []net.IP
	usage        x509.ExtKeyUsage
}

// issue makes a key and a certificate for l signed by the CA. It returns
// them PEM-encoded as a k3s server answers an older agent's kubelet
// certificate request (a GET): the certificate, then the CA's, then the
// private key.
func (a *authority) issue(l leaf) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("server: key: %w", err)
	}
	out, err := a.issueFor(l, key.Public())
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("server: key: %w", err)
	}
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...), nil
}

// issueFor makes a certificate for l and the public key pub (from the
// agent's certificate signing request) signed by the CA. It returns it
// PEM-encoded as a k3s server answers a current agent's request (a POST):
// the certificate, then the CA's; the agent keeps its private key.
func (a *authority) issueFor(l leaf, pub crypto.PublicKey) ([]byte, error) {
	certDER, err := a.sign(l, pub)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
	return append(out, a.pem...), nil
}

// tlsCertificate makes the server's own TLS certificate.
func (a *authority) tlsCertificate(l leaf) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("server: TLS key: %w", err)
	}
	der, err := a.sign(l, key.Public())
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key}, nil
}

func (a *authority) sign(l leaf, pub crypto.PublicKey) ([]byte, error) {
	t := a.now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.commonName, Organization: l.organization},
		DNSNames:     l.dnsNames,
		IPAddresses:  l.ips,
		NotBefore:    t.Add(-time.Minute),
		NotAfter:     t.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{l.usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, pub, a.key)
	if err != nil {
		return nil, fmt.Errorf("server: signing a certificate for %q: %w", l.commonName, err)
	}
	return der, nil
}

// serial returns a random 128-bit certificate serial number.
func serial() *big.Int {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	b[0] &= 0x7f // positive
	return new(big.Int).SetBytes(b)
}
