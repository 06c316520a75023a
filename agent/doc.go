// Package agent is the agent side of a k3s or RKE2 node join: a Client
// that gets a node's certificates from its servers as a k3s agent does,
// but backs off with jitter, moves each request past a server that fails
// or hangs, and keeps the certificates on disk that are still valid.
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
// (a temporary file, fsync, rename) with mode 0600: DataDir/agent holds
// client-ca.crt, server-ca.crt, and the certificate and key of
// serving-kubelet, client-kubelet, client-kube-proxy and
// client-k3s-controller; the node password is /etc/rancher/node/password;
// the servers known are in DataDir/agent/etc/k3s-agent-load-balancer.json,
// the file k3s's load balancer keeps (so either reads the other's).
//
// # An attempt
//
// One attempt asks, in order: GET /cacerts (only while the servers' CA is
// unknown: on a first join without server-ca.crt matching the token's CA
// hash), then with basic auth as the user "node" and the token's password,
// GET /v1-k3s/config, GET /v1-k3s/apiservers, GET /v1-k3s/client-ca.crt,
// GET /v1-k3s/server-ca.crt, and a POST of a certificate signing request
// to /v1-k3s/<name>.crt for each certificate that is not valid on disk.
// The serving-kubelet and client-kubelet requests carry the node headers
// (K3s-Node-Name, K3s-Node-Password, K3s-Node-Ip) and cost a k3s server
// scrypt; the CSRs are made from the keys the agent keeps (ECDSA P-256,
// made once). A retry within one Get asks only for what is still missing.
//
// # What each piece replaces in k3s
//
// Read from k3s at 469d009f (pkg/agent/config, pkg/clientaccess,
// pkg/agent/loadbalancer):
//
//   - [Client.Get] replaces config.Get and get(): k3s reruns every request
//     of an attempt (about ten) on each retry and requests all four
//     certificates on every start, valid or not. Here an attempt skips what
//     is valid, and a failing request fails over before the attempt fails.
//   - [Backoff] replaces wait.JitterUntilWithContext(get, 5 s, 1.0): a flat
//     5-10 s that never grows and ignores Retry-After.
//   - [Servers] replaces, for these requests, the supervisor load
//     balancer's choice of one server, which it keeps while the server
//     accepts connections, answering or not (the incident's agents never
//     tried another server).
//   - [CheckCert] has no k3s counterpart: it is the kubelet's
//     isClientConfigStillValid and its certificate manager's renewal
//     window, for the agent's four certificates.
//   - The connections replace clientaccess.GetHTTPClient, which disables
//     keep-alives: a k3s attempt makes a TLS handshake per request, ten;
//     here an attempt makes one per server it uses, over HTTP/2, and a
//     new connection resumes the last one's TLS session.
//
// # Failover
//
// Each request starts at the next server in round-robin order ([Servers]),
// but for a node-password request, which starts at the server that
// accepted the last one: a nodepass server has the password in its cache
// then, and checks it again without scrypt (a cold join costs the servers
// one scrypt, not two). A request moves to the next server at once on a
// connection failure, a
// timeout, a 429, a 503 or another 5xx; the server is then left out for
// RecoveryDelay, or for its Retry-After (up to the backoff's cap) on 429
// and 503. The attempt fails only when every server has failed the
// request; the wait before the next one is the backoff's, at least what a
// server asked for with Retry-After (when every server has failed, the one
// due back first is asked again then: an agent whose one server is a load
// balancer's address is not kept waiting its RecoveryDelay). A 401 (the token) or 403 (the node's password: the error names the
// node and the password file) ends the attempt, and the next waits at
// least the backoff's cap: these do not mend by asking again soon.
//
// # Defaults
//
//   - Backoff.Base 1 s: a transient failure (a server restarting, a
//     dropped connection) costs an agent under a second, and a herd's first
//     retries spread over a second.
//   - Backoff.Cap 15 s: a wait at the cap averages 7.5 s, what k3s's flat
//     5-10 s averages, so a herd that has backed off all the way asks no
//     more often than k3s's agents, and before that asks sooner.
//   - HeaderTimeout 5 s: a live server answers the requests that cost no
//     scrypt in milliseconds, even under a herd; half of k3s's 10 s client
//     timeout, so a server that accepts and never answers costs an agent 5 s
//     once per RecoveryDelay instead of 10 s on every attempt. The two
//     node-password requests to a server that has answered wait the whole
//     RequestTimeout instead: a server may hold them while it verifies the
//     password (nodepass's Verifier, up to 9.5 s), and leaving then would
//     start the same scrypt on the next server.
//   - RequestTimeout 10 s: k3s's client timeout, which servers are tuned for.
//   - RecoveryDelay 30 s: longer than a herd of 320 nodes takes to join on
//     two servers (BENCHMARKS.md), so a hung server costs each agent one
//     header timeout per herd; short enough that a restarted server is used
//     again within half a minute. When every server is down, the one back
//     first is tried anyway.
//   - RenewAfter 0.7: the kubelet's window, renewal at 70-90 % of a
//     certificate's lifetime, spread over a fleet by a hash of each
//     certificate.
package agent
