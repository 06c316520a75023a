package bench

import (
	"context"
	"net/http"
	"time"
)

// A k3s agent gets its configuration from its server in attempts
// (pkg/agent/config get() and pkg/clientaccess in k3s): each attempt runs
// the whole sequence of requests below again, every request over a new
// TLS connection (its HTTP client disables keep-alives) within a 10 s
// client timeout, and ends at the first request that fails; the agent
// then waits 5-10 s and starts over (Scenario.Agent). Every request but
// /cacerts carries the join token as basic auth ("node:<password>"),
// which the server checks first (steps marked authed); two of them also
// carry the node's password (guarded): both ask for a kubelet
// certificate. The four certificate requests are POSTs of a certificate
// signing request.

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
	// stepClientCA and stepServerCA are GET /v1-k3s/client-ca.crt and
	// /v1-k3s/server-ca.crt.
	stepClientCA
	stepServerCA
	// stepServingCert is POST /v1-k3s/serving-kubelet.crt with a CSR and
	// the node's name, password and IP headers.
	stepServingCert
	// stepClientCert is POST /v1-k3s/client-kubelet.crt, the same for the
	// kubelet's client certificate.
	stepClientCert
	// stepProxyCert and stepControllerCert are POST
	// /v1-k3s/client-kube-proxy.crt and client-k3s-controller.crt with a
	// CSR, no node headers.
	stepProxyCert
	stepControllerCert
)

// The routes of a k3s supervisor that an attempt asks for.
const (
	pathCACerts        = "/cacerts"
	pathConfig         = "/v1-k3s/config"
	pathClientCA       = "/v1-k3s/client-ca.crt"
	pathServerCA       = "/v1-k3s/server-ca.crt"
	pathServingCert    = "/v1-k3s/serving-kubelet.crt"
	pathClientCert     = "/v1-k3s/client-kubelet.crt"
	pathProxyCert      = "/v1-k3s/client-kube-proxy.crt"
	pathControllerCert = "/v1-k3s/client-k3s-controller.crt"
	// Asked by nodepass's agent.Client, and its load balancer's probe.
	pathAPIServers = "/v1-k3s/apiservers"
	pathPing       = "/ping"
)

// tokenUser is the basic-auth user of an agent's join token.
const tokenUser = "node"

// httpSteps is an attempt over HTTPS; inprocSteps the part of it that
// reaches a model (the authenticated requests), in-process, where there
// is no network.
var (
	httpSteps = []step{stepCACertsProbe, stepCACertsInsecure, stepCACerts, stepConfig, stepClientCA, stepServerCA,
		stepServingCert, stepClientCert, stepProxyCert, stepControllerCert}
	inprocSteps = httpSteps[3:]
)

// authed reports whether s carries the join token: all but /cacerts.
func (s step) authed() bool { return s >= stepConfig }

// guarded reports whether s carries the node's password.
func (s step) guarded() bool { return s == stepServingCert || s == stepClientCert }

// method is s's HTTP method: a POST, which k3s's in-flight filter counts
// as mutating, for the certificate requests; GET for the others.
func (s step) method() string {
	if s >= stepServingCert {
		return http.MethodPost
	}
	return http.MethodGet
}

func (s step) path() string {
	switch s {
	case stepConfig:
		return pathConfig
	case stepClientCA:
		return pathClientCA
	case stepServerCA:
		return pathServerCA
	case stepServingCert:
		return pathServingCert
	case stepClientCert:
		return pathClientCert
	case stepProxyCert:
		return pathProxyCert
	case stepControllerCert:
		return pathControllerCert
	}
	return pathCACerts
}

// attempt runs one attempt of node n's agent (its own client) on server,
// with the join token's password token: t's steps in order, each within
// timeout, until one fails. It returns
// the outcome of the request that ended the attempt (status 200 when every
// request succeeded) with took and guardedAt set, and how many requests
// it sent and TLS handshakes they started. A probe of /cacerts that
// fails does not end the attempt, unless ctx has ended.
func attempt(ctx context.Context, t target, timeout time.Duration, client, server int, n Node, token string) (o outcome, requests, handshakes int) {
	var guardedAt time.Time
	steps := t.steps()
	for i := 0; i < len(steps); i++ {
		s := steps[i]
		sent := time.Now()
		if s.guarded() && guardedAt.IsZero() {
			guardedAt = sent
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		o = t.do(rctx, client, server, n, s, token)
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
