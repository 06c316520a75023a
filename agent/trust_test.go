package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodepass/nodepass/internal/testca"
)

// A cluster with a custom CA chain (intermediate + root) joins with the
// token k3s makes for it, whose hash pins the root.
func TestChainCAJoins(t *testing.T) {
	cl := newChainCluster(t)
	s := newSupervisor(t, cl)
	dir := t.TempDir()
	res := get(t, newClient(t, testOptions(cl, s.addr, dir, nil)))
	if !res.usable() {
		t.Fatal("certificates not usable")
	}
	checkFiles(t, dir)
	// A restart trusts server-ca.crt, the chain, without asking /cacerts.
	get(t, newClient(t, testOptions(cl, s.addr, dir, nil)))
	if n := s.count("GET /cacerts"); n != 1 {
		t.Errorf("/cacerts asked %d times, want 1", n)
	}
}

// A man in the middle appends a CA of its own to the cluster's genuine
// chain, which leaves the token's hash (the root's) as it is, and
// presents a certificate of that CA. The agent trusts only what leads to
// the pinned root: it sends the man in the middle nothing but GET
// /cacerts. (k3s trusts every certificate of the bundle:
// pkg/clientaccess/token.go GetHTTPClient appends them all to RootCAs.)
func TestAppendedCARefused(t *testing.T) {
	cl := newChainCluster(t)
	evil := newCluster(t)
	mitm := newSupervisor(t, evil) // its TLS certificate is evil's
	mitm.override = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/cacerts" {
			return false
		}
		w.Write(append(append([]byte{}, cl.serverCA.bundle...), evil.serverCA.pem...))
		return true
	}
	checkRefused(t, mitm, testOptions(cl, mitm.addr, t.TempDir(), nil))
}

// checkRefused runs Get against s, a server the agent must not trust, and
// checks that the agent refused its certificate and sent it nothing but
// GET /cacerts. A Get that goes on with the valid certificates on disk
// counts by its Offline error.
func checkRefused(t *testing.T, s *supervisor, opts *Options) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	res, err := newClient(t, opts).Get(ctx)
	if err == nil && res.Offline != nil {
		err = res.Offline
	}
	if err == nil || !strings.Contains(err.Error(), "does not chain") {
		t.Errorf("Get: %v, want the server's certificate refused", err)
	}
	if n, m := s.total(), s.count("GET /cacerts"); n != m || m == 0 {
		t.Errorf("the server saw %d requests, %d of them /cacerts; want /cacerts only", n, m)
	}
}

// On a restart with the CA on disk, a server whose certificate does not
// chain to it (another cluster's, say) is left out. The other servers
// still serve the attempt, which does not fall back to the certificates
// on disk.
func TestOneServerOfAnotherCA(t *testing.T) {
	cl, s, dir := joined(t)
	other := newSupervisor(t, newCluster(t))
	opts := testOptions(cl, s.addr, dir, nil)
	opts.Servers = []string{other.addr, s.addr}
	c := newClient(t, opts)
	res := get(t, c)
	if res.Offline != nil || res.Config == nil {
		t.Errorf("Offline %v, config %q: want an attempt that the good server served", res.Offline, res.Config)
	}
	if n := other.total(); n != 0 {
		t.Errorf("the server of another CA got %d requests, want 0", n)
	}
	if n := s.count("GET /cacerts"); n != 1 {
		t.Errorf("/cacerts asked %d times, want once (the first join)", n)
	}
}

// A cluster whose CA was replaced, joined with a token without a CA hash:
// every server fails the CA on disk, so the next attempt asks /cacerts
// again and the node gets the four certificates of the new CAs.
func TestCAReplaced(t *testing.T) {
	cl, _, dir := joined(t)
	fresh := newCluster(t)
	s := newSupervisor(t, fresh)
	opts := testOptions(cl, s.addr, dir, nil)
	opts.Token = "K10::server:" + cl.secret
	c := newClient(t, opts)
	res := get(t, c)
	if res.Offline != nil {
		t.Fatalf("Offline: %v", res.Offline)
	}
	if st := c.Stats(); st.Issued != 4 || s.count("GET /cacerts") != 1 {
		t.Errorf("%d certificates issued, /cacerts asked %d times; want 4, 1", st.Issued, s.count("GET /cacerts"))
	}
}

// A server whose certificate chains to the host's roots, not to the CA
// it sends, is accepted as k3s accepts it (pkg/clientaccess/token.go
// getCACerts). The host's roots are then trusted for that server only:
// not for another server that a publicly trusted certificate also
// names, nor in Result.ServerCA, which a load balancer's probes use. The
// host's roots are set with SSL_CERT_FILE, which crypto/x509 reads once
// per process on Linux: the test runs itself in a process of its own.
func TestHostRootsForOneServer(t *testing.T) {
	roots := os.Getenv("NODEPASS_TEST_HOST_ROOTS")
	if roots == "" {
		if runtime.GOOS != "linux" {
			t.Skip("SSL_CERT_FILE sets the host's roots on Linux only")
		}
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestHostRootsForOneServer$", "-test.count=1")
		cmd.Env = append(os.Environ(), "NODEPASS_TEST_HOST_ROOTS="+filepath.Join(t.TempDir(), "roots.pem"))
		out, err := cmd.CombinedOutput()
		if errors.Is(err, syscall.ENOEXEC) {
			t.Skipf("cannot run itself (under an emulator?): %v", err)
		}
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("%v:\n%s", err, out)
		}
		return
	}
	public := newTestCA(t, "public-ca")
	if err := os.WriteFile(roots, public.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", roots)
	cl := newCluster(t)
	cl.tlsCA = public
	a, b := newSupervisor(t, cl), newSupervisor(t, cl)
	opts := testOptions(cl, a.addr, t.TempDir(), nil)
	opts.Token = "K10::server:" + cl.secret // no CA hash
	opts.Servers = []string{b.addr, a.addr}
	c := newClient(t, opts)
	res := get(t, c)
	// The server that sent /cacerts was accepted; the other gets nothing.
	first, second := a, b
	if b.count("GET /cacerts") == 1 {
		first, second = b, a
	}
	if first.total() < 8 || second.total() != 0 {
		t.Errorf("requests: %d to the server accepted, %d to the other; want all to the first", first.total(), second.total())
	}
	conn, err := tls.Dial("tcp", first.addr, &tls.Config{RootCAs: res.ServerCA, ServerName: "127.0.0.1"})
	if err == nil {
		conn.Close()
		t.Error("Result.ServerCA trusts the host's roots")
	}
}

// With every server gone, Result.ServerCA is still what the token pins:
// a CA appended to server-ca.crt on disk (which leaves the hash as it
// is) is not in it.
func TestOfflineServerCAPinned(t *testing.T) {
	cl := newChainCluster(t)
	s := newSupervisor(t, cl)
	dir := t.TempDir()
	get(t, newClient(t, testOptions(cl, s.addr, dir, nil)))
	evil := newCluster(t)
	file := filepath.Join(dir, "agent", "server-ca.crt")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(b, evil.serverCA.pem...), 0o600); err != nil {
		t.Fatal(err)
	}
	s.srv.Close()
	res := get(t, newClient(t, testOptions(cl, s.addr, dir, nil)))
	if res.Offline == nil {
		t.Fatal("not Offline with the server gone")
	}
	mitm := newSupervisor(t, evil)
	conn, err := tls.Dial("tcp", mitm.addr, &tls.Config{RootCAs: res.ServerCA, ServerName: "127.0.0.1"})
	if err == nil {
		conn.Close()
		t.Error("Result.ServerCA trusts the CA appended on disk")
	}
}

// servingVerifies reports whether the serving certificate in dir
// verifies against dir's server-ca.crt, as k3s's API server checks it:
// --kubelet-certificate-authority is server-ca.crt
// (pkg/daemons/control/server.go).
func servingVerifies(t *testing.T, dir string) error {
	t.Helper()
	roots := x509.NewCertPool()
	b, err := os.ReadFile(filepath.Join(dir, "agent", "server-ca.crt"))
	if err != nil || !roots.AppendCertsFromPEM(b) {
		t.Fatalf("server-ca.crt: %v", err)
	}
	b, err = os.ReadFile(filepath.Join(dir, "agent", "serving-kubelet.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b) // the certificate alone: not the CA the file carries
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// `k3s certificate rotate-ca --force` replaces the CAs with new ones, not
// cross-signed, and the nodes restart with the new token. The serving
// certificate of the old server CA is renewed with the client
// certificates: the API server checks it against the new server-ca.crt
// (pkg/daemons/control/server.go: --kubelet-certificate-authority is
// server-ca.crt), although its file carries the old CA that signed it
// (pkg/server/handlers/handlers.go signAndSend sends each certificate
// followed by its CA).
func TestServingCertOfReplacedCA(t *testing.T) {
	_, _, dir := joined(t)
	rotated := newCluster(t)
	s := newSupervisor(t, rotated)
	c := newClient(t, testOptions(rotated, s.addr, dir, nil))
	get(t, c)
	if st := c.Stats(); st.Issued != 4 {
		t.Errorf("%d certificates issued after the CAs were replaced, want all 4", st.Issued)
	}
	if err := servingVerifies(t, dir); err != nil {
		t.Errorf("the serving certificate kept does not verify against server-ca.crt: %v", err)
	}
}

// A server that signs serving certificates with a kubelet CA of its own
// (examples/server's serve.go: serving-kubelet.crt signed by cas.kubelet,
// sent with that CA) has its API server check them against that CA. A
// restart keeps them while the servers' CAs are the same. When the
// servers' CAs are all replaced (server-ca.crt changes), the serving
// certificate is renewed too, as the API server now checks the kubelet
// against the new CA (--kubelet-certificate-authority, k3s
// pkg/daemons/control/server.go). The files' times do not count: a
// certificate written while the clock ran 3 h ahead is renewed all the
// same after `k3s certificate rotate-ca --force` within those hours.
func TestServingCertOfKubeletCA(t *testing.T) {
	for _, ahead := range []time.Duration{0, 3 * time.Hour} {
		t.Run("written "+ahead.String()+" ahead", func(t *testing.T) {
			cl := newCluster(t)
			cl.kubeletCA = newTestCA(t, "kubelet-ca")
			s := newSupervisor(t, cl)
			dir := t.TempDir()
			get(t, newClient(t, testOptions(cl, s.addr, dir, nil)))
			at := time.Now().Add(ahead)
			if err := os.Chtimes(filepath.Join(dir, "agent", "serving-kubelet.crt"), at, at); err != nil {
				t.Fatal(err)
			}
			c := newClient(t, testOptions(cl, s.addr, dir, nil))
			get(t, c)
			if st := c.Stats(); st.Requested != 0 {
				t.Errorf("%d certificates requested on a restart with nothing changed, want 0", st.Requested)
			}

			rotated := newCluster(t)
			rotated.kubeletCA = newTestCA(t, "kubelet-ca-2")
			s2 := newSupervisor(t, rotated)
			c = newClient(t, testOptions(rotated, s2.addr, dir, nil))
			res := get(t, c)
			if st := c.Stats(); st.Issued != 4 || !res.Certs[0].Issued {
				t.Errorf("%d certificates issued after the servers' CAs were replaced (serving issued %v), want all 4", st.Issued, res.Certs[0].Issued)
			}
		})
	}
}

// A first join whose list holds a server of another cluster: that
// server's /cacerts does not match the token, and the request moves on
// to the configured server, which decides, as it decides a 401 (k3s's
// agent asks /cacerts of its --server alone: pkg/clientaccess/token.go
// ParseAndValidateToken). With StopOnRejection, the join succeeds.
func TestCAOfAnotherClusterSkipped(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	other := newSupervisor(t, newCluster(t))
	opts := testOptions(cl, s.addr, t.TempDir(), nil)
	opts.Servers = []string{other.addr, s.addr}
	opts.StopOnRejection = true
	c := newClient(t, opts)
	c.servers.next = 0 // the other cluster's server first
	get(t, c)
	if n, m := other.total(), other.count("GET /cacerts"); n != 1 || m != 1 {
		t.Errorf("the other cluster's server got %d requests, %d of them /cacerts; want /cacerts once", n, m)
	}
	if st := c.Stats(); st.Attempts != 1 || st.Issued != 4 {
		t.Errorf("%d attempts, %d certificates issued; want 1, 4", st.Attempts, st.Issued)
	}
}

// newRotatedCA is k3s's rolling rotation of cl's server CA, as
// contrib/util/rotate-default-ca-certs.sh makes it (testca.Rotate). The
// bundle, which /cacerts and server-ca.crt serve once a server has
// restarted with it, is [intermediate, new root, cross-signed new root,
// old root]. The cluster's token pins the new root
// (pkg/clientaccess/token.go hashCA), the token a restarted server
// prints.
func newRotatedCA(t *testing.T, cl *cluster) *cluster {
	t.Helper()
	r := testca.Rotate(t, &testca.CA{Cert: cl.serverCA.cert, Key: cl.serverCA.key})
	inter := fromTestca(r.Inter, fromTestca(r.Root, nil))
	inter.bundle = r.Bundle(true)
	return &cluster{serverCA: inter, clientCA: cl.client(), secret: cl.secret, passwords: make(map[string]string)}
}

// dialsWith reports whether a TLS handshake with the server at addr
// succeeds with roots, as the load balancer's probes make it.
func dialsWith(addr string, roots *x509.CertPool) error {
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err == nil {
		conn.Close()
	}
	return err
}

// A rolling CA rotation (k3s contrib/util/rotate-default-ca-certs.sh,
// then `k3s certificate rotate-ca`): one server restarted with the
// rotated bundle, one not yet, which presents a certificate of the old
// root and serves the old bundle. An agent restarted with the new token
// (the restarted server's, pinning the new root) reaches both, as k3s's
// agent does (it trusts every certificate of the bundle: GetHTTPClient),
// because it trusted the old root before and the new bundle carries it;
// so do its load balancer's probes (Result.ServerCA). It still does on
// the next restart, when server-ca.crt holds the new bundle. Once the
// servers' bundle no longer carries the old root, the agent no longer
// trusts it.
func TestRollingCARotation(t *testing.T) {
	cl, old, dir := joined(t) // a one-certificate CA, as k3s makes it
	rotated := newRotatedCA(t, cl)
	restarted := newSupervisor(t, rotated)
	var logs logBuffer
	opts := testOptions(rotated, restarted.addr, dir, &logs)
	opts.Servers = []string{old.addr, restarted.addr}
	for run := range 2 {
		oldBefore := old.total() - old.count("GET /cacerts")
		c := newClient(t, opts)
		c.servers.next = 0 // the server not yet restarted first
		res := get(t, c)
		if n := old.total() - old.count("GET /cacerts") - oldBefore; n == 0 {
			t.Errorf("run %d: the server not yet restarted served no request: the agent does not trust the old root", run)
		}
		if err := dialsWith(old.addr, res.ServerCA); err != nil {
			t.Errorf("run %d: Result.ServerCA does not reach the server not yet restarted: %v", run, err)
		}
		if err := dialsWith(restarted.addr, res.ServerCA); err != nil {
			t.Errorf("run %d: Result.ServerCA does not reach the restarted server: %v", run, err)
		}
		if st := c.Stats(); st.Requested != 0 {
			t.Errorf("run %d: %d certificates requested, want 0: the new bundle still holds the old root", run, st.Requested)
		}
		if run == 0 {
			if b, _ := os.ReadFile(filepath.Join(dir, "agent", "server-ca.crt")); string(b) != string(rotated.serverCA.bundle) {
				t.Fatal("server-ca.crt is not the rotated bundle after the first restart")
			}
		}
	}
	if strings.Contains(logs.String(), "does not chain") {
		t.Errorf("a handshake failed:\n%s", logs.String())
	}

	// The rotation is over: the servers serve the bundle without the old root.
	over := append(slices.Clip(rotated.serverCA.pem), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rotated.serverCA.root.Raw})...)
	final := newSupervisor(t, withBundle(rotated, over)) // [intermediate, new root]
	opts = testOptions(rotated, final.addr, dir, nil)
	opts.Servers = []string{old.addr, final.addr}
	res := get(t, newClient(t, opts))
	if err := dialsWith(old.addr, res.ServerCA); err == nil {
		t.Error("the old root is still trusted once the servers' bundle no longer carries it")
	}
	res = get(t, newClient(t, opts))
	if err := dialsWith(old.addr, res.ServerCA); err == nil {
		t.Error("the old root is trusted again on the next restart")
	}
}

// After a rolling CA rotation the servers send [intermediate, new root],
// and the token pins the new root (k3s pkg/clientaccess/token.go hashCA).
// An impostor holding a certificate of the old root (every k3s server
// holds the CA's key, and a leaked key is why a CA is replaced) appends
// that root to the genuine bundle: the hash is still the token's. The
// agent, which trusted the old root before, trusts the roots of its
// old server-ca.crt only when a server that the pin alone proves sends
// a bundle that carries them. It sends the impostor nothing but GET
// /cacerts, and keeps nothing of its answer.
func TestOldRootImpostorRefused(t *testing.T) {
	cl, _, dir := joined(t) // server-ca.crt holds the old root
	before, err := os.ReadFile(filepath.Join(dir, "agent", "server-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	rotated := newRotatedCA(t, cl)
	over := append(slices.Clip(rotated.serverCA.pem), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rotated.serverCA.root.Raw})...)
	forged := withBundle(rotated, append(over, cl.serverCA.pem...))
	forged.tlsCA = cl.serverCA // its certificate is of the old root
	imp := newSupervisor(t, forged)
	checkRefused(t, imp, testOptions(rotated, imp.addr, dir, nil))
	if b, _ := os.ReadFile(filepath.Join(dir, "agent", "server-ca.crt")); !bytes.Equal(b, before) {
		t.Error("server-ca.crt holds the impostor's bundle")
	}
	if _, err := os.Stat(filepath.Join(dir, "agent", "etc", "server-ca-carried-roots.crt")); err == nil {
		t.Error("the old root is kept as carried on the impostor's word")
	}
}

// withBundle is cl whose server CA sends bundle.
func withBundle(cl *cluster, bundle []byte) *cluster {
	ca := *cl.serverCA
	ca.bundle = bundle
	return &cluster{serverCA: &ca, clientCA: cl.client(), secret: cl.secret, passwords: make(map[string]string)}
}

// During a rotation, a man in the middle serves a bundle of the same
// shape as the genuine one whose new root is cross-signed by a CA of its
// own instead (anyone can sign the new root's public key), with the old
// root too, and presents a certificate of its CA. The bundle's hash is
// the token's: the agent trusts the old root it trusted before, never
// the cross-signer, and sends the man in the middle nothing but GET
// /cacerts. (k3s's agent trusts every certificate of the bundle,
// pkg/clientaccess/token.go GetHTTPClient, the cross-signer included.)
func TestRotationCrossSignerRefused(t *testing.T) {
	cl, _, dir := joined(t)
	rotated := newRotatedCA(t, cl)
	newRoot := rotated.serverCA.root
	evil := newCluster(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: newRoot.Subject, SubjectKeyId: newRoot.SubjectKeyId,
		NotBefore: newRoot.NotBefore, NotAfter: newRoot.NotAfter,
		KeyUsage: newRoot.KeyUsage, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, evil.serverCA.cert, newRoot.PublicKey, evil.serverCA.key)
	if err != nil {
		t.Fatal(err)
	}
	var forged []byte
	for _, b := range [][]byte{rotated.serverCA.cert.Raw, newRoot.Raw, der, evil.serverCA.cert.Raw, cl.serverCA.cert.Raw} {
		forged = append(forged, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b})...)
	}
	mitm := newSupervisor(t, evil) // its TLS certificate is evil's
	mitm.override = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/cacerts" {
			return false
		}
		w.Write(forged)
		return true
	}
	checkRefused(t, mitm, testOptions(rotated, mitm.addr, dir, nil))
}

// rotate-default-ca-certs.sh prints an "updated agent token" whose hash
// is the new intermediate's (openssl x509 -fingerprint -sha256 of
// server-ca.pem). k3s's hashCA never yields it for a bundle of more than
// one certificate (pkg/clientaccess/token.go), so k3s's agent refuses it
// (validateCAHash), and so does this one: the agent refuses the CA.
func TestRotationScriptTokenRefused(t *testing.T) {
	rotated := newRotatedCA(t, newCluster(t))
	s := newSupervisor(t, rotated)
	opts := testOptions(rotated, s.addr, t.TempDir(), nil)
	sum := sha256.Sum256(rotated.serverCA.cert.Raw) // the intermediate's DER
	opts.Token = "K10" + hex.EncodeToString(sum[:]) + "::server:" + rotated.secret
	opts.StopOnRejection = true
	if _, err := newClient(t, opts).Get(t.Context()); !errors.Is(err, ErrCARejected) {
		t.Errorf("Get: %v, want ErrCARejected", err)
	}
}
