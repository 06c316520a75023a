package bench

import (
	"context"
	"net/http"
	"time"
)

// A k3s agent gets its configuration from its server in attempts
// (pkg/agent/config and pkg/clientaccess in k3s): each attempt runs the
// whole sequence of requests below again, every request over a new TLS
// connection (its HTTP client disables keep-alives) within a 10 s client
// timeout, and ends at the first request that fails; the agent then
// waits 5-10 s and starts over (Scenario.Agent). Two of the requests carry
// the node's password: both ask for a kubelet certificate, each with a
// certificate signing request in a POST.

// step is one request of an attempt.
type step uint8

const (
	// stepCACertsProbe is GET /cacerts trusting only the host's roots,
	// which do not hold the cluster's CA: expected to fail at the TLS
	// handshake. When it succeeds, the next two steps are skipped.
	stepCACertsProbe step = iota
	// stepCACertsInsecure is GET /cacerts without checking the server's
	// certificate: how the agent fetches the CA.
	stepCACertsInsecure
	// stepCACerts is GET /cacerts again, trusting the CA fetched.
	stepCACerts
	// stepConfig is GET /v1-k3s/config.
	stepConfig
	// stepServingCert is POST /v1-k3s/serving-kubelet.crt with a CSR and
	// the node's name, password and IP headers.
	stepServingCert
	// stepClientCert is POST /v1-k3s/client-kubelet.crt, the same for the
	// kubelet's client certificate.
	stepClientCert
)

// The routes of a k3s supervisor that an attempt asks for.
const (
	pathCACerts     = "/cacerts"
	pathConfig      = "/v1-k3s/config"
	pathServingCert = "/v1-k3s/serving-kubelet.crt"
	pathClientCert  = "/v1-k3s/client-kubelet.crt"
)

// httpSteps is an attempt over HTTPS; inprocSteps the part of it that
// reaches a model (the password-guarded requests), in-process, where
// there is no network.
var (
	httpSteps   = []step{stepCACertsProbe, stepCACertsInsecure, stepCACerts, stepConfig, stepServingCert, stepClientCert}
	inprocSteps = []step{stepServingCert, stepClientCert}
)

// guarded reports whether s carries the node's password.
func (s step) guarded() bool { return s == stepServingCert || s == stepClientCert }

// method is s's HTTP method: a POST, which k3s's in-flight filter counts
// as mutating, for the certificate requests; GET for the others.
func (s step) method() string {
	if s.guarded() {
		return http.MethodPost
	}
	return http.MethodGet
}

func (s step) path() string {
	switch s {
	case stepConfig:
		return pathConfig
	case stepServingCert:
		return pathServingCert
	case stepClientCert:
		return pathClientCert
	}
	return pathCACerts
}

// attempt runs one attempt of node n's agent (its own client) on server:
// t's steps in order, each within timeout, until one fails. It returns
// the outcome of the request that ended the attempt (status 200 when every
// request succeeded) with took and guardedAt set, and how many requests
// it sent and TLS handshakes they started. A probe of /cacerts that
// fails does not end the attempt, unless ctx has ended.
func attempt(ctx context.Context, t target, timeout time.Duration, client, server int, n Node) (o outcome, requests, handshakes int) {
	var guardedAt time.Time
	steps := t.steps()
	for i := 0; i < len(steps); i++ {
		s := steps[i]
		sent := time.Now()
		if s.guarded() && guardedAt.IsZero() {
			guardedAt = sent
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		o = t.do(rctx, client, server, n, s)
		cancel()
		requests++
		handshakes += o.handshakes
		o.took, o.guardedAt = time.Since(sent), guardedAt
		switch {
		case s == stepCACertsProbe && o.status == http.StatusOK:
			// The host's roots trust the server: no CA to fetch.
			for i+1 < len(steps) && (steps[i+1] == stepCACertsInsecure || steps[i+1] == stepCACerts) {
				i++
			}
		case s == stepCACertsProbe && ctx.Err() == nil:
			// Expected: the cluster's CA is not among the host's roots.
		case o.status != http.StatusOK:
			return o, requests, handshakes
		}
	}
	return outcome{status: http.StatusOK, took: o.took, guardedAt: guardedAt}, requests, handshakes
}
