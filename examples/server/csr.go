package main

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxCSRSize bounds the body of a certificate request: a CSR is a few
// hundred bytes.
const maxCSRSize = 64 << 10

// csrPublicKey reads the certificate signing request a current k3s agent
// POSTs as the body of its kubelet certificate requests (DER; PEM is
// accepted too), checks its signature and that it names node, as the
// common name node or system:node:<node>, and returns its public key. The
// certificate's names come from the server, not from the request.
func csrPublicKey(w http.ResponseWriter, r *http.Request, node string) (crypto.PublicKey, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCSRSize))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("certificate request larger than %d bytes", maxCSRSize)
		}
		return nil, fmt.Errorf("reading the certificate request: %w", err)
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
	if cn := strings.ToLower(csr.Subject.CommonName); cn != node && cn != "system:node:"+node {
		return nil, fmt.Errorf("certificate request for %q, want %q or %q", csr.Subject.CommonName, node, "system:node:"+node)
	}
	return csr.PublicKey, nil
}
