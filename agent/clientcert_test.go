package agent

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// A node whose token no longer passes (an expired bootstrap token, or a
// token the servers rotated before the node got the new one) still
// rejoins on its client certificate: k3s's agent presents client-kubelet
// with the token (pkg/agent/config/config.go get:
// clientaccess.WithClientCertificate), and the supervisor accepts either
// (pkg/authenticator/authenticator.go). The node's address changed too,
// so it asks for a new serving certificate, which its certificate alone
// authenticates.
func TestClientCertificateWhenTokenFails(t *testing.T) {
	cl, _, dir := joined(t)
	rotated := &cluster{serverCA: cl.serverCA, clientCA: cl.client(), secret: "rotated", passwords: make(map[string]string)}
	s := newSupervisor(t, rotated)
	opts := testOptions(cl, s.addr, dir, nil) // the old token
	opts.NodeIP = "192.0.2.11"
	opts.StopOnRejection = true
	res, err := newClient(t, opts).Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Certs[0].Issued {
		t.Error("the serving certificate was not issued")
	}
	for _, route := range []string{"GET /v1-k3s/config", "POST /v1-k3s/serving-kubelet.crt"} {
		if users := s.usersOf(route); !slices.Equal(users, []string{"system:node:worker-1"}) {
			t.Errorf("%s authenticated as %q, want the node's certificate once", route, users)
		}
	}
}

// A node that joins with a bootstrap token, whose Node resource was then
// deleted: its client certificate authenticates before the token (k3s's
// union authenticator tries certificates before the API server's
// bootstrap tokens), and the supervisor answers 401 to a node-password
// request on it (pkg/nodepassword/nodepassword.go verifyNode). The agent
// asks that server again without the certificate, on the token, as
// k3s's agent does ("fall back from node identity to token when the node
// resource is deleted": pkg/agent/config/config.go getNodeNamedCrt).
func TestClientCertificateFallback(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	dir := t.TempDir()
	opts := testOptions(cl, s.addr, dir, nil)
	opts.Token = strings.TrimSuffix(cl.token(), "server:"+cl.secret) + bootstrapToken
	get(t, newClient(t, opts)) // no certificate yet
	cl.mu.Lock()
	cl.deleted = map[string]bool{"worker-1": true}
	cl.mu.Unlock()
	var logs logBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	opts.NodeIP = "192.0.2.11" // a new address: the serving certificate is asked for
	get(t, newClient(t, opts))
	want := []string{"system:bootstrap:abcdef", "system:node:worker-1", "system:bootstrap:abcdef"}
	if users := s.usersOf("POST /v1-k3s/serving-kubelet.crt"); !slices.Equal(users, want) {
		t.Errorf("the serving certificate's requests authenticated as %q, want %q", users, want)
	}
	if !strings.Contains(logs.String(), "without the client certificate") {
		t.Errorf("no log line for the fallback:\n%s", logs.String())
	}
}

// A client certificate the keep rule refuses is not presented: here the
// node was renamed, and k3s's supervisor would answer 400 to a
// certificate of the old name ("header node name does not match auth
// node name": pkg/nodepassword/validate.go). The node joins on its token.
func TestClientCertificateOfAnotherNodeNotPresented(t *testing.T) {
	cl, s, dir := joined(t)
	opts := testOptions(cl, s.addr, dir, nil)
	opts.NodeName = "worker-2"
	get(t, newClient(t, opts))
	if users := s.usersOf("POST /v1-k3s/client-kubelet.crt"); !slices.Equal(users, []string{"node", "node"}) {
		t.Errorf("client-kubelet requests authenticated as %q, want the token both times", users)
	}
}
