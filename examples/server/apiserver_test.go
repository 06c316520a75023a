package main

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodepass/nodepass/kube/apitest"
)

// TestAPIServerKubeStore runs the server as main does, with -store kube
// and a kubeconfig for the node-password identity (only the README's
// verbs on secrets in kube-system), against a real kube-apiserver, and
// enrolls, verifies and refuses nodes over HTTPS. It skips unless
// $NODEPASS_APISERVER_BIN names the built binaries (make test-apiserver).
func TestAPIServerKubeStore(t *testing.T) {
	srv := apitest.Start(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := apitest.WriteKubeconfig(kubeconfig, srv.Node); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	args := []string{"-addr", "127.0.0.1:0", "-logn", "4", "-ca-file", caFile, "-store", "kube", "-kubeconfig", kubeconfig, "-data-dir", dir}
	s := start(t, caFile, func(ctx context.Context, out io.Writer) error { return run(ctx, args, out, out) }).withCAs(t, dir)

	ns := nodes(10)
	joinAll(t, s, ns) // enrolls
	joinAll(t, s, ns) // verifies
	for _, n := range ns[:3] {
		if status, body := s.join(t, n.name, "not-"+n.password, n.ip); status != http.StatusForbidden {
			t.Errorf("%s with a wrong password: %d %s, want 403", n.name, status, body)
		}
	}

	admin, err := corev1client.NewForConfig(srv.Admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		name := strings.ToLower(n.name) + ".node-password.k3s"
		sec, err := admin.Secrets("kube-system").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("no secret for %s: %v", n.name, err)
			continue
		}
		if sec.Type != corev1.SecretType("k3s.cattle.io/node-password") || sec.Immutable == nil || !*sec.Immutable || !strings.HasPrefix(string(sec.Data["hash"]), "$1:") {
			t.Errorf("secret %s: type %q, immutable %v, hash %q", name, sec.Type, sec.Immutable, sec.Data["hash"])
		}
	}

	m := s.metrics(t)
	if m["nodepass_enrollments_total"] != 10 || m["nodepass_store_errors_total"] != 0 || m["nodepass_mismatches_total"] != 3 {
		t.Errorf("enrollments %g, store errors %g, mismatches %g; want 10, 0 and 3",
			m["nodepass_enrollments_total"], m["nodepass_store_errors_total"], m["nodepass_mismatches_total"])
	}
	status, body := s.join(t, ns[0].name, ns[0].password, ns[0].ip)
	if status != http.StatusOK {
		t.Fatalf("%s after the checks: %d %s", ns[0].name, status, body)
	}
	checkKubeletCert(t, body, s.kubeletCA, strings.ToLower(ns[0].name), []net.IP{net.ParseIP(ns[0].ip)}, x509.ExtKeyUsageServerAuth, nil)
}
