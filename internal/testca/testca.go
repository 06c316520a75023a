// Package testca makes certificate authorities for tests, as k3s makes
// them: ECDSA P-256 CAs valid ten years (dynamiclistener cert/cert.go
// NewSelfSignedCACert), and the bundle of k3s's rolling CA rotation.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// CA is a CA certificate and its key.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// PEM is c's certificate, PEM-encoded.
func (c *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Cert.Raw})
}

// New makes a CA named name, created at created and valid ten years,
// signed by parent (nil: a self-signed root, with Go's key IDs: a subject
// key ID of its own and no authority key ID).
func New(t testing.TB, name string, created time.Time, parent *CA) *CA {
	t.Helper()
	return build(t, name, created, nil, parent, nil, nil)
}

// build is New with the key (nil: a new one) and the key IDs (nil: Go's).
func build(t testing.TB, name string, created time.Time, key *ecdsa.PrivateKey, parent *CA, skid, akid []byte) *CA {
	t.Helper()
	if key == nil {
		var err error
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	serial := make([]byte, 16)
	rand.Read(serial)
	tmpl := &x509.Certificate{
		SerialNumber:          new(big.Int).SetBytes(serial),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             created,
		NotAfter:              created.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          skid,
		AuthorityKeyId:        akid,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key}
}

// Rotation is k3s's rolling rotation of a CA, as
// contrib/util/rotate-default-ca-certs.sh makes it.
type Rotation struct {
	// Root is the new self-signed root. openssl's v3_ca of the script
	// sets authorityKeyIdentifier = keyid:always: its authority key ID
	// is its own subject key ID.
	Root *CA
	// Cross is the new root cross-signed by the old one: the same
	// subject, key and key ID.
	Cross *CA
	// Inter is the new intermediate the new root signs, which signs
	// what the servers issue.
	Inter *CA
	// Old is the old root.
	Old *CA
}

// Rotate makes the rotation of old.
func Rotate(t testing.TB, old *CA) Rotation {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	skid := make([]byte, 20)
	rand.Read(skid)
	created := time.Now().Add(-time.Hour)
	root := build(t, "k3s-server-root@1700000000", created, key, nil, skid, skid)
	cross := build(t, "k3s-server-root@1700000000", created, key, old, skid, nil)
	inter := New(t, "k3s-server-ca@1700000000", created, root)
	return Rotation{Root: root, Cross: cross, Inter: inter, Old: old}
}

// Bundle is what the servers send as their CA once restarted with the
// rotation: [intermediate, new root, cross-signed new root, old root];
// with old false, the bundle after the rotation: [intermediate, new root].
func (r Rotation) Bundle(old bool) []byte {
	b := append(r.Inter.PEM(), r.Root.PEM()...)
	if old {
		b = append(append(b, r.Cross.PEM()...), r.Old.PEM()...)
	}
	return b
}
