package main

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// maxCSRSize bounds the body of a certificate request: a CSR is a few
// hundred bytes.
const maxCSRSize = 64 << 10

// csrPublicKey reads the certificate signing request a current k3s agent
// POSTs as the body of its certificate requests (DER; PEM is accepted
// too), checks its signature and that its common name is empty or one of
// names (a kubelet's: node or system:node:<node>), and returns its public
// key. The certificate's names come from the server, not from the
// request: k3s's agent sends a CSR with no subject at all (k3s
// pkg/agent/config/config.go getCSRBytes:
// x509.CreateCertificateRequest(..., &x509.CertificateRequest{}, key)).
// A body that is no CSR is refused: k3s signs a legacy shared key for it
// and sends that key (pkg/server/handlers/handlers.go signAndSend), and
// this server keeps no shared key.
func csrPublicKey(w http.ResponseWriter, r *http.Request, names []string) (crypto.PublicKey, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCSRSize))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("certificate request larger than %d bytes", maxCSRSize)
		}
		return nil, fmt.Errorf("reading the certificate request: %w", err)
	}
	if len(body) == 0 {
		return nil, errors.New("no certificate request in the body")
	}
	if b, _ := pem.Decode(body); b != nil {
		if b.Type != "CERTIFICATE REQUEST" {
			return nil, fmt.Errorf("PEM block %q, want CERTIFICATE REQUEST", b.Type)
		}
		body = b.Bytes
	}
	csr, err := x509.ParseCertificateRequest(body)
	if err != nil {
		return nil, fmt.Errorf("not a certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	if cn := strings.ToLower(csr.Subject.CommonName); cn != "" && !slices.Contains(names, cn) {
		return nil, fmt.Errorf("certificate request for %q, want %s", csr.Subject.CommonName, strings.Join(quoteAll(names), " or "))
	}
	return csr.PublicKey, nil
}

// quoteAll returns each of ss in Go quotes.
func quoteAll(ss []string) []string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return q
}
