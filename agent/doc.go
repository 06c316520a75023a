// Package agent is the agent side of a k3s or RKE2 node join. Its Client
// gets a node's certificates from the servers as a k3s agent does. It
// backs off with jitter, moves each request past a server that fails or
// hangs, and keeps the certificates on disk that are still valid.
//
//	c, err := agent.New(&agent.Options{
//		Server:   "https://10.0.0.1:6443",
//		Token:    token, // K10<CA hash>::server:<secret>, from a server's node-token file
//		NodeName: "worker-1",
//	})
//	res, err := c.Get(ctx) // returns once the four certificates are valid on disk
//	go c.Renew(ctx)        // keeps them so
//
// The files are where a k3s agent keeps them, written atomically with
// mode 0600. DataDir/agent holds client-ca.crt, server-ca.crt and the
// certificate and key of serving-kubelet, client-kubelet,
// client-kube-proxy and client-k3s-controller.
//
// # An attempt
//
// An attempt makes k3s's requests (pkg/agent/config). GET /cacerts comes
// first while the servers' CA is not known. GET /v1-k3s/config,
// client-ca.crt and server-ca.crt follow, with the token. Then each
// certificate not valid on disk is asked for with a signing request.
// The serving-kubelet and client-kubelet requests carry the node's name
// and password, which cost a k3s server scrypt. A retry within one Get
// asks only for what is missing. The connections present client-kubelet
// while it is valid, as k3s's do.
//
// A certificate on disk is kept while [CertRule] passes it: against the
// CA as the servers send it now, with every address the node has now. A
// certificate just issued is used as it comes, as k3s uses it; the next
// start decides again.
//
// The token's CA hash pins the servers' CA. The Client trusts what the
// hash covers and no other certificate of the bundle. During k3s's
// rolling CA rotation it also trusts the roots it trusted before, while a
// server the pin proves sends a bundle that carries them.
//
// # Failover
//
// Each request starts at the next server in round-robin order. It moves
// on at once after a connection failure, a timeout, a 429 or a 5xx, and
// that server is left out for RecoveryDelay or its Retry-After. When
// every server has failed, the next attempt waits the [Backoff], and at
// least what a server asked for. The sentinel errors end an attempt, and
// the next one waits the backoff's cap. A 401 or a CA that does not match
// the token ends it only from the configured server; from another, the
// request moves on. [Client.Renew] learns the servers from GET
// /v1-k3s/apiservers, once an hour at most.
package agent
