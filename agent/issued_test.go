package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// A certificate the server has just issued is used even where the keep
// rule would not keep it, as k3s's agent writes what its server sends
// (pkg/agent/config/config.go getKubeletServingCert, getClientCert):
// asked again, the server would send the same, and for a node-password
// route run scrypt again. The agent asks once, logs once what the
// certificate lacks, and Renew does not ask again. The next start
// decides with the keep rule, and asks once more.
func TestIssuedCertificateUsed(t *testing.T) {
	routes := []string{"serving-kubelet", "client-kubelet", "client-kube-proxy", "client-k3s-controller"}
	for _, tc := range []struct {
		name  string
		setup func(*supervisor)
		lax   []string // the certificates the keep rule refuses
		lacks string   // what the log says of them
	}{
		{"an address sent", func(s *supervisor) {
			s.tamper = func(l *leaf) {
				if l.usage == x509.ExtKeyUsageServerAuth {
					l.ips = l.ips[:2] // loopback alone
				}
			}
		}, routes[:1], "does not name the address 192.0.2.10"},
		{"the node name in another case", func(s *supervisor) {
			s.tamper = func(l *leaf) {
				if l.cn == "worker-1" {
					l.cn, l.dns = "Worker-1", "Worker-1"
				}
			}
		}, routes[:1], `want \"worker-1\"`},
		{"another CA, sent with it", func(s *supervisor) { s.clientSigner = newTestCA(t, "another-client-ca") },
			routes[1:], "does not chain to the server's CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t)
			s := newSupervisor(t, cl)
			tc.setup(s)
			dir := t.TempDir()
			logs := &logBuffer{watch: "agent: next renewal", seen: make(chan string, 8)}
			opts := testOptions(cl, s.addr, dir, logs)
			c := newClient(t, opts)
			res := get(t, c)
			for _, cr := range res.Certs {
				if !cr.Issued || !cr.Verdict.State.Usable() {
					t.Errorf("%s: issued %v, %v; want issued and used", cr.Name, cr.Issued, cr.Verdict.State)
				}
			}
			// Renew starts from what Get left: it sleeps, learns the
			// servers, and sleeps again, asking for no certificate.
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error)
			go func() { done <- c.Renew(ctx) }()
			<-logs.seen
			<-logs.seen
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Renew: %v", err)
			}
			for _, r := range routes {
				if n := s.count("POST /v1-k3s/" + r + ".crt"); n != 1 {
					t.Errorf("%s requested %d times by Get and Renew, want once", r, n)
				}
			}
			warned := strings.Count(logs.String(), "using the certificate just issued")
			if warned != len(tc.lax) || !strings.Contains(logs.String(), tc.lacks) {
				t.Errorf("%d lines for a certificate the keep rule refuses, want %d saying %q:\n%s", warned, len(tc.lax), tc.lacks, logs.String())
			}

			opts.Logger = slog.New(slog.DiscardHandler)
			get(t, newClient(t, opts)) // the next start
			for _, r := range routes {
				want := 1
				if slices.Contains(tc.lax, r) {
					want = 2
				}
				if n := s.count("POST /v1-k3s/" + r + ".crt"); n != want {
					t.Errorf("after the next start, %s requested %d times, want %d", r, n, want)
				}
			}
		})
	}
}
