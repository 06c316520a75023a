package k3stoken

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// Parse reads what k3s's parseToken reads (pkg/clientaccess/token.go):
// a bare token is a password, colons and all; K10 tokens carry a CA hash
// of 64 characters or none, then a bootstrap token or <user>:<password>.
func TestParse(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in   string
		want Token
	}{
		{"K10" + hash + "::server:s3cret", Token{CAHash: hash, Password: "s3cret"}},
		{"K10" + strings.ToUpper(hash) + "::node:pw:with:colons", Token{CAHash: hash, Password: "pw:with:colons"}},
		{"K10::server:s3cret", Token{Password: "s3cret"}},
		{"K10abc:def", Token{Password: "def"}}, // no "::": credentials only
		{"K10" + hash + "::abcdef.0123456789abcdef", Token{CAHash: hash, Bootstrap: "abcdef.0123456789abcdef"}},
		{"abcdef.0123456789abcdef", Token{Bootstrap: "abcdef.0123456789abcdef"}},
		{"just-a-password", Token{Password: "just-a-password"}},
		{"user:pass", Token{Password: "user:pass"}},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for bad, msg := range map[string]string{
		"":                               "empty",
		"K10abc::server:pw":              "CA hash has 3 characters",
		"K10" + hash + "::nopassword":    "not K10<CA hash>::<user>:<password>",
		"K10" + hash + "::user:":         "not K10<CA hash>::<user>:<password>",
		"K10" + hash[:63] + "::user:pw":  "CA hash has 63 characters",
		"K10" + hash + "0::user:pw":      "CA hash has 65 characters",
		"K10" + hash + "::" + "nocolons": "not K10",
	} {
		if got, err := Parse(bad); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("Parse(%q) = %+v, %v; want an error saying %q", bad, got, err, msg)
		}
	}
}

// ca is a CA certificate and its key, for building bundles.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// newCA makes a CA named name for key (nil: a new one) signed by parent
// (nil: itself), with the subject and authority key IDs given (nil: Go's
// defaults: a key ID of its own, no authority key ID when self-signed).
func newCA(t *testing.T, name string, key *ecdsa.PrivateKey, parent *ca, skid, akid []byte) *ca {
	t.Helper()
	if key == nil {
		key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		SubjectKeyId: skid, AuthorityKeyId: akid,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &ca{cert: cert, key: key}
}

func pemOf(certs ...*x509.Certificate) []byte {
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// HashCA is k3s's hashCA: the bytes of a one-certificate bundle; the
// root's DER for a chain; the bytes again when the first certificate
// chains to no root of the bundle.
func TestHashCA(t *testing.T) {
	root := newCA(t, "root", nil, nil, nil, nil)
	inter := newCA(t, "intermediate", nil, root, nil, nil)
	other := newCA(t, "other", nil, nil, nil, nil)
	for _, tc := range []struct {
		name   string
		bundle []byte
		hash   string
		pinned int
	}{
		{"one certificate", pemOf(root.cert), sum(pemOf(root.cert)), 1},
		{"one certificate, a trailing newline", append(pemOf(root.cert), '\n'), sum(append(pemOf(root.cert), '\n')), 1},
		{"intermediate then root", pemOf(inter.cert, root.cert), sum(root.cert.Raw), 2},
		{"intermediate, root, another root", pemOf(inter.cert, root.cert, other.cert), sum(root.cert.Raw), 2},
		{"no chain", pemOf(inter.cert, other.cert), sum(pemOf(inter.cert, other.cert)), 2},
	} {
		h, pinned, err := HashCA(tc.bundle)
		if err != nil || h != tc.hash || len(pinned) != tc.pinned {
			t.Errorf("%s: HashCA = %s, %d certificates, %v; want %s, %d", tc.name, h, len(pinned), err, tc.hash, tc.pinned)
		}
	}
	if _, _, err := HashCA([]byte("not PEM")); err == nil {
		t.Error("HashCA(garbage) succeeded")
	}
}

// The bundle of k3s's rolling CA rotation
// (contrib/util/rotate-default-ca-certs.sh) is the new intermediate, the
// new self-signed root, the new root cross-signed by the old root, then
// the old root. Its hash, which a restarted server's token carries, is
// the new root's DER. The script prints an agent token whose hash is
// the SHA-256 of the intermediate's DER (`openssl x509 -fingerprint
// -sha256 -in server-ca.pem`): hashCA never yields it for a bundle of
// more than one certificate, so k3s's agent refuses that token
// (validateCAHash: "token CA hash does not match the Cluster CA
// certificate hash"), and so does nodepass's.
func TestHashCARotatedBundle(t *testing.T) {
	old := newCA(t, "k3s-server-ca", nil, nil, nil, nil)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	skid := []byte("new-root-key-id-0123")
	// openssl's v3_ca of the script: authorityKeyIdentifier = keyid:always.
	newRoot := newCA(t, "k3s-server-root", key, nil, skid, skid)
	cross := newCA(t, "k3s-server-root", key, old, skid, nil)
	inter := newCA(t, "k3s-server-ca", nil, newRoot, nil, nil)
	bundle := pemOf(inter.cert, newRoot.cert, cross.cert, old.cert)
	h, pinned, err := HashCA(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if h != sum(newRoot.cert.Raw) {
		t.Errorf("hash %s, want the new root's %s", h, sum(newRoot.cert.Raw))
	}
	if h == sum(inter.cert.Raw) {
		t.Error("the hash is the intermediate's, which the script prints")
	}
	if len(pinned) != 2 || !pinned[0].Equal(inter.cert) || !pinned[1].Equal(newRoot.cert) {
		t.Errorf("pinned %d certificates, want the intermediate and the new root", len(pinned))
	}
}
