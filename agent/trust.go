package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/nodepass/nodepass/internal/k3stoken"
)

// The servers' CA comes from server-ca.crt on disk or from GET /cacerts.
// Either must match the token's CA hash, and the agent then trusts only
// what that hash pins. For a bundle of one certificate, the hash covers
// the bundle's bytes, and the agent trusts that certificate. For a chain,
// the hash covers the root that the bundle's first certificate leads to.
// The agent trusts that root and the certificates on the way to it, never
// another certificate the bundle carries. k3s trusts every certificate of
// the bundle, so a CA appended to a genuine chain passes there.

// trustedCA is what the agent trusts of a CA bundle.
type trustedCA struct {
	certs *x509.CertPool
	// publicAddr is the server (host:port) whose certificate chains to
	// the host's roots (sys) instead, accepted as k3s accepts it. It alone
	// is checked against the host's roots.
	publicAddr string
	sys        *x509.CertPool
}

// pool is the CA's certificates; nil for a nil CA.
func (t *trustedCA) pool() *x509.CertPool {
	if t == nil {
		return nil
	}
	return t.certs
}

// pinCA returns the CA hash of bundle, computed as k3s computes it
// (k3stoken.HashCA), and the certificates it pins.
func pinCA(bundle []byte) (string, *x509.CertPool, error) {
	h, certs, err := k3stoken.HashCA(bundle)
	if err != nil {
		return "", nil, err
	}
	pinned := x509.NewCertPool()
	for _, c := range certs {
		pinned.AddCert(c)
	}
	return h, pinned, nil
}

// pinned checks bundle against the token's CA hash, if it has one, and
// returns the certificates to trust.
func (c *Client) pinned(bundle []byte) (*x509.CertPool, error) {
	h, pool, err := pinCA(bundle)
	if err != nil {
		return nil, err
	}
	if c.tok.CAHash != "" && h != c.tok.CAHash {
		return nil, fmt.Errorf("%w: its hash is %s, the token's is %s", ErrCARejected, h, c.tok.CAHash)
	}
	return pool, nil
}

// ensureTrust makes sure the servers' CA is known: server-ca.crt on disk
// if it matches the token, else what GET /cacerts sends (see caFrom).
// As for a 401, only the configured server decides: a server learnt
// that sends another CA (another cluster's, say) is left out, and the
// request moves on to the next server.
func (c *Client) ensureTrust(ctx context.Context) error {
	if c.trust != nil {
		return nil
	}
	if !c.diskCAStale {
		if b, err := os.ReadFile(c.caFile(true)); err == nil {
			if pool, err := c.pinned(b); err == nil {
				c.trust, c.trustFromDisk = &trustedCA{certs: pool}, true
				return nil
			}
		}
	}
	var ca *trustedCA
	a, err := c.do(ctx, call{method: "GET", path: "/cacerts", bootstrap: true, check: func(a answer) (err error) {
		ca, err = c.caFrom(a)
		return err
	}})
	if err != nil {
		return err
	}
	if c.tok.CAHash == "" && !c.warnedNoHash {
		c.warnedNoHash = true
		c.log.Warn("agent: the token has no CA hash: the servers' CA is trusted as the first server sent it; use the full token (K10<hash>::...) from a server's node-token file")
	}
	a.sc.verified = true
	c.trust, c.trustFromDisk, c.diskCAStale = ca, false, false
	return nil
}

// caFrom is what the agent trusts of a's answer to GET /cacerts: the
// CA it sends, if it matches the token, and if the certificate of the
// server that sent it chains to it (or to the host's roots, as k3s
// accepts: pkg/clientaccess/token.go getCACerts).
func (c *Client) caFrom(a answer) (*trustedCA, error) {
	h, pool, err := pinCA(a.body)
	if err != nil {
		return nil, fmt.Errorf("agent: %s sent no CA bundle: %w", a.addr, err)
	}
	if c.tok.CAHash != "" && h != c.tok.CAHash {
		return nil, fmt.Errorf("%w: %s sent one whose hash is %s, the token's is %s", ErrCARejected, a.addr, h, c.tok.CAHash)
	}
	ca := &trustedCA{certs: pool}
	if !a.sc.verified {
		host, _, _ := net.SplitHostPort(a.addr)
		if err := verifyPeer(*a.tls, host, pool); err != nil {
			sys, serr := x509.SystemCertPool()
			if serr != nil || verifyPeer(*a.tls, host, sys) != nil {
				return nil, fmt.Errorf("agent: the certificate of %s does not chain to the CA it sent: %w", a.addr, err)
			}
			ca.publicAddr, ca.sys = a.addr, sys
		}
	}
	return ca, nil
}

// verifier checks the certificate of the server at addr against t.
func (t *trustedCA) verifier(addr string) func(tls.ConnectionState) error {
	host, _, _ := net.SplitHostPort(addr)
	return func(cs tls.ConnectionState) error {
		err := verifyPeer(cs, host, t.pool())
		if err != nil && t != nil && addr == t.publicAddr && verifyPeer(cs, host, t.sys) == nil {
			return nil
		}
		return err
	}
}

// verifyPeer checks that the server's certificate chains to roots and
// names host.
func verifyPeer(cs tls.ConnectionState, host string, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server sent no certificate")
	}
	if roots == nil {
		return errors.New("no CA to check the server's certificate against")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: host})
	if err != nil {
		return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
	}
	return nil
}
