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

	"github.com/nodepass/nodepass/internal/atomicfile"
	"github.com/nodepass/nodepass/internal/k3stoken"
)

// Certificates are made as k3s makes them with rancher/dynamiclistener
// (cert/cert.go NewSelfSignedCACert and NewSignedCert, cert/validity.go
// CalculateNotBefore): a CA is valid for caValidity from an hour ago; a
// certificate it signs for leafValidity from its NotBefore, which
// notBeforeRule sets.
const (
	year         = 365 * 24 * time.Hour
	leafValidity = year
	caValidity   = 10 * year
	backdate     = time.Hour // CalculateNotBefore's allowance for clock skew
)

// notBeforeRule is how a CA sets the NotBefore of what it signs.
type notBeforeRule string

const (
	// notBeforeRecent is dynamiclistener's CalculateNotBefore, what k3s
	// and RKE2 use today: max(now - 1 h, the CA's NotBefore); NotAfter is
	// one year after it.
	notBeforeRecent notBeforeRule = "recent"
	// notBeforeCA is what NewSignedCert did before CalculateNotBefore, in
	// older k3s and RKE2 releases (the v1.25 line among them): the CA's
	// NotBefore; NotAfter is one year after now. On a CA a few years old
	// such a certificate is most of its way to NotAfter when issued.
	notBeforeCA notBeforeRule = "ca"
)

// caOptions are how the server's CAs are made and sign.
type caOptions struct {
	now       func() time.Time
	notBefore notBeforeRule
	// age backdates new CAs: their NotBefore is age + 1 h ago, so that
	// agents can be tested against a CA several years old.
	age time.Duration
	// chain makes each CA an intermediate signed by a root, as a k3s
	// cluster with a custom CA has (k3s
	// contrib/util/generate-custom-ca-certs.sh): its bundle is the CA
	// then the root, and agents pin the root (see caHash). The server
	// and client CAs share a root; the kubelet CA has one of its own
	// (see authorities).
	chain bool
}

// authority is a certificate authority (see authorities for the three
// the server keeps). It is safe for concurrent use.
type authority struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	bundle [][]byte // DER: cert, then the certificates above it, the root last
	pem    []byte   // bundle, PEM-encoded, as /cacerts and the CA files serve it
	opts   caOptions
}

// newAuthority makes a CA named name, signed by parent or, if nil, by
// itself.
func newAuthority(name string, parent *authority, o caOptions) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("server: CA key: %w", err)
	}
	notBefore := o.now().Add(-backdate - o.age)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("server: CA certificate: %w", err)
	}
	bundle := [][]byte{der}
	if parent != nil {
		bundle = append(bundle, parent.bundle...)
	}
	return newBundled(name, bundle, key, o)
}

// newBundled returns the CA whose bundle (DER) and key are given; what
// names it in errors.
func newBundled(what string, bundle [][]byte, key *ecdsa.PrivateKey, o caOptions) (*authority, error) {
	cert, err := x509.ParseCertificate(bundle[0])
	if err != nil {
		return nil, fmt.Errorf("server: CA %s: %w", what, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) || !cert.IsCA {
		return nil, fmt.Errorf("server: CA %s: the key is not the certificate's, or it is no CA", what)
	}
	var p []byte
	for _, der := range bundle {
		p = append(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return &authority{cert: cert, key: key, bundle: bundle, pem: p, opts: o}, nil
}

// caHash is the CA hash of a K10 token for the CA's bundle, as k3s
// pkg/clientaccess/token.go hashCA computes it from /cacerts (see
// k3stoken.HashCA): the SHA-256 of the file's bytes when it holds one
// certificate, else of the DER of the root its first certificate chains
// to.
func (a *authority) caHash() string {
	h, _, err := k3stoken.HashCA(a.pem)
	if err != nil {
		return "" // never: newBundled parsed every certificate of a.pem
	}
	return h
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
// certificate request (a GET): the certificate, then the CA bundle, then
// the private key.
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
// the certificate, then the CA bundle; the agent keeps its private key.
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
	return tls.Certificate{Certificate: append([][]byte{der}, a.bundle...), PrivateKey: key}, nil
}

// sign makes a certificate for l and pub, valid as notBeforeRule says.
func (a *authority) sign(l leaf, pub crypto.PublicKey) ([]byte, error) {
	notBefore, notAfter := a.validity()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.commonName, Organization: l.organization},
		DNSNames:     l.dnsNames,
		IPAddresses:  l.ips,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{l.usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, pub, a.key)
	if err != nil {
		return nil, fmt.Errorf("server: signing a certificate for %q: %w", l.commonName, err)
	}
	return der, nil
}

// validity returns the NotBefore and NotAfter of a certificate signed
// now.
func (a *authority) validity() (notBefore, notAfter time.Time) {
	now := a.opts.now()
	if a.opts.notBefore == notBeforeCA {
		return a.cert.NotBefore, now.Add(leafValidity)
	}
	notBefore = now.Add(-backdate)
	if notBefore.Before(a.cert.NotBefore) {
		notBefore = a.cert.NotBefore
	}
	return notBefore, notBefore.Add(leafValidity)
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
// with the server CA; see the README's security notes). With
// caOptions.chain, the kubelet CA's root is therefore not the root the
// agents pin, and newAuthorities refuses CAs where it is (apart).
type authorities struct {
	server, client, kubelet *authority
}

// The CAs' names: their files in <data-dir>/tls, and their common names.
// With caOptions.chain, rootName is the server and client CAs' root's,
// kubeletRootName the kubelet CA's.
var caNames = [...]string{"server-ca", "client-ca", "kubelet-ca"}

const (
	rootName        = "root-ca"
	kubeletRootName = "kubelet-root-ca"
)

func (a *authorities) each() []**authority { return []**authority{&a.server, &a.client, &a.kubelet} }

// newAuthorities makes the three CAs in memory or, with dataDir, reads
// them from dataDir/tls, making them there first if the directory does
// not exist yet. Several servers starting at once on one dataDir end up
// with the same CAs: each makes its own in a temporary directory and
// renames it to tls (atomicfile.CreateDir: every file synced first, so a
// crash leaves all of them or none), which fails for all but the first;
// the others read the first's. o's age and chain apply when the CAs are made; CAs read
// from dataDir keep what they were made with.
func newAuthorities(dataDir string, o caOptions) (*authorities, error) {
	var root *authority
	fresh := func() (*authorities, error) {
		stamp := o.now().Add(-o.age).Unix()
		var kubeletRoot *authority
		if o.chain {
			var err error
			if root, err = newAuthority(fmt.Sprintf("nodepass-example-%s@%d", rootName, stamp), nil, o); err != nil {
				return nil, err
			}
			if kubeletRoot, err = newAuthority(fmt.Sprintf("nodepass-example-%s@%d", kubeletRootName, stamp), nil, o); err != nil {
				return nil, err
			}
		}
		a := &authorities{}
		for i, parent := range []*authority{root, root, kubeletRoot} {
			ca, err := newAuthority(fmt.Sprintf("nodepass-example-%s@%d", caNames[i], stamp), parent, o)
			if err != nil {
				return nil, err
			}
			*a.each()[i] = ca
		}
		return a, nil
	}
	if dataDir == "" {
		return fresh()
	}
	dir := filepath.Join(dataDir, "tls")
	if a, err := loadAuthorities(dir, o); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return a, err
	}
	if err := atomicfile.MkdirAll(dataDir); err != nil {
		return nil, fmt.Errorf("server: -data-dir: %w", err)
	}
	a, err := fresh()
	if err != nil {
		return nil, err
	}
	var files []atomicfile.File
	for i, p := range a.each() {
		f, err := (*p).files(caNames[i])
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	if root != nil {
		// The root's certificate, for those who pin it; its key is not
		// kept (the three CAs are all it signs).
		files = append(files, atomicfile.File{Name: rootName + ".crt", Data: root.pem, Perm: 0o644})
	}
	if err := atomicfile.CreateDir(dir, files); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadAuthorities(dir, o) // another server made them first: use its
		}
		return nil, fmt.Errorf("server: -data-dir: %w", err)
	}
	return a, nil
}

// apart checks what keeps a node from posing as a server: the kubelet
// CA, which signs certificates for the names and addresses nodes send,
// shares no certificate with the server CA's bundle, which agents trust,
// and none of its bundle is signed by one of it. dir names where the CAs
// were read.
func (a *authorities) apart(dir string) error {
	for _, k := range a.kubelet.bundle {
		kc, err := x509.ParseCertificate(k)
		if err != nil {
			return fmt.Errorf("server: CA kubelet-ca in %s: %w", dir, err)
		}
		for _, s := range a.server.bundle {
			sc, err := x509.ParseCertificate(s)
			if err != nil {
				return fmt.Errorf("server: CA server-ca in %s: %w", dir, err)
			}
			if kc.Equal(sc) || kc.CheckSignatureFrom(sc) == nil {
				return fmt.Errorf("server: the kubelet CA in %s chains to the server CA agents trust, so a node's serving certificate would pass for a server (CAs made with -ca-chain by an older server); move %s away to make new CAs", dir, dir)
			}
		}
	}
	return nil
}

// loadAuthorities reads the three CAs from dir, and refuses them unless
// they are apart.
func loadAuthorities(dir string, o caOptions) (*authorities, error) {
	a := &authorities{}
	for i, p := range a.each() {
		ca, err := loadAuthority(filepath.Join(dir, caNames[i]), o)
		if err != nil {
			return nil, err
		}
		*p = ca
	}
	if err := a.apart(dir); err != nil {
		return nil, err
	}
	return a, nil
}

// files are the files that keep a, named base: its bundle in base.crt,
// its key in base.key (mode 0600).
func (a *authority) files(base string) ([]atomicfile.File, error) {
	keyDER, err := x509.MarshalECPrivateKey(a.key)
	if err != nil {
		return nil, fmt.Errorf("server: CA key: %w", err)
	}
	return []atomicfile.File{
		{Name: base + ".crt", Data: a.pem, Perm: 0o644},
		{Name: base + ".key", Data: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), Perm: 0o600},
	}, nil
}

// loadAuthority reads a CA that files kept at base.
func loadAuthority(base string, o caOptions) (*authority, error) {
	certPEM, err := os.ReadFile(base + ".crt")
	if err != nil {
		return nil, fmt.Errorf("server: CA: %w", err)
	}
	keyPEM, err := os.ReadFile(base + ".key")
	if err != nil {
		return nil, fmt.Errorf("server: CA: %w", err)
	}
	var bundle [][]byte
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("server: CA %s.crt: a PEM %q block, want CERTIFICATE", base, b.Type)
		}
		bundle = append(bundle, b.Bytes)
	}
	kb, _ := pem.Decode(keyPEM)
	if len(bundle) == 0 || kb == nil || kb.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("server: CA %s.crt/.key: not PEM certificates and an EC key", base)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("server: CA %s.key: %w", base, err)
	}
	return newBundled(base, bundle, key, o)
}
