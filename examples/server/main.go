// Command server is a small k3s/RKE2-style supervisor built on nodepass:
// an HTTPS server that checks the join token (basic auth, with
// -token-file) and the node-password headers with httpauth over a
// verify.Verifier, stores the hashes in Kubernetes Secrets (kube.Store)
// or in memory, hands out the certificates a k3s agent asks for, signed
// by CAs it makes (kept in -data-dir, shared by the servers given the
// same one), and exposes Prometheus metrics.
//
//	go run . -addr 127.0.0.1:9345 -ca-file ca.crt -token-file token   # memory store
//	go run . -store kube -kubeconfig ~/.kube/config -program rke2     # a cluster's secrets
//
// Routes (<prog> is the -program flag, k3s by default):
//
//	GET  /cacerts                         the server CA (unauthenticated, as in k3s)
//	GET  /ping                            "pong" (unauthenticated, for load balancers' health checks)
//	POST /v1-<prog>/serving-kubelet.crt   node headers checked; body: a CSR naming the node; PEM: certificate, kubelet CA
//	POST /v1-<prog>/client-kubelet.crt    the same, for the kubelet's client certificate (client CA)
//	GET  /v1-<prog>/serving-kubelet.crt   node headers checked (older agents); PEM: certificate, CA, key
//	GET  /v1-<prog>/client-kubelet.crt    the same, for the kubelet's client certificate
//	GET  /metrics                         Prometheus metrics
//
// and, with -token-file only, behind the join token:
//
//	GET  /v1-<prog>/config                the agents' configuration (a small JSON)
//	GET  /v1-<prog>/client-ca.crt         the client CA
//	GET  /v1-<prog>/server-ca.crt         the server CA
//	GET  /v1-<prog>/apiservers            the servers agents may use (-apiservers), JSON
//	POST /v1-<prog>/client-kube-proxy.crt       a CSR for system:kube-proxy; PEM: certificate, client CA
//	POST /v1-<prog>/client-<prog>-controller.crt  the same for system:<prog>-controller
//
// With -token-file, the kubelet routes check the token before the node
// headers. The node headers are K3s-Node-Name, K3s-Node-Password and
// K3s-Node-Ip (Rke2-... with -program rke2). The serving certificate has
// the node name as its common name and DNS name, and the addresses of the
// Node-Ip header (a comma-separated list, at most 8, none of them the
// server's own, loopback or unspecified) as IP SANs; it is signed by a CA
// of its own that nobody trusts to be the server. Current k3s agents POST
// a certificate signing request (DER; PEM is accepted too) whose common
// name is the node's name or system:node:<name>, and keep their key; the
// certificate's names come from the server either way.
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
