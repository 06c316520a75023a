// Package k3stoken reads a k3s join token and computes the CA hash it
// pins, as k3s does in pkg/clientaccess/token.go (parseToken and
// hashCA). The agent and the example server share it, so that the two
// never read a token or a CA bundle two ways.
//
// Its errors name no package: the caller puts its own name and context
// in front ("agent: the token: ...", "server: -token-file f: ...").
package k3stoken

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Prefix starts a full token: K10<CA hash>::<credentials>.
const Prefix = "K10"

// Token is a join token as an agent uses it. The user name of
// <user>:<password> credentials is not kept: an agent authenticates as
// the user "node" whatever the token names.
type Token struct {
	// CAHash is the hex SHA-256 the token pins (see HashCA), in lower
	// case; "" when the token has none.
	CAHash string
	// Password is the password of <user>:<password> credentials, or the
	// whole of a bare token; "" for a bootstrap token.
	Password string
	// Bootstrap is a kubeadm bootstrap token (<id>.<secret>), which an
	// agent sends as a bearer token; "" otherwise.
	Bootstrap string
}

// bootstrapToken is kubeadm's BootstrapTokenPattern
// (k8s.io/cluster-bootstrap token/api), which k3s's parseToken tries
// first.
var bootstrapToken = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// Parse reads a token as k3s's parseToken does: a bare password, a
// bootstrap token, or K10[<CA hash>::]<credentials> whose credentials are
// a bootstrap token or <user>:<password> with a password. The CA hash is
// 64 characters or none. Unlike k3s, it accepts the hash in upper case.
func Parse(s string) (Token, error) {
	if s == "" {
		return Token{}, errors.New("the token is empty")
	}
	creds, full := strings.CutPrefix(s, Prefix)
	if !full {
		if bootstrapToken.MatchString(s) {
			return Token{Bootstrap: s}, nil
		}
		return Token{Password: s}, nil
	}
	var t Token
	if hash, rest, ok := strings.Cut(creds, "::"); ok {
		if hash != "" && len(hash) != 2*sha256.Size {
			return Token{}, fmt.Errorf("a K10 token whose CA hash has %d characters, not %d", len(hash), 2*sha256.Size)
		}
		t.CAHash, creds = strings.ToLower(hash), rest
	}
	if bootstrapToken.MatchString(creds) {
		t.Bootstrap = creds
		return t, nil
	}
	_, pw, ok := strings.Cut(creds, ":")
	if !ok || pw == "" {
		return Token{}, errors.New("a K10 token, but not K10<CA hash>::<user>:<password> nor a bootstrap token")
	}
	t.Password = pw
	return t, nil
}

// CA is a CA bundle as ReadCA reads it.
type CA struct {
	Hash  string              // the CA hash a token pins, hex in lower case
	Chain []*x509.Certificate // the certificates Hash covers
	Certs []*x509.Certificate // every certificate of the bundle, in order
}

// ReadCA parses a CA bundle (PEM) and computes its CA hash as k3s's
// hashCA does:
//
//   - a bundle of one certificate: the SHA-256 of the bundle's bytes,
//     covering that certificate;
//   - a longer bundle whose first certificate chains to a root it
//     carries: the SHA-256 of that root's DER, covering the chain from
//     the first certificate to the root;
//   - any other bundle: the SHA-256 of its bytes, covering every
//     certificate.
//
// As in k3s, a certificate after the first is a root when it has no
// authority key ID or its authority key ID is its subject key ID, and an
// intermediate otherwise; the first chain Go's verifier returns counts.
func ReadCA(bundle []byte) (CA, error) {
	certs, err := ParseCerts(bundle)
	if err != nil {
		return CA{}, err
	}
	if len(certs) > 1 {
		roots, inter := x509.NewCertPool(), x509.NewCertPool()
		for _, c := range certs[1:] {
			if len(c.AuthorityKeyId) == 0 || bytes.Equal(c.AuthorityKeyId, c.SubjectKeyId) {
				roots.AddCert(c)
			} else {
				inter.AddCert(c)
			}
		}
		if chains, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err == nil {
			chain := chains[0]
			sum := sha256.Sum256(chain[len(chain)-1].Raw)
			return CA{Hash: hex.EncodeToString(sum[:]), Chain: chain, Certs: certs}, nil
		}
	}
	sum := sha256.Sum256(bundle)
	return CA{Hash: hex.EncodeToString(sum[:]), Chain: certs, Certs: certs}, nil
}

// HashCA returns ReadCA's hash of a CA bundle and the certificates it
// covers.
func HashCA(bundle []byte) (hash string, chain []*x509.Certificate, err error) {
	ca, err := ReadCA(bundle)
	return ca.Hash, ca.Chain, err
}

// ParseCerts parses every CERTIFICATE block of a PEM bundle, in order,
// skipping other blocks. A bundle without one is an error.
func ParseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}
