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
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// leafValidity is how long the certificates the CA signs are valid.
const leafValidity = 365 * 24 * time.Hour

// authority is a certificate authority (see authorities for the three
// the server keeps). It is safe for concurrent use.
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
	// csrNames are the common names a certificate request for it may
	// have (the certificate's names come from the server either way).
	csrNames []string
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

// authorities are the server's three CAs, as a k3s server keeps them
// apart: server signs the server's own TLS certificate and is what
// agents trust (/cacerts, server-ca.crt); client signs client
// certificates (the kubelet's, the kube-proxy's, the controller's) and
// is what the API server trusts of them (client-ca.crt); kubelet signs
// the kubelets' serving certificates only. Nobody trusts the kubelet CA
// to be the server, so a node that gets a serving certificate for any
// name or address cannot stand in for the server (upstream signs them
// with the server CA; see the README's security notes).
type authorities struct {
	server, client, kubelet *authority
}

// The CAs' names: their files in <data-dir>/tls, and their common names.
var caNames = [...]string{"server-ca", "client-ca", "kubelet-ca"}

func (a *authorities) each() []**authority { return []**authority{&a.server, &a.client, &a.kubelet} }

// newAuthorities makes the three CAs in memory or, with dataDir, reads
// them from dataDir/tls, making them there first if the directory does
// not exist yet. Several servers starting at once on one dataDir end up
// with the same CAs: each makes its own in a temporary directory and
// renames it to tls, which fails for all but the first; the others read
// the first's.
func newAuthorities(dataDir string, now func() time.Time) (*authorities, error) {
	fresh := func() (*authorities, error) {
		a := &authorities{}
		for i, p := range a.each() {
			ca, err := newAuthority(fmt.Sprintf("nodepass-example-%s@%d", caNames[i], now().Unix()), now)
			if err != nil {
				return nil, err
			}
			*p = ca
		}
		return a, nil
	}
	if dataDir == "" {
		return fresh()
	}
	dir := filepath.Join(dataDir, "tls")
	if a, err := loadAuthorities(dir, now); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return a, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("server: -data-dir: %w", err)
	}
	a, err := fresh()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(dataDir, ".tls-")
	if err != nil {
		return nil, fmt.Errorf("server: -data-dir: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after the rename; left only on failure
	for i, p := range a.each() {
		if err := (*p).save(filepath.Join(tmp, caNames[i])); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another server made them first (rename does not replace a
		// directory that is not empty): use its.
		if b, lerr := loadAuthorities(dir, now); lerr == nil {
			return b, nil
		}
		return nil, fmt.Errorf("server: -data-dir: %w", err)
	}
	return a, nil
}

// loadAuthorities reads the three CAs from dir.
func loadAuthorities(dir string, now func() time.Time) (*authorities, error) {
	a := &authorities{}
	for i, p := range a.each() {
		ca, err := loadAuthority(filepath.Join(dir, caNames[i]), now)
		if err != nil {
			return nil, err
		}
		*p = ca
	}
	return a, nil
}

// save writes a's certificate to base.crt and its key to base.key (mode
// 0600).
func (a *authority) save(base string) error {
	keyDER, err := x509.MarshalECPrivateKey(a.key)
	if err != nil {
		return fmt.Errorf("server: CA key: %w", err)
	}
	if err := os.WriteFile(base+".crt", a.pem, 0o644); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if err := os.WriteFile(base+".key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// loadAuthority reads a CA that save wrote at base.
func loadAuthority(base string, now func() time.Time) (*authority, error) {
	certPEM, err := os.ReadFile(base + ".crt")
	if err != nil {
		return nil, fmt.Errorf("server: CA: %w", err)
	}
	keyPEM, err := os.ReadFile(base + ".key")
	if err != nil {
		return nil, fmt.Errorf("server: CA: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || cb.Type != "CERTIFICATE" || kb == nil || kb.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("server: CA %s.crt/.key: not a PEM certificate and EC key", base)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("server: CA %s.crt: %w", base, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("server: CA %s.key: %w", base, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) || !cert.IsCA {
		return nil, fmt.Errorf("server: CA %s: the key is not the certificate's, or it is no CA", base)
	}
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(cb), now: now}, nil
}
