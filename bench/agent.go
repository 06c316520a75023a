package bench

import (
	"context"
	"net/http"
	"time"
)

// A k3s agent gets its configuration from its server in attempts (k3s
// pkg/agent/config get() and pkg/clientaccess): each attempt runs the
// whole sequence of requests below again, each over a new TLS connection
// within a 10 s client timeout, and ends at the first that fails; the
// agent then waits 5-10 s (Scenario.Agent). Every request but /cacerts
// carries the join token as basic auth ("node:<password>"), which the
// server checks first; the two kubelet certificate requests also carry
// the node's password. The four certificate requests are POSTs of a CSR.

// step is one request of an attempt.
type step uint8

const (
	// stepCACertsProbe is GET /cacerts trusting only the host's roots,
	// which do not hold the cluster's CA: expected to fail at the TLS
	// handshake. When it succeeds, the next two steps are skipped.
	stepCACertsProbe    step = iota
	stepCACertsInsecure      // GET /cacerts without checking the server: how the agent fetches the CA
	stepCACerts              // GET /cacerts again, trusting the CA fetched
	stepConfig               // GET /v1-k3s/config
	stepClientCA             // GET /v1-k3s/client-ca.crt
	stepServerCA             // GET /v1-k3s/server-ca.crt
	stepServingCert          // POST /v1-k3s/serving-kubelet.crt with the node's name, password and IP
	stepClientCert           // POST /v1-k3s/client-kubelet.crt, the same
	stepProxyCert            // POST /v1-k3s/client-kube-proxy.crt
	stepControllerCert       // POST /v1-k3s/client-k3s-controller.crt
)

// stepPaths are the routes of a k3s supervisor an attempt asks for, by
// step.
var stepPaths = [...]string{stepCACertsProbe: "/cacerts", stepCACertsInsecure: "/cacerts", stepCACerts: "/cacerts",
	stepConfig: "/v1-k3s/config", stepClientCA: "/v1-k3s/client-ca.crt", stepServerCA: "/v1-k3s/server-ca.crt",
	stepServingCert: "/v1-k3s/serving-kubelet.crt", stepClientCert: "/v1-k3s/client-kubelet.crt",
	stepProxyCert: "/v1-k3s/client-kube-proxy.crt", stepControllerCert: "/v1-k3s/client-k3s-controller.crt"}

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

func (s step) path() string { return stepPaths[s] }

// attempt runs one attempt of node n's agent (its own client) on server,
// with the join token's password token: t's steps in order, each within
// timeout, until one fails. It returns the outcome of the request that
// ended the attempt (status 200 when every request succeeded) with took
// and guardedAt set, and how many requests it sent and TLS handshakes
// they started. A probe of /cacerts that fails does not end the attempt,
// unless ctx has ended.
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
