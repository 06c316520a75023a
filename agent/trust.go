package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/nodepass/nodepass/agent/internal/statefile"
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
//
// k3s's rolling rotation (contrib/util/rotate-default-ca-certs.sh, then
// `k3s certificate rotate-ca`) serves the bundle [new intermediate, new
// root, new root cross-signed by the old root, old root]. A restarted
// server's token pins the new root. Nodes get that token and restart,
// servers first. Until every server has restarted, those that have not
// present certificates of the old root. The bundle alone cannot tell the
// old root from an attacker's CA: anyone can cross-sign the new root,
// whose public key is public. What sets the old root apart is that the
// agent trusted it before. So the agent also trusts the roots it trusted
// before that the new bundle still carries, and no other root. They are
// the roots of server-ca.crt on disk when a new bundle arrives, kept in
// carriedRootsFile once server-ca.crt holds the new bundle, and dropped
// once the servers' bundle no longer carries them. A first join during a
// rotation has no earlier roots: it reaches the restarted servers alone.
//
// Only a server whose certificate chains to what the token pins may set
// the trust with its /cacerts answer, and so carry earlier roots: a
// server of the old root (every k3s server holds the CA's key) could
// otherwise vouch for it by appending it to the genuine bundle.
//
// The script also prints an "updated agent token" whose hash is the new
// intermediate's. k3s's hashCA (pkg/clientaccess/token.go) hashes the
// root a bundle of several certificates leads to, never its first
// certificate, so k3s's agent refuses that token, and so does the Client.
// The token that works is the one a restarted server writes at start
// (<data-dir>/server/token or agent-token: pkg/server/server.go
// printTokens).

// trustedCA is what the agent trusts of a CA bundle.
type trustedCA struct {
	certs *x509.CertPool // chain and carried
	// chain is what the token's hash covers (k3stoken.CA); carried, the
	// earlier roots the bundle still carries (see above).
	chain, carried []*x509.Certificate
	// publicAddr is the server (host:port) whose certificate chains to
	// the host's roots (sys) instead, accepted as k3s accepts it. It alone
	// is checked against the host's roots.
	publicAddr string
	sys        *x509.CertPool
}

// newTrustedCA trusts chain and carried.
func newTrustedCA(chain, carried []*x509.Certificate) *trustedCA {
	return &trustedCA{certs: certPool(chain, carried), chain: chain, carried: carried}
}

// certPool is a pool of the certificates of lists.
func certPool(lists ...[]*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, l := range lists {
		for _, c := range l {
			p.AddCert(c)
		}
	}
	return p
}

// pool is the CA's certificates; nil for a nil CA.
func (t *trustedCA) pool() *x509.CertPool {
	if t == nil {
		return nil
	}
	return t.certs
}

// readCA reads bundle, the CA of from (a server or a file), and checks
// it against the token (matchToken).
func (c *Client) readCA(bundle []byte, from string) (k3stoken.CA, error) {
	ca, err := k3stoken.ReadCA(bundle)
	if err != nil {
		return ca, fmt.Errorf("agent: the CA of %s: %w", from, err)
	}
	return ca, c.matchToken(ca, from)
}

// matchToken checks ca, the CA of from, against the token's CA hash, if
// it has one.
func (c *Client) matchToken(ca k3stoken.CA, from string) error {
	if c.tok.CAHash != "" && ca.Hash != c.tok.CAHash {
		return fmt.Errorf("%w: the CA of %s has the hash %s; the token's is %s", ErrCARejected, from, ca.Hash, c.tok.CAHash)
	}
	return nil
}

// diskCA is server-ca.crt on disk, read once for what ensureTrust asks
// of it.
type diskCA struct {
	file string
	ca   k3stoken.CA
	err  error               // reading or parsing the file
	kept []*x509.Certificate // the roots of carriedRootsFile (none if it is missing or corrupt)
}

func (c *Client) readDiskCA() diskCA {
	d := diskCA{file: c.caFile(true)}
	var bundle []byte
	if bundle, d.err = os.ReadFile(d.file); d.err == nil {
		d.ca, d.err = k3stoken.ReadCA(bundle)
	}
	if d.err != nil {
		return d
	}
	if b, err := os.ReadFile(c.carriedRootsFile()); err == nil {
		d.kept, _ = k3stoken.ParseCerts(b)
	}
	return d
}

// diskTrust is what the agent trusts of server-ca.crt on disk, if it
// matches the token: what the token pins, and the roots carried in
// carriedRootsFile that it still carries.
func (c *Client) diskTrust(d diskCA) (*trustedCA, error) {
	if d.err != nil {
		return nil, d.err
	}
	if err := c.matchToken(d.ca, d.file); err != nil {
		return nil, err
	}
	return newTrustedCA(d.ca.Chain, carry(d.kept, d.ca.Certs, d.ca.Chain)), nil
}

// earlierRoots are the roots the agent trusted of server-ca.crt on disk,
// whatever token it matched then: the roots of what its hash covers,
// and the roots carried that it carries.
func (d diskCA) earlierRoots() []*x509.Certificate {
	if d.err != nil {
		return nil
	}
	var roots []*x509.Certificate
	for _, r := range slices.Concat(d.ca.Chain, carry(d.kept, d.ca.Certs, nil)) {
		if bytes.Equal(r.RawIssuer, r.RawSubject) && r.CheckSignatureFrom(r) == nil {
			roots = append(roots, r)
		}
	}
	return roots
}

// carry is the certificates of earlier that bundle carries, byte for
// byte, and that chain does not hold.
func carry(earlier, bundle, chain []*x509.Certificate) []*x509.Certificate {
	var out []*x509.Certificate
	for _, r := range earlier {
		if slices.ContainsFunc(bundle, r.Equal) && !slices.ContainsFunc(chain, r.Equal) && !slices.ContainsFunc(out, r.Equal) {
			out = append(out, r)
		}
	}
	return out
}

// carriedRootsFile keeps the roots carried over from an earlier
// server-ca.crt.
func (c *Client) carriedRootsFile() string {
	return filepath.Join(c.agentDir, "etc", "server-ca-carried-roots.crt")
}

// keepCarried writes roots to carriedRootsFile, or removes it when there
// are none. A failure is logged: the roots are trusted in this process,
// and a restart mid-rotation reaches the restarted servers alone.
func (c *Client) keepCarried(roots []*x509.Certificate) {
	file := c.carriedRootsFile()
	var err error
	if len(roots) == 0 {
		if err = os.Remove(file); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	} else {
		var b []byte
		for _, r := range roots {
			b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Raw})...)
		}
		err = statefile.WriteFile(file, b, 0o600)
	}
	if err != nil {
		c.log.Warn("agent: keeping the earlier CA roots of a rotation", "file", file, "err", err)
	}
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
	disk := c.readDiskCA()
	if !c.diskCAStale {
		if t, err := c.diskTrust(disk); err == nil {
			c.trust, c.trustFromDisk = t, true
			return nil
		}
	}
	earlier := disk.earlierRoots()
	var ca *trustedCA
	a, err := c.do(ctx, call{method: "GET", path: "/cacerts", bootstrap: true, check: func(a answer) (err error) {
		ca, err = c.caFrom(a, earlier)
		return err
	}})
	if err != nil {
		return err
	}
	if c.tok.CAHash == "" && !c.warnedNoHash {
		c.warnedNoHash = true
		c.log.Warn("agent: the token has no CA hash: the servers' CA is trusted as the first server sent it; use the full token (K10<hash>::...) from a server's node-token file")
	}
	if len(ca.carried) > 0 {
		c.log.Info("agent: the servers' CA bundle carries roots trusted before: trusting them too while it does (a CA rotation)", "roots", len(ca.carried))
	}
	c.keepCarried(ca.carried) // before server-ca.crt is replaced
	a.sc.verified = true
	c.trust, c.trustFromDisk, c.diskCAStale = ca, false, false
	return nil
}

// caFrom is what the agent trusts of a's answer to GET /cacerts: the
// CA it sends, if it matches the token and the certificate of the server
// that sent it chains to what the token pins (or to the host's roots, as
// k3s accepts: pkg/clientaccess/token.go getCACerts), with the earlier
// roots the CA still carries. The server is checked against the pin
// alone, never against the roots its own answer would carry: a server
// of an old root could otherwise vouch for that root by appending it.
func (c *Client) caFrom(a answer, earlier []*x509.Certificate) (*trustedCA, error) {
	ca, err := c.readCA(a.body, a.addr)
	if err != nil {
		return nil, err
	}
	t := newTrustedCA(ca.Chain, carry(earlier, ca.Certs, ca.Chain))
	host, _, _ := net.SplitHostPort(a.addr)
	if err := verifyPeer(*a.tls, host, certPool(ca.Chain)); err != nil {
		sys, serr := x509.SystemCertPool()
		if serr != nil || verifyPeer(*a.tls, host, sys) != nil {
			return nil, fmt.Errorf("agent: the certificate of %s does not chain to the CA it sent: %w", a.addr, err)
		}
		t.publicAddr, t.sys = a.addr, sys
	}
	return t, nil
}

// pruneCarried drops the carried roots that a bundle of the servers no
// longer carries, when that bundle matches the token: the rotation is
// over. Called with c.mu held, with the servers' server-ca.crt.
func (c *Client) pruneCarried(bundle []byte) {
	t := c.trust
	if t == nil || len(t.carried) == 0 {
		return
	}
	ca, err := c.readCA(bundle, "server-ca.crt")
	if err != nil {
		return // not a bundle of the token's CA: a server not yet restarted
	}
	if kept := carry(t.carried, ca.Certs, nil); len(kept) < len(t.carried) {
		nt := newTrustedCA(t.chain, kept)
		nt.publicAddr, nt.sys = t.publicAddr, t.sys
		c.trust = nt
		c.keepCarried(kept)
		for addr := range c.conns { // checked against the roots dropped
			c.dropConn(addr)
		}
		c.log.Info("agent: the servers' CA bundle no longer carries roots trusted before: no longer trusting them", "roots", len(t.carried)-len(kept))
	}
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
	inter := certPool(cs.PeerCertificates[1:])
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: host})
	if err != nil {
		return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
	}
	return nil
}
