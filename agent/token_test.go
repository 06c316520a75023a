package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestParseToken(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in   string
		want token
	}{
		{"K10" + hash + "::server:s3cret", token{caHash: hash, password: "s3cret"}},
		{"K10" + strings.ToUpper(hash) + "::node:pw:with:colons", token{caHash: hash, password: "pw:with:colons"}},
		{"K10::server:s3cret", token{password: "s3cret"}},
		{"K10" + hash + "::abcdef.0123456789abcdef", token{caHash: hash, bearer: "abcdef.0123456789abcdef"}},
		{"abcdef.0123456789abcdef", token{bearer: "abcdef.0123456789abcdef"}},
		{"just-a-password", token{password: "just-a-password"}},
		{"user:pass", token{password: "user:pass"}}, // bare: the whole string, as k3s reads it
	} {
		got, err := parseToken(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseToken(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "K10abc::server:pw", "K10" + hash + "::nopassword", "K10" + hash + "::user:"} {
		if got, err := parseToken(bad); err == nil {
			t.Errorf("parseToken(%q) = %+v, want an error", bad, got)
		}
	}
}

// pinCA's hash is k3s's: the bytes of a one-certificate bundle; the root's DER
// for a chain.
func TestHashCA(t *testing.T) {
	root := newTestCA(t, "root")
	sum := sha256.Sum256(root.pem)
	if h, _, err := pinCA(root.pem); err != nil || h != hex.EncodeToString(sum[:]) {
		t.Errorf("pinCA(one certificate) = %s, %v; want the SHA-256 of its bytes", h, err)
	}
	// An intermediate signed by root, then root: the hash is root's DER.
	inter := newTestCAAt(t, "intermediate", root.cert.NotBefore, root)
	rootSum := sha256.Sum256(root.cert.Raw)
	if h, _, err := pinCA(inter.bundle); err != nil || h != hex.EncodeToString(rootSum[:]) {
		t.Errorf("pinCA(chain) = %s, %v; want the SHA-256 of the root's DER", h, err)
	}
	if _, _, err := pinCA([]byte("not PEM")); err == nil {
		t.Error("pinCA(garbage) succeeded")
	}
}
