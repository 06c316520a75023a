package k3stoken

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/nodepass/nodepass/internal/testca"
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

func pemOf(cas ...*testca.CA) []byte {
	var b []byte
	for _, c := range cas {
		b = append(b, c.PEM()...)
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
	now := time.Now().Add(-time.Hour)
	root := testca.New(t, "root", now, nil)
	inter := testca.New(t, "intermediate", now, root)
	other := testca.New(t, "other", now, nil)
	for _, tc := range []struct {
		name   string
		bundle []byte
		hash   string
		pinned int
	}{
		{"one certificate", pemOf(root), sum(pemOf(root)), 1},
		{"one certificate, a trailing newline", append(pemOf(root), '\n'), sum(append(pemOf(root), '\n')), 1},
		{"intermediate then root", pemOf(inter, root), sum(root.Cert.Raw), 2},
		{"intermediate, root, another root", pemOf(inter, root, other), sum(root.Cert.Raw), 2},
		{"no chain", pemOf(inter, other), sum(pemOf(inter, other)), 2},
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
	r := testca.Rotate(t, testca.New(t, "k3s-server-ca", time.Now().Add(-time.Hour), nil))
	h, pinned, err := HashCA(r.Bundle(true))
	if err != nil {
		t.Fatal(err)
	}
	if h != sum(r.Root.Cert.Raw) {
		t.Errorf("hash %s, want the new root's %s", h, sum(r.Root.Cert.Raw))
	}
	if h == sum(r.Inter.Cert.Raw) {
		t.Error("the hash is the intermediate's, which the script prints")
	}
	if len(pinned) != 2 || !pinned[0].Equal(r.Inter.Cert) || !pinned[1].Equal(r.Root.Cert) {
		t.Errorf("pinned %d certificates, want the intermediate and the new root", len(pinned))
	}
}
