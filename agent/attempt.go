package agent

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nodepass/nodepass/agent/internal/statefile"
)

// Result is what an attempt left the node with.
type Result struct {
	// Config is the server's answer to GET /v1-<program>/config (JSON),
	// nil when Offline.
	Config []byte
	// Certs are the four certificates, in the order k3s requests them.
	Certs []CertResult
	// Offline, if not nil, is why the attempt failed. The certificates on
	// disk are valid and used.
	Offline error
	// ServerCA is the servers' CA as the Client trusts it, for the node's
	// other clients of the servers (a load balancer's probes).
	ServerCA *x509.CertPool
}

// CertResult is one certificate after an attempt.
type CertResult struct {
	Name              string // "serving-kubelet", ...
	CertFile, KeyFile string
	// Verdict is what CertRule.Check finds of the certificate in
	// CertFile. A certificate just issued is used as the server sent it:
	// its Verdict checks only its key and dates.
	Verdict CertVerdict
	// Issued reports that this Get or renewal wrote a new certificate.
	Issued bool
	// Err is why the certificate's renewal failed, if it did. The
	// certificate in CertFile is still valid and used.
	Err error
}

// usable reports whether every certificate may be used.
func (r *Result) usable() bool {
	for _, c := range r.Certs {
		if !c.Verdict.State.Usable() {
			return false
		}
	}
	return len(r.Certs) > 0
}

// renewAt is the earliest renewal time of r's certificates, and whether
// a renewal failed: a certificate's request failed, or the server issued
// one already due (which is retried after a wait, not at once).
func (r *Result) renewAt() (at time.Time, failed bool) {
	for i, c := range r.Certs {
		if i == 0 || c.Verdict.RenewAt.Before(at) {
			at = c.Verdict.RenewAt
		}
		failed = failed || c.Err != nil || (c.Issued && c.Verdict.State == CertRenewDue)
	}
	return at, failed
}

// prelude is what an attempt fetches before the certificates: a retry
// within the same Get (or renewal) reuses it.
type prelude struct {
	config             []byte
	clientCA, serverCA *x509.CertPool
	serverCAPEM        []byte                 // server-ca.crt's contents
	issued             map[string]CertVerdict // the certificates issued, by name
}

// attempt is one attempt at the node's certificates, as k3s's agent
// makes one (pkg/agent/config get()), but keeping what is valid:
//
//  1. the node's addresses (addresses), then GET /cacerts, unless the
//     servers' CA is known (from this run or server-ca.crt on disk,
//     checked against the token's hash);
//  2. GET /v1-k3s/config, /v1-k3s/client-ca.crt and /v1-k3s/server-ca.crt,
//     unless an attempt of this Get has;
//  3. for each certificate, CertRule.Check against the CA just fetched: kept
//     if valid, else POST a CSR made from the key kept beside it.
//
// Each request goes to the servers in turn (do). A certificate whose
// renewal fails while it is still valid is used on (CertResult.Err); any
// other failure ends the attempt, with a nil Result. Called with c.mu
// held.
func (c *Client) attempt(ctx context.Context) (*Result, error) {
	c.stats.attempts.Add(1)
	c.askedUntil, c.caDoubted = time.Time{}, false
	c.identity = c.clientCert()
	clear(c.certless)
	if err := c.addresses(); err != nil {
		return nil, err
	}
	if err := c.ensureTrust(ctx); err != nil {
		return nil, err
	}
	if c.prelude == nil {
		p, err := c.fetchPrelude(ctx)
		if err != nil {
			return nil, err
		}
		c.prelude = p
	}
	now := time.Now()
	res := &Result{Config: c.prelude.config, Certs: make([]CertResult, len(c.certs)), ServerCA: c.trust.pool()}
	for i, s := range c.certs {
		roots := c.prelude.clientCA
		if s.serverCA {
			roots = c.prelude.serverCA
		}
		cr := &res.Certs[i]
		*cr = CertResult{Name: s.name, CertFile: s.certFile, KeyFile: s.keyFile}
		if v, ok := c.prelude.issued[s.name]; ok {
			cr.Verdict, cr.Issued = v, true
			continue
		}
		cr.Verdict = c.check(s, roots, now)
		switch st := cr.Verdict; st.State {
		case CertValid:
			c.stats.kept.Add(1)
			c.log.Debug("agent: keeping a valid certificate", "file", s.certFile, "renew_at", st.RenewAt)
			continue
		case CertMissing:
			c.log.Info("agent: requesting a certificate", "file", s.certFile)
		case CertRenewDue:
			c.log.Info("agent: renewing a certificate", "file", s.certFile, "renew_at", st.RenewAt, "expires", st.NotAfter)
		default:
			c.log.Warn("agent: requesting a certificate again: "+st.State.String(), "err", st.Err)
		}
		st, err := c.requestCert(ctx, s, roots)
		switch {
		case err == nil:
			cr.Verdict, cr.Issued = st, true
			c.prelude.issued[s.name] = st
		case cr.Verdict.State.Usable() && !ended(ctx):
			c.log.Warn("agent: renewal failed; going on with the certificate on disk", "file", s.certFile, "expires", cr.Verdict.NotAfter, "err", err)
			cr.Err = err
		default:
			return nil, err
		}
	}
	return res, nil
}

// clientCert is the node's client certificate, client-kubelet, if the
// keep rule keeps it against client-ca.crt on disk; nil otherwise. k3s's
// agent presents it with the token (pkg/agent/config/config.go get:
// clientaccess.WithClientCertificate), and its supervisor accepts
// either (pkg/authenticator), so a node whose token no longer passes
// still rejoins. One the keep rule refuses is not presented: k3s's
// supervisor answers 400 to a certificate of another node's name.
func (c *Client) clientCert() *tls.Certificate {
	i := slices.IndexFunc(c.certs, func(s certSpec) bool { return s.name == "client-kubelet" })
	s := c.certs[i]
	certPEM, written, err := readWithTime(s.certFile)
	if err != nil {
		return nil
	}
	keyPEM, err := os.ReadFile(s.keyFile)
	if err != nil {
		return nil
	}
	// The bytes checked are the bytes presented.
	if !c.rule(s, c.diskCA(false)).checkPEM(certPEM, keyPEM, s.certFile, s.keyFile, time.Now(), written).State.Usable() {
		return nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil
	}
	return &cert
}

// onDisk is the certificates on disk checked against the CAs on disk.
func (c *Client) onDisk(now time.Time) *Result {
	res := &Result{Certs: make([]CertResult, len(c.certs)), ServerCA: c.trust.pool()}
	disk := c.readDiskCA()
	if res.ServerCA == nil {
		if t, err := c.diskTrust(disk); err == nil {
			res.ServerCA = t.pool() // what the token pins, as ensureTrust reads it
		}
	}
	var serverRoots *x509.CertPool // none if server-ca.crt cannot be read
	if disk.err == nil {
		serverRoots = certPool(disk.ca.Certs)
	}
	clientRoots := c.diskCA(false)
	for i, s := range c.certs {
		roots := clientRoots
		if s.serverCA {
			roots = serverRoots
		}
		res.Certs[i] = CertResult{Name: s.name, CertFile: s.certFile, KeyFile: s.keyFile, Verdict: c.check(s, roots, now)}
	}
	return res
}

// check is s's CertRule.Check against roots (nil: none). The serving
// certificate also passes with the CA its file carries if it is the one
// servingRecord names (see rule).
func (c *Client) check(s certSpec, roots *x509.CertPool, now time.Time) CertVerdict {
	r := c.rule(s, roots)
	if s.serverCA {
		r.carriedFor = c.servingRecord()
	}
	return r.Check(s.certFile, s.keyFile, now)
}

// rule is s's CertRule against roots, the CA file as it is now: the CA
// its consumer checks it against. That is client-ca.crt for the client
// certificates, which the API server trusts. It is server-ca.crt for the
// serving certificate: k3s runs the API server with
// --kubelet-certificate-authority server-ca.crt
// (pkg/daemons/control/server.go). So a serving certificate of a CA the
// servers replaced is renewed, although its file carries the CA that
// signed it (k3s sends each certificate followed by its CA,
// pkg/server/handlers/handlers.go signAndSend).
//
// A server may sign serving certificates with a kubelet CA of its own,
// as examples/server does, and configure its API server with that CA.
// The agent has no file of it, only the copy sent with the certificate.
// That copy is still the servers' while their CAs have not changed since
// the certificate was written: the server's CAs are made, and replaced,
// together. So a serving certificate also passes with the CA its file
// carries while server-ca.crt is the one it was written against, which
// servingRecord remembers (file times would not tell: a clock may have
// run ahead when the certificate was written).
//
// A serving certificate must also name every address the agent sends
// now (see addresses).
func (c *Client) rule(s certSpec, roots *x509.CertPool) CertRule {
	r := s.rule
	r.Roots = roots
	if s.serverCA {
		r.IPs = c.ips
	}
	return r
}

// servingRecordFile holds the SHA-256 of serving-kubelet.crt and of the
// server-ca.crt it was written against, in hex.
func (c *Client) servingRecordFile() string {
	return filepath.Join(c.agentDir, "etc", "serving-kubelet-server-ca.sha256")
}

// servingRecord is the SHA-256 of the serving certificate written
// against server-ca.crt as it is now; zero if there is none.
func (c *Client) servingRecord() (cert [sha256.Size]byte) {
	b, err := os.ReadFile(c.servingRecordFile())
	if err != nil {
		return cert
	}
	certHex, caHex, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	ca, err := os.ReadFile(c.caFile(true))
	if sum := sha256.Sum256(ca); err != nil || hex.EncodeToString(sum[:]) != caHex {
		return cert
	}
	if n, err := hex.Decode(cert[:], []byte(certHex)); err != nil || n != len(cert) {
		return [sha256.Size]byte{}
	}
	return cert
}

// keepServingRecord writes servingRecordFile for certPEM, written
// against serverCA (server-ca.crt's contents). A failure is logged: the
// next start renews a certificate of a kubelet CA.
func (c *Client) keepServingRecord(certPEM, serverCA []byte) {
	cert, ca := sha256.Sum256(certPEM), sha256.Sum256(serverCA)
	rec := hex.EncodeToString(cert[:]) + " " + hex.EncodeToString(ca[:]) + "\n"
	if err := statefile.WriteFile(c.servingRecordFile(), []byte(rec), 0o600); err != nil {
		c.log.Warn("agent: keeping which server-ca.crt the serving certificate was written against", "err", err)
	}
}

// diskCA reads client-ca.crt or server-ca.crt from disk; nil if it
// cannot.
func (c *Client) diskCA(server bool) *x509.CertPool {
	b, err := os.ReadFile(c.caFile(server))
	if err != nil {
		return nil
	}
	return poolOf(b)
}

// poolOf is the certificates of a PEM bundle; nil if it has none.
func poolOf(pem []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil
	}
	return pool
}

func (c *Client) caFile(server bool) string {
	if server {
		return filepath.Join(c.agentDir, "server-ca.crt")
	}
	return filepath.Join(c.agentDir, "client-ca.crt")
}

// fetchPrelude gets the server's configuration and the two CAs.
func (c *Client) fetchPrelude(ctx context.Context) (*prelude, error) {
	cfg, err := c.do(ctx, call{method: "GET", path: c.prefix + "/config"})
	if err != nil {
		return nil, err
	}
	if !json.Valid(cfg.body) {
		return nil, fmt.Errorf("agent: GET %s/config: %s answered something other than JSON", c.prefix, cfg.addr)
	}
	c.readPorts(cfg.body)
	p := &prelude{config: cfg.body, issued: make(map[string]CertVerdict)}
	for _, server := range []bool{false, true} {
		path := c.prefix + "/" + filepath.Base(c.caFile(server))
		a, err := c.do(ctx, call{method: "GET", path: path})
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(a.body) {
			return nil, fmt.Errorf("agent: GET %s: %s answered no PEM certificate", path, a.addr)
		}
		if err := writeIfChanged(c.caFile(server), a.body, 0o600); err != nil {
			return nil, err
		}
		if server {
			p.serverCA, p.serverCAPEM = pool, a.body
			c.pruneCarried(a.body)
		} else {
			p.clientCA = pool
		}
	}
	return p, nil
}

// requestCert asks for a new certificate for s, with a CSR from the key
// kept beside it (made if there is none), checks the answer against roots
// and writes it.
func (c *Client) requestCert(ctx context.Context, s certSpec, roots *x509.CertPool) (CertVerdict, error) {
	key, keyPEM, err := c.loadOrMakeKey(s.keyFile)
	if err != nil {
		return CertVerdict{}, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: s.cn, Organization: s.org}}, key)
	if err != nil {
		return CertVerdict{}, fmt.Errorf("agent: a certificate request for %s: %w", s.certFile, err)
	}
	c.stats.requested.Add(1)
	a, err := c.do(ctx, call{method: "POST", path: c.prefix + "/" + s.name + ".crt", body: csr, node: s.node})
	if err != nil {
		return CertVerdict{}, err
	}
	// A down-level server makes the key itself and sends it along.
	certPEM, serverKey := splitCertKeyPEM(a.body)
	if serverKey != nil {
		keyPEM = serverKey
	}
	now := time.Now()
	rule := c.rule(s, roots)
	if s.serverCA { // written against the server-ca.crt just fetched
		rule.carriedFor = sha256.Sum256(certPEM)
	}
	st := rule.checkPEM(certPEM, keyPEM, s.certFile, s.keyFile, now, now)
	if st.State == CertWrongName || st.State == CertOtherCA {
		// The keep rule would not keep it, but k3s's agent writes what
		// its server sends (pkg/agent/config/config.go
		// getKubeletServingCert and friends), and asked again the server
		// would send the same, at the cost of a scrypt. It is used, and
		// the next start decides again with the keep rule.
		lacks := st.Err
		rule.issued = true
		if st = rule.checkPEM(certPEM, keyPEM, s.certFile, s.keyFile, now, now); st.State.Usable() {
			c.log.Warn("agent: using the certificate just issued, though it would not be kept: the next start asks again",
				"server", a.addr, "err", inner{lacks})
		}
	}
	if !st.State.Usable() {
		return st, fmt.Errorf("agent: %s sent an unusable certificate: %w", a.addr, inner{st.Err})
	}
	if serverKey != nil {
		if err := statefile.WriteFile(s.keyFile, serverKey, 0o600); err != nil {
			return st, fmt.Errorf("agent: %w", err)
		}
	}
	if err := statefile.WriteFile(s.certFile, certPEM, 0o600); err != nil {
		return st, fmt.Errorf("agent: %w", err)
	}
	if s.serverCA {
		c.keepServingRecord(certPEM, c.prelude.serverCAPEM)
	}
	c.stats.issued.Add(1)
	c.log.Info("agent: certificate written", "file", s.certFile, "server", a.addr, "expires", st.NotAfter)
	return st, nil
}

// loadOrMakeKey returns the private key in file, or makes one (ECDSA
// P-256, as k3s does) and writes it when the file is missing or cannot be
// parsed.
func (c *Client) loadOrMakeKey(file string) (crypto.Signer, []byte, error) {
	b, err := os.ReadFile(file)
	if err == nil {
		key, perr := parseKeyPEM(b)
		if perr == nil {
			return key, b, nil
		}
		c.log.Warn("agent: replacing a private key that cannot be parsed", "file", file, "err", perr)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if err := statefile.WriteFile(file, keyPEM, 0o600); err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	return key, keyPEM, nil
}

// writeIfChanged writes data to file atomically unless it holds data.
func writeIfChanged(file string, data []byte, perm fs.FileMode) error {
	if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := statefile.WriteFile(file, data, perm); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}
