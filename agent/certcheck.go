package agent

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// DefaultRenewAfter is the fraction of its lifetime after which a
// certificate's renewal window opens; the package doc says why.
const DefaultRenewAfter = 0.7

// CertState is what CheckCert found of a certificate on disk.
type CertState int

const (
	// CertValid: keep it; it is not due for renewal.
	CertValid CertState = iota
	// CertRenewDue: past its renewal time but still valid; request a new
	// one, and go on with this one while that fails.
	CertRenewDue
	// CertMissing: the certificate or its key file does not exist.
	CertMissing
	// CertCorrupt: the certificate or the key cannot be parsed.
	CertCorrupt
	// CertWrongKey: the certificate is not for the key beside it.
	CertWrongKey
	// CertWrongName: the certificate does not carry the expected name.
	CertWrongName
	// CertOtherCA: the certificate does not chain to the CA given, for
	// the usage wanted.
	CertOtherCA
	// CertExpired: past its NotAfter, or before its NotBefore and the
	// time it was written.
	CertExpired
)

var certStateNames = [...]string{"valid", "renewal due", "missing", "corrupt", "wrong key", "wrong name", "another CA", "expired"}

func (s CertState) String() string {
	if s < 0 || int(s) >= len(certStateNames) {
		return fmt.Sprintf("CertState(%d)", int(s))
	}
	return certStateNames[s]
}

// Usable reports whether a certificate in state s may be used: it is
// valid now, whether or not its renewal is due.
func (s CertState) Usable() bool { return s == CertValid || s == CertRenewDue }

// CertStatus is CheckCert's finding.
type CertStatus struct {
	State CertState
	// RenewAt is when the certificate is due for renewal; NotAfter is when
	// it expires. Both are zero unless it parsed, matched its key and
	// carried the name.
	RenewAt, NotAfter time.Time
	// Err says what is wrong, naming the file; nil for CertValid. For
	// CertRenewDue it says since when the renewal is due.
	Err error
}

// CertCheck is what a certificate must satisfy to be kept.
type CertCheck struct {
	// Name is the name the certificate must carry: its common name; for
	// a serving certificate (Usage ExtKeyUsageServerAuth), a DNS name or
	// the common name.
	Name string
	// Usage is the extended key usage the chain must allow.
	Usage x509.ExtKeyUsage
	// Roots holds the CA the certificate must chain to. Required.
	Roots *x509.CertPool
	// ChainCA also accepts a CA that the certificate file carries after
	// the certificate. A kubelet serving certificate may come from a CA
	// the server keeps for them alone, which agents do not trust as the
	// server (examples/server does so; k3s signs them with its server
	// CA); the file is what a server the agent verified sent.
	ChainCA bool
	// RenewAfter is the fraction of the lifetime at which the renewal
	// window opens; the window ends two thirds of the way from there to
	// NotAfter (0.7: from 70 % to 90 %). Zero means DefaultRenewAfter.
	RenewAfter float64
}

// CheckCert checks the PEM certificate in certFile (a chain: the
// certificate first, then the CAs, as a k3s server sends it) and its
// private key in keyFile at time now. The certificate must parse, be for
// the key, carry want.Name, chain to want.Roots for want.Usage, and be
// within its validity. A certificate that passes is CertValid until its
// renewal time and CertRenewDue after.
//
// Its lifetime counts from when it was issued to this agent: the later
// of its NotBefore and the time certFile was written. k3s servers set
// NotBefore to the CA's NotBefore in older releases, so a lifetime read
// from NotBefore alone would be spent on a CA a few years old. The
// renewal time is drawn from the window [RenewAfter, RenewAfter +
// (1-RenewAfter)·2/3] of that lifetime, as the kubelet's certificate
// manager draws from 70-90 %. The draw is a hash of the certificate, not
// a random number. A fleet's certificates still spread over the window,
// and an agent that restarts finds the same time again.
//
// A certificate written before its NotBefore is valid from the time it
// was written. Its server judged it valid then, and the agent's clock
// lags the server's.
func CheckCert(certFile, keyFile string, want CertCheck, now time.Time) CertStatus {
	certPEM, err := os.ReadFile(certFile)
	if errors.Is(err, fs.ErrNotExist) {
		return certFailure(CertMissing, certFile, "no such file")
	}
	var written time.Time
	if err == nil {
		var fi fs.FileInfo
		if fi, err = os.Stat(certFile); err == nil {
			written = fi.ModTime()
		}
	}
	if err != nil {
		return certFailure(CertCorrupt, certFile, "%v", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return certFailure(CertMissing, certFile, "its key %s does not exist", keyFile)
	}
	if err != nil {
		return certFailure(CertCorrupt, certFile, "its key: %v", err)
	}
	return checkPEM(certPEM, keyPEM, certFile, keyFile, want, now, written)
}

func certFailure(s CertState, certFile, format string, args ...any) CertStatus {
	return CertStatus{State: s, Err: fmt.Errorf("agent: %s: "+format, append([]any{certFile}, args...)...)}
}

// checkPEM is CheckCert on the files' contents, the certificate written
// at written; the file names are for the errors.
func checkPEM(certPEM, keyPEM []byte, certFile, keyFile string, want CertCheck, now, written time.Time) CertStatus {
	chain, err := parseCertsPEM(certPEM)
	if err != nil {
		return certFailure(CertCorrupt, certFile, "%v", err)
	}
	cert := chain[0]
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return certFailure(CertCorrupt, certFile, "its key %s: %v", keyFile, err)
	}
	if pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key.Public()) {
		return certFailure(CertWrongKey, certFile, "the certificate is not for the key in %s", keyFile)
	}
	if !hasName(cert, want) {
		return certFailure(CertWrongName, certFile, "issued to %q (DNS names %q), want %q", cert.Subject.CommonName, cert.DNSNames, want.Name)
	}
	st := CertStatus{NotAfter: cert.NotAfter, RenewAt: renewAt(cert, want.RenewAfter, written)}
	at := now // the time the chain is checked at
	if now.Before(cert.NotBefore) && !now.Before(written) {
		at = cert.NotBefore // the agent's clock lags its server's
	}
	if now.After(cert.NotAfter) || at.Before(cert.NotBefore) {
		st.State, st.Err = CertExpired, fmt.Errorf("agent: %s: valid from %s to %s, not at %s",
			certFile, cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		return st
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	roots := want.Roots
	if roots == nil {
		roots = x509.NewCertPool() // never the system's
	}
	if want.ChainCA {
		roots = roots.Clone()
		for _, c := range chain[1:] {
			if c.IsCA {
				roots.AddCert(c)
			}
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{want.Usage}}); err != nil {
		st.State, st.Err = CertOtherCA, fmt.Errorf("agent: %s: does not chain to the server's CA: %w", certFile, err)
		return st
	}
	if !now.Before(st.RenewAt) {
		st.State, st.Err = CertRenewDue, fmt.Errorf("agent: %s: renewal due since %s (expires %s)",
			certFile, st.RenewAt.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return st
}

// hasName reports whether cert carries want.Name: as its common name, or
// for a serving certificate as a DNS name.
func hasName(cert *x509.Certificate, want CertCheck) bool {
	if cert.Subject.CommonName == want.Name {
		return true
	}
	return want.Usage == x509.ExtKeyUsageServerAuth && slices.Contains(cert.DNSNames, want.Name)
}

// renewAt is when cert, written at written, is due for renewal: a point
// of the window (see CheckCert) chosen by the hash of the certificate.
func renewAt(cert *x509.Certificate, after float64, written time.Time) time.Time {
	if after <= 0 || after >= 1 {
		after = DefaultRenewAfter
	}
	sum := sha256.Sum256(cert.Raw)
	u := float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53) // [0, 1)
	frac := after + u*(1-after)*2/3
	start := cert.NotBefore
	if written.After(start) && written.Before(cert.NotAfter) {
		start = written
	}
	return start.Add(time.Duration(frac * float64(cert.NotAfter.Sub(start))))
}

// parseCertsPEM parses every CERTIFICATE block of data, in order; other
// blocks are skipped.
func parseCertsPEM(data []byte) ([]*x509.Certificate, error) {
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

// parseKeyPEM parses the first private key block of data: SEC 1 (EC
// PRIVATE KEY, as k3s writes its agents' keys), PKCS #8 or PKCS #1.
func parseKeyPEM(data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM private key")
		}
		var key any
		var err error
		switch b.Type {
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("a %T is not a signing key", key)
		}
		return s, nil
	}
}

// splitCertKeyPEM splits a server's answer to a certificate request into
// its certificates and, from a down-level server that made the key
// itself, the key.
func splitCertKeyPEM(data []byte) (certs, key []byte) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return certs, key
		}
		if strings.Contains(b.Type, "PRIVATE KEY") {
			key = append(key, pem.EncodeToMemory(b)...)
		} else {
			certs = append(certs, pem.EncodeToMemory(b)...)
		}
	}
}
