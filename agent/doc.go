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
// The files are where a k3s agent keeps them, each written atomically
// with mode 0600. DataDir/agent holds client-ca.crt, server-ca.crt, and
// the certificate and key of serving-kubelet, client-kubelet,
// client-kube-proxy and client-k3s-controller. The node password is in
// /etc/rancher/node/password. The servers known are in
// DataDir/agent/etc/k3s-agent-load-balancer.json, the file k3s's load
// balancer keeps.
//
// # An attempt
//
// An attempt asks what k3s's join asks (pkg/agent/config). GET /cacerts
// comes first, while the servers' CA is not known. GET /v1-k3s/config,
// client-ca.crt and server-ca.crt follow, with basic auth as the user
// "node". Then each certificate that is not valid on disk is requested,
// a POST of a signing request to /v1-k3s/<name>.crt. The serving-kubelet
// and client-kubelet requests carry the node headers (K3s-Node-Name,
// K3s-Node-Password, K3s-Node-Ip) and cost a k3s server scrypt. A retry
// within one Get asks only for what is still missing.
//
// A certificate on disk is valid if it would pass where it is used now
// (CertRule): against client-ca.crt or server-ca.crt as the servers send
// them now, and for the serving certificate, with every address the node
// has now as an IP SAN. The addresses are Options.NodeIP, or the default
// routes' source addresses, found at each attempt. A node with none
// (early in a boot) fails the attempt and the next one looks again, as
// k3s's agent does.
//
// The token's CA hash pins the servers' CA. The Client trusts what the
// hash covers and nothing else that the CA bundle carries, but for the
// roots of a CA rotation (below).
//
// # A CA rotation
//
// k3s's rolling rotation (contrib/util/rotate-default-ca-certs.sh, then
// `k3s certificate rotate-ca`) serves the bundle [new intermediate, new
// root, new root cross-signed by the old root, old root]. A restarted
// server's token pins the new root. Nodes get that token and restart,
// servers first. Until every server has restarted, those that have not
// present certificates of the old root. The bundle alone cannot tell the
// old root from an attacker's CA: anyone can cross-sign the new root,
// whose public key is public. What sets the old root apart is that the
// agent trusted it before. So the Client keeps trusting the roots of its
// server-ca.crt on disk while the servers' new bundle still carries them,
// and no other root. It keeps them in
// DataDir/agent/etc/server-ca-carried-roots.crt across restarts, and
// drops them once the servers' bundle no longer carries them. k3s's agent
// trusts every certificate of the bundle instead. A first join during a
// rotation has no earlier roots: it reaches the restarted servers alone.
//
// The script also prints an "updated agent token" whose hash is the new
// intermediate's. k3s's hashCA (pkg/clientaccess/token.go) hashes the
// root a bundle of several certificates leads to, never its first
// certificate, so k3s's agent refuses that token, and so does the Client.
// The token that works is the one a restarted server writes at start
// (<data-dir>/server/token or agent-token: pkg/server/server.go
// printTokens).
//
// # What each piece replaces in k3s
//
//   - [Client.Get] replaces config.Get, which reruns about ten requests
//     on each retry and requests all four certificates on every start.
//   - [Backoff] replaces a flat wait of 5 to 10 s that ignores Retry-After.
//   - The Client's rotation of servers replaces the load balancer's one
//     server, which k3s keeps while it accepts connections, answering or not.
//   - [CertRule] is the kubelet's check of its certificate and its
//     renewal window, for the agent's four certificates.
//   - One connection per server, over HTTP/2, replaces a TLS handshake
//     per request.
//
// # Failover
//
// Each request starts at the next server in round-robin order. A
// node-password request starts at the server that accepted the last one
// instead, which has the password in its cache. A request moves on at
// once after a connection failure, a timeout, a 429 or a 5xx. That server
// is then left out for RecoveryDelay, or for its Retry-After. The attempt
// fails when every server has failed the request. The next attempt waits
// the backoff, and at least what a server asked for. The errors of
// client.go (ErrTokenRejected, ErrCARejected, ErrNodePasswordRejected,
// ErrRefused) end the attempt, and the next one waits the backoff's cap.
// A 401 or a CA that does not match the token ends it only from the
// configured server. From a server learnt, it may be another cluster's,
// or an API server: the request moves on.
//
// A server's failure is logged at INFO when it starts, and its recovery
// when it answers again; while it keeps failing, each attempt logs at
// DEBUG. So a server down for minutes logs two lines, not two per attempt.
//
// Renew learns the servers from GET /v1-k3s/apiservers, once an hour at
// most, from one server. On RKE2 that lists the API servers, and the
// Client uses their hosts with the supervisor's port.
//
// # Defaults
//
//   - Backoff.Base 1 s: a transient failure costs an agent under a second.
//   - Backoff.Cap 15 s: a wait at the cap averages 7.5 s, as k3s's 5 to 10 s do.
//   - HeaderTimeout 5 s, half of k3s's client timeout. A server that
//     accepts and never answers costs an agent 5 s once per RecoveryDelay.
//     A node-password request to a server that has answered waits the
//     whole RequestTimeout, since the server may hold it while it
//     verifies the password.
//   - RequestTimeout 10 s, k3s's client timeout.
//   - RecoveryDelay 30 s, longer than a herd of 320 nodes takes to join
//     two servers (BENCHMARKS.md). A restarted server is used again
//     within half a minute.
//   - RenewAfter 0.7, the kubelet's window of 70 to 90 % of a lifetime.
package agent
