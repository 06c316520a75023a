// Command server is a small k3s/RKE2-style supervisor built on nodepass:
// an HTTPS server that checks the join token (basic auth, with
// -token-file) and the node-password headers with httpauth over a
// verify.Verifier, hands out the certificates a k3s agent asks for,
// signed by CAs it makes (kept in -data-dir, shared by the servers given
// the same one), and exposes Prometheus metrics.
//
//	go run . -addr 127.0.0.1:9345 -ca-file ca.crt -token-file token   # one server, memory store
//	go run . -data-dir /tmp/c -store dir -token-file token ...        # servers on one machine sharing files
//	go run . -store kube -kubeconfig ~/.kube/config -program rke2     # a cluster's secrets
//
// The node password hashes live in one of three stores. -store memory
// keeps them in the process: no other server sees them, so a server with
// it refuses to start beside another on its -data-dir or with -apiservers
// naming other servers. -store dir keeps one file per node in
// -store-dir (default -data-dir/node-passwords), which the servers of
// one machine share as k3s's servers share their Secrets. -store kube
// keeps them in Secrets, as k3s and RKE2 do.
//
// Routes (<prog> is the -program flag, k3s by default):
//
//	GET  /cacerts                         the server CA bundle (unauthenticated, as in k3s)
//	GET  /ping                            "pong" (unauthenticated, for load balancers' health checks)
//	POST /v1-<prog>/serving-kubelet.crt   node headers checked; body: a CSR naming the node; PEM: certificate, kubelet CA bundle
//	POST /v1-<prog>/client-kubelet.crt    the same, for the kubelet's client certificate (client CA)
//	GET  /v1-<prog>/serving-kubelet.crt   node headers checked (older agents); PEM: certificate, CA bundle, key
//	GET  /v1-<prog>/client-kubelet.crt    the same, for the kubelet's client certificate
//	GET  /metrics                         Prometheus metrics; behind the join token with -token-file
//
// and, with -token-file only, behind the join token:
//
//	GET  /v1-<prog>/config                the agents' configuration (SupervisorPort, HTTPSPort: JSON)
//	GET  /v1-<prog>/client-ca.crt         the client CA bundle
//	GET  /v1-<prog>/server-ca.crt         the server CA bundle
//	GET  /v1-<prog>/apiservers            the API server endpoints (-apiservers), JSON
//	POST /v1-<prog>/client-kube-proxy.crt       a CSR for system:kube-proxy; PEM: certificate, client CA bundle
//	POST /v1-<prog>/client-<prog>-controller.crt  the same for system:<prog>-controller
//
// Without -token-file, /metrics is open: there is no credential to ask
// for. With it, the kubelet routes check the token before the node
// headers. The node headers are K3s-Node-Name, K3s-Node-Password and
// K3s-Node-Ip (Rke2-... with -program rke2). The serving certificate has
// the node name as its common name and DNS name, and the addresses of the
// Node-Ip header (a comma-separated list, at most 8, none of them the
// server's own, loopback or unspecified) as IP SANs; it is signed by a CA
// of its own that nobody trusts to be the server. Current k3s agents POST
// a certificate signing request (DER; PEM is accepted too) with no
// subject, and keep their key; a request that has a common name must name
// the node (or system:node:<name>). The certificate's names come from the
// server either way.
//
// The server behaves as a k3s or RKE2 server does where an agent can
// tell. Certificates are valid for a year from max(now - 1 h, the CA's
// NotBefore), as rancher/dynamiclistener's CalculateNotBefore makes
// them; -not-before ca gives older releases' rule, and -ca-age-years
// and -ca-chain make CAs years old or intermediates of a root (the
// kubelet CA of a root of its own, which no agent pins). With
// -program rke2, /apiservers lists API servers on 6443 (-apiserver-port)
// beside the supervisor's own port. -no-datastore makes /apiservers
// answer [] after 5 s, as k3s does when its datastore does not answer.
// The "server: ready" log line gives the CA hash a K10 token pins.
//
// The log goes to stderr; stdout has the line "listening on
// https://<addr>". Each refused join token (401), refused node password
// (403), invalid node name or password and refused certificate request
// (400) and new node (with its first certificate) is logged with the
// node or user, the remote address and the reason, never a password or
// token. Each kind of line has its own
// budget, 20 lines at once and one per 3 s after; a line counts those
// held back. -h
// and -version print to stdout and exit 0; a wrong flag or value prints
// one line and exits 2; a failure prints one line and exits 1.
//
// SIGINT or SIGTERM shuts the server down gracefully: requests in flight
// are answered, then the Verifier and the Store are closed.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodepass/nodepass/examples/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, "server", os.Args[1:], os.Stdout, os.Stderr, run)
	stop()
	os.Exit(code)
}

// run parses args, serves until ctx ends, then shuts down gracefully. It
// writes the line "listening on https://<addr>" to stdout once it
// accepts connections, and its log to stderr. A wrong flag or value is a
// cli.UsageError.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	unlock, err := lockServers(cfg)
	if err != nil {
		return err
	}
	defer unlock()
	log := newLogger(stderr, cfg.verbose)
	store, closeStore, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()
	return serve(ctx, cfg, store, log, stdout)
}
