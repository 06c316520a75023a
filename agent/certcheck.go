package agent

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nodepass/nodepass/internal/k3stoken"
)

// DefaultRenewAfter is where a certificate's renewal window opens, as a
// fraction of its lifetime: the kubelet's.
const DefaultRenewAfter = 0.7

// CertRule is what a certificate on disk must satisfy to be kept: pass
// where it is used now. It must be for the key beside it, carry Name and
// every address of IPs, chain to Roots for Usage, and be within its
// validity and before its renewal time. Roots are the certificates of the
// CA file its consumer checks it against, as the file is now.
// CertRule.Check's State says what to do: keep a CertValid certificate;
// use a CertRenewDue one and ask for a new one; ask for a new one before
// using any other.
type CertRule struct {
	// Name is the common name, or for a serving certificate (Usage
	// ExtKeyUsageServerAuth) a DNS name.
	Name string
	// IPs are addresses it must carry as IP SANs: for a serving
	// certificate, every address the node has now.
	IPs   []net.IP
	Usage x509.ExtKeyUsage // the extended key usage the chain must allow
	Roots *x509.CertPool   // the CA the certificate must chain to, nil for none
	// RenewAfter opens the renewal window. It closes two thirds of the way
	// from there to NotAfter. Default DefaultRenewAfter.
	RenewAfter float64

	// carriedFor, if not zero, is the SHA-256 of a certificate file that
	// may also chain to a CA it carries after the certificate. The Client
	// sets it for a serving certificate (see Client.rule).
	carriedFor [sha256.Size]byte
	// issued checks a certificate the server has just issued: its name,
	// addresses and CA are not checked (see Client.requestCert).
	issued bool
}

// CertVerdict is what CertRule.Check found of a certificate.
type CertVerdict struct {
	State CertState
	// RenewAt is when the certificate is due for renewal, NotAfter when it
	// expires. Both are zero unless it parsed and had the key and name.
	RenewAt, NotAfter time.Time
	Err               error // what is wrong, naming the file; nil for CertValid
}

// CertState is a CertVerdict's finding.
type CertState int

const (
	CertValid     CertState = iota // valid, not due for renewal
	CertRenewDue                   // valid and past its renewal time
	CertMissing                    // no certificate or no key file
	CertCorrupt                    // the certificate or the key does not parse
	CertWrongKey                   // not for the key beside it
	CertWrongName                  // not for the name, or an address, wanted
	CertOtherCA                    // does not chain to the CA given
	CertExpired                    // past NotAfter, or before NotBefore and the time written
)

var certStateNames = [...]string{"valid", "renewal due", "missing", "corrupt", "wrong key", "wrong name", "another CA", "expired"}

func (s CertState) String() string {
	if s < 0 || int(s) >= len(certStateNames) {
		return fmt.Sprintf("CertState(%d)", int(s))
	}
	return certStateNames[s]
}

// Usable reports whether s is CertValid or CertRenewDue.
func (s CertState) Usable() bool { return s == CertValid || s == CertRenewDue }

// Check checks the PEM certificate chain in certFile and its key in
// keyFile against r at time now (see CertRule).
//
// The certificate's lifetime counts from the later of its NotBefore and
// the time certFile was written. Older k3s servers set NotBefore to the
// CA's, and a lifetime counted from there would be spent on an old CA.
// The renewal time is a point of the window [RenewAfter, RenewAfter +
// (1-RenewAfter)·2/3] of that lifetime, chosen by a hash of the
// certificate. A fleet spreads over the window, and a restart finds the
// same time again.
//
// A certificate written before its NotBefore is valid from when it was
// written: the agent's clock lags its server's.
func (r CertRule) Check(certFile, keyFile string, now time.Time) CertVerdict {
	certPEM, written, err := readWithTime(certFile)
	if errors.Is(err, fs.ErrNotExist) {
		return certFailure(CertMissing, certFile, "no such file")
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
	return r.checkPEM(certPEM, keyPEM, certFile, keyFile, now, written)
}

// readWithTime reads the file at path and when it was last written, from
// one open file: the time belongs to the bytes read.
func readWithTime(path string) ([]byte, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	b, err := io.ReadAll(f)
	return b, fi.ModTime(), err
}

func certFailure(s CertState, certFile, format string, args ...any) CertVerdict {
	return CertVerdict{State: s, Err: fmt.Errorf("agent: %s: "+format, append([]any{certFile}, args...)...)}
}

// checkPEM is Check on the files' contents, the certificate written at
// written; the file names are for the errors.
func (r CertRule) checkPEM(certPEM, keyPEM []byte, certFile, keyFile string, now, written time.Time) CertVerdict {
	chain, err := k3stoken.ParseCerts(certPEM)
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
	if !r.issued && !r.hasName(cert) {
		return certFailure(CertWrongName, certFile, "issued to %q (DNS names %q), want %q", cert.Subject.CommonName, cert.DNSNames, r.Name)
	}
	for _, ip := range r.IPs {
		if !r.issued && !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return certFailure(CertWrongName, certFile, "does not name the address %s (it names %v)", ip, cert.IPAddresses)
		}
	}
	st := CertVerdict{NotAfter: cert.NotAfter, RenewAt: renewAt(cert, r.RenewAfter, written)}
	at := now // the time the chain is checked at
	if now.Before(cert.NotBefore) && !now.Before(written) {
		at = cert.NotBefore // the agent's clock lags its server's
	}
	if now.After(cert.NotAfter) || at.Before(cert.NotBefore) {
		st.State, st.Err = CertExpired, fmt.Errorf("agent: %s: valid from %s to %s, not at %s",
			certFile, cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		return st
	}
	if r.issued {
		return st.due(now, certFile, cert)
	}
	inter := certPool(chain[1:])
	roots := r.Roots
	if roots == nil {
		roots = x509.NewCertPool() // never the system's
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{r.Usage}}
	_, err = cert.Verify(opts)
	if err != nil && r.carriedFor != [sha256.Size]byte{} && sha256.Sum256(certPEM) == r.carriedFor {
		opts.Roots = x509.NewCertPool()
		for _, c := range chain[1:] {
			if c.IsCA {
				opts.Roots.AddCert(c)
			}
		}
		if _, cerr := cert.Verify(opts); cerr == nil {
			err = nil
		}
	}
	if err != nil {
		st.State, st.Err = CertOtherCA, fmt.Errorf("agent: %s: does not chain to the server's CA: %w", certFile, err)
		return st
	}
	return st.due(now, certFile, cert)
}

// due is v, valid so far, due for renewal if it is at now.
func (v CertVerdict) due(now time.Time, certFile string, cert *x509.Certificate) CertVerdict {
	if !now.Before(v.RenewAt) {
		v.State, v.Err = CertRenewDue, fmt.Errorf("agent: %s: renewal due since %s (expires %s)",
			certFile, v.RenewAt.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return v
}

// hasName reports whether cert carries r.Name: as its common name, or
// for a serving certificate as a DNS name.
func (r CertRule) hasName(cert *x509.Certificate) bool {
	if cert.Subject.CommonName == r.Name {
		return true
	}
	return r.Usage == x509.ExtKeyUsageServerAuth && slices.Contains(cert.DNSNames, r.Name)
}

// renewAt is when cert, written at written, is due for renewal: a point
// of the window (see CertRule.Check) chosen by the hash of the certificate.
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
