package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nodepass/nodepass/examples/internal/cli"
	"github.com/nodepass/nodepass/examples/internal/cli/clitest"
)

// asCommand, set in a test binary's environment, makes it the agent
// command (clitest.Main).
const asCommand = "NODEPASS_TEST_RUN_AGENT_MAIN"

func TestMain(m *testing.M) { clitest.Main(m, asCommand, main) }

// command returns the agent command with args, as a user runs it.
func command(t *testing.T, ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	return clitest.Command(t, ctx, asCommand, args...)
}

// runCommand runs the agent command with args to its end and returns its
// exit code, stdout and stderr.
func runCommand(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run(t, asCommand, args...)
}

// freeAddr is a 127.0.0.1 address where nothing listens now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// fakeSupervisor serves the routes a k3s agent asks for over HTTPS, with
// one CA for everything, and basic auth node:<secret>. Requests for the
// node-password routes get nodeStatus when it is set.
type fakeSupervisor struct {
	url        string
	caPEM      []byte
	nodeStatus atomic.Int32
	posts      atomic.Int32 // certificate requests answered
	cacerts    atomic.Int32 // GET /cacerts answered
}

const secret = "s3cret"

func newFakeSupervisor(t *testing.T) *fakeSupervisor {
	t.Helper()
	return newFakeSupervisorOn(t, net.IPv4(127, 0, 0, 1))
}

// proxiedName names every fake supervisor in its certificate. It is a
// name no resolver knows (RFC 6761), which only the tests' proxy
// (newConnectProxy) sends somewhere.
const proxiedName = "supervisor.invalid"

// newFakeSupervisorOn is a fakeSupervisor listening on ip.
func newFakeSupervisorOn(t *testing.T, ip net.IP) *fakeSupervisor {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	f := &fakeSupervisor{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	sign := func(tmpl *x509.Certificate, pub any) []byte {
		tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
		if err != nil {
			panic(err)
		}
		return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), f.caPEM...)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cacerts", func(w http.ResponseWriter, _ *http.Request) {
		f.cacerts.Add(1)
		w.Write(f.caPEM)
	})
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "pong") })
	authed := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if u, p, _ := r.BasicAuth(); u != "node" || p != secret {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET /v1-k3s/config", authed(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{}")) }))
	mux.HandleFunc("GET /v1-k3s/apiservers", authed(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("[]")) }))
	for _, ca := range []string{"client-ca.crt", "server-ca.crt"} {
		mux.HandleFunc("GET /v1-k3s/"+ca, authed(func(w http.ResponseWriter, _ *http.Request) { w.Write(f.caPEM) }))
	}
	for name, usage := range map[string]x509.ExtKeyUsage{
		"serving-kubelet": x509.ExtKeyUsageServerAuth, "client-kubelet": x509.ExtKeyUsageClientAuth,
		"client-kube-proxy": x509.ExtKeyUsageClientAuth, "client-k3s-controller": x509.ExtKeyUsageClientAuth,
	} {
		node := strings.HasSuffix(name, "kubelet")
		mux.HandleFunc("POST /v1-k3s/"+name+".crt", authed(func(w http.ResponseWriter, r *http.Request) {
			if code := int(f.nodeStatus.Load()); node && code != 0 {
				http.Error(w, http.StatusText(code), code)
				return
			}
			if node && strings.Contains(r.Header.Get("K3s-Node-Name"), "_") {
				// What nodepass's httpauth answers a name that is not a
				// DNS-1123 subdomain.
				http.Error(w, "invalid node name or password", http.StatusBadRequest)
				return
			}
			body, _ := io.ReadAll(r.Body)
			csr, err := x509.ParseCertificateRequest(body)
			if err != nil {
				http.Error(w, "bad CSR", http.StatusBadRequest)
				return
			}
			f.posts.Add(1)
			tmpl := &x509.Certificate{Subject: csr.Subject, ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
			if name == "serving-kubelet" {
				// As k3s: the node's name, loopback and the Node-Ip
				// addresses (pkg/server/handlers/handlers.go ServingKubeletCert).
				tmpl.DNSNames = []string{r.Header.Get("K3s-Node-Name"), "localhost"}
				tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
				for _, v := range strings.Split(r.Header.Get("K3s-Node-Ip"), ",") {
					if ip := net.ParseIP(v); ip != nil {
						tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
					}
				}
			}
			w.Write(sign(tmpl, csr.PublicKey))
		}))
	}
	srv := httptest.NewUnstartedServer(mux)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "server"}, IPAddresses: []net.IP{ip}, DNSNames: []string{proxiedName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, srvKey.Public())
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	cert, err := tls.X509KeyPair(leaf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// agentRun runs the command with args and returns its exit code, stdout
// and stderr.
func agentRun(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut syncBuffer
	code := cli.Main(ctx, "agent", args, &out, &errOut, run)
	return code, out.String(), errOut.String()
}

type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string // if not nil, receives each write
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lines != nil {
		b.lines <- string(p)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startLB starts cmd, which runs its load balancer on addr, and returns
// when it says so: its stdout past that line and its stderr. If cmd ends
// first, the error says how, with stderr.
func startLB(t *testing.T, cmd *exec.Cmd, addr string) (io.Reader, *syncBuffer, error) {
	t.Helper()
	errOut := new(syncBuffer)
	cmd.Stderr = errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for sc := bufio.NewScanner(stdout); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "load balancer on "+addr) {
			return stdout, errOut, nil
		}
	}
	cmd.Wait()
	return nil, errOut, fmt.Errorf("exit %d before the load balancer ran:\n%s", cmd.ProcessState.ExitCode(), errOut.String())
}

// ping sends GET /ping to the load balancer at addr, checking the
// server's certificate against caPEM (for serverName, if not empty), and
// returns the answer's status and body.
func ping(addr string, caPEM []byte, serverName string) (int, string, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/ping")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

func baseArgs(f *fakeSupervisor, dir string) []string {
	return []string{"-server", f.url, "-token", "K10::server:" + secret, "-node-name", "worker-1",
		"-node-ip", "192.0.2.10", "-data-dir", dir, "-backoff-cap", "100ms", "-backoff-base", "10ms"}
}

// A join writes the certificates and exits 0; a second run keeps them and
// asks for none.
func TestJoinThenKeep(t *testing.T) {
	f := newFakeSupervisor(t)
	dir := t.TempDir()
	code, out, errOut := agentRun(t.Context(), baseArgs(f, dir)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if n := strings.Count(out, "issued "); n != 4 {
		t.Errorf("%d certificates issued, want 4; stdout:\n%s", n, out)
	}
	for _, name := range []string{"serving-kubelet", "client-kubelet", "client-kube-proxy", "client-k3s-controller"} {
		for _, ext := range []string{".crt", ".key"} {
			if _, err := os.Stat(filepath.Join(dir, "agent", name+ext)); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "agent", "etc", "rancher", "node", "password")); err != nil {
		t.Errorf("node password file: %v", err)
	}
	posts := f.posts.Load()
	code, out, errOut = agentRun(t.Context(), baseArgs(f, dir)...)
	if code != 0 || strings.Count(out, "kept ") != 4 || f.posts.Load() != posts {
		t.Errorf("second run: exit %d, %d certificate requests, stdout:\n%s\nstderr:\n%s", code, f.posts.Load()-posts, out, errOut)
	}
}

// A rejected node password exits 1 at once with one line that names the
// node and the password file.
func TestPasswordRejected(t *testing.T) {
	f := newFakeSupervisor(t)
	f.nodeStatus.Store(http.StatusForbidden)
	dir := t.TempDir()
	code, _, errOut := agentRun(t.Context(), baseArgs(f, dir)...)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	last := lines[len(lines)-1]
	for _, want := range []string{"node password rejected", `"worker-1"`, filepath.Join(dir, "agent", "etc", "rancher", "node", "password")} {
		if !strings.Contains(last, want) {
			t.Errorf("last line %q does not say %s", last, want)
		}
	}
	if strings.Contains(errOut, "goroutine ") {
		t.Errorf("a stack trace:\n%s", errOut)
	}
}

// No answer within -timeout: exit 1 with the reason. (2 s: the first
// attempt must end before the deadline, on a loaded machine under -race.)
func TestTimeout(t *testing.T) {
	f := newFakeSupervisor(t)
	f.nodeStatus.Store(http.StatusServiceUnavailable)
	code, _, errOut := runCommand(t, append(baseArgs(f, t.TempDir()), "-timeout", "2s")...)
	last := lastLine(t, errOut)
	if code != 1 || !strings.HasPrefix(last, "agent: giving up (context deadline exceeded); the last attempt: ") ||
		!strings.Contains(last, "503") || strings.Count(last, "agent:") != 1 {
		t.Errorf("exit %d, last line %q; want 1, the 503, agent: once", code, last)
	}
}

// -wait stays up after the certificates, until the context ends: exit 0.
func TestWait(t *testing.T) {
	f := newFakeSupervisor(t)
	ctx, cancel := context.WithCancel(t.Context())
	out := syncBuffer{lines: make(chan string, 8)}
	done := make(chan int)
	go func() {
		done <- cli.Main(ctx, "agent", append(baseArgs(f, t.TempDir()), "-wait"), &out, io.Discard, run)
	}()
	for range 4 {
		<-out.lines
	}
	select {
	case code := <-done:
		t.Fatalf("exited %d with -wait before the context ended", code)
	default:
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
}

// Every wrong flag or flag value: one line on stderr, exit 2. -h and
// -version: stdout, exit 0.
func TestFlags(t *testing.T) {
	dir := t.TempDir()
	srv := []string{"-server", "https://127.0.0.1:1", "-token", "x", "-data-dir", dir}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // its start
		line   string // stderr's one line; "" for none
	}{
		{[]string{"-h"}, 0, "Usage of agent:", ""},
		{[]string{"-version"}, 0, "agent (devel) go", ""},
		{[]string{"-nope"}, 2, "", "agent: flag provided but not defined: -nope"},
		{[]string{"-timeout", "soon"}, 2, "", `agent: invalid value "soon" for flag -timeout: parse error`},
		{append(srv, "-timeout", "-1s"), 2, "", "agent: -timeout -1s: want 0 (never) or more"},
		{append(srv, "-servers", "foo,,"), 2, "", `agent: server "foo" is not host:port`},
		{append(srv, "-servers", "10.0.0.1:6443,,"), 2, "", `agent: server "" is not host:port`},
		{[]string{"-token", "x"}, 2, "", "agent: -server is required"},
		{[]string{"-server", "https://127.0.0.1:1"}, 2, "", "agent: -token or -token-file is required"},
		{[]string{"-server", "http://127.0.0.1:1", "-token", "x", "-data-dir", dir}, 2, "", `agent: server "http://127.0.0.1:1" is not an https://host:port URL`},
		{append(srv, "-token-file", "f"), 2, "", "agent: -token and -token-file are exclusive"},
		{append(srv, "-lb-listen", "127.0.0.1:0"), 2, "", "agent: -lb-listen needs -wait: the load balancer serves the node while the agent stays up"},
		{append(srv, "-renew-after", "1.5"), 2, "", "agent: RenewAfter 1.5 is not within (0, 1)"},
		{append(srv, "-wait", "-lb-listen", "6444"), 2, "", `agent: -lb-listen "6444": address 6444: missing port in address`},
		{append(srv, "extra"), 2, "", `agent: unexpected arguments ["extra"]`},
	} {
		code, out, errOut := agentRun(t.Context(), tc.args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != tc.code || !strings.HasPrefix(out, tc.stdout) ||
			(tc.line == "" && errOut != "") || (tc.line != "" && (len(lines) != 1 || lines[0] != tc.line)) {
			t.Errorf("%q: exit %d, stdout %.40q, stderr %q; want exit %d, stdout %q..., stderr %q",
				tc.args, code, out, errOut, tc.code, tc.stdout, tc.line)
		}
	}
}

// lastLine is the one line of stderr that is not a log record.
func lastLine(t *testing.T, stderr string) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(l, "time=") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("stderr holds %d lines besides the log, want 1:\n%s", len(lines), stderr)
	}
	return lines[0]
}

// What asking again does not mend ends the command within one attempt,
// with one line and exit 1, however long -timeout: a token whose CA hash
// is another CA's, a -program the server does not serve (404), a node
// name it refuses (400).
func TestPermanentErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		wants []string
	}{
		{"CA hash", []string{"-token", "K10" + strings.Repeat("0", 64) + "::server:" + secret}, []string{"agent: the server's CA is not the one the token pins: the CA of 127.0.0.1:"}},
		{"program", []string{"-program", "rke2"}, []string{"404 Not Found", "GET /v1-rke2/config", "(is -program rke2 right? k3s serves /v1-k3s, RKE2 /v1-rke2)"}},
		{"node name", []string{"-node-name", "worker_1"}, []string{"400 Bad Request", `invalid node name or password (the node name "worker_1" or the password from `, "the answer does not say which"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSupervisor(t)
			args := append(baseArgs(f, t.TempDir()), "-timeout", "0")
			code, _, errOut := runCommand(t, append(args, tc.args...)...)
			line := lastLine(t, errOut)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if n := strings.Count(line, "agent:"); n != 1 {
				t.Errorf("line %q says agent: %d times, want once", line, n)
			}
			for _, want := range tc.wants {
				if !strings.Contains(line, want) {
					t.Errorf("line %q does not say %q", line, want)
				}
			}
			if n := f.cacerts.Load(); n != 1 {
				t.Errorf("/cacerts asked %d times, want once: one attempt", n)
			}
		})
	}
}

// The log goes to stderr; stdout holds the certificates' lines alone.
func TestLogToStderr(t *testing.T) {
	f := newFakeSupervisor(t)
	code, out, errOut := agentRun(t.Context(), baseArgs(f, t.TempDir())...)
	if code != 0 || strings.Count(out, "\n") != 4 || strings.Contains(out, "level=") {
		t.Errorf("exit %d, stdout:\n%s", code, out)
	}
	if !strings.Contains(errOut, "level=INFO msg=\"agent: certificate written\"") {
		t.Errorf("no log on stderr:\n%s", errOut)
	}
}

// -wait -lb-listen runs the node's load balancer in front of the server:
// a connection to it reaches the server (GET /ping through it, over TLS
// end to end), until the agent stops. A -server without a port means
// port 443, for the load balancer as for the Client (which gets the
// certificates from -servers here: nothing listens on 443).
func TestLoadBalancer(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(f *fakeSupervisor) []string
	}{
		{"server with a port", func(*fakeSupervisor) []string { return nil }},
		{"server without a port", func(f *fakeSupervisor) []string {
			return []string{"-server", "https://127.0.0.1", "-servers", strings.TrimPrefix(f.url, "https://")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSupervisor(t)
			addr := freeAddr(t) // the load balancer listens there
			ctx, cancel := context.WithCancel(t.Context())
			out := syncBuffer{lines: make(chan string, 8)}
			var errOut syncBuffer
			done := make(chan int, 1)
			args := append(append(baseArgs(f, t.TempDir()), tc.args(f)...), "-wait", "-lb-listen", addr)
			go func() { done <- cli.Main(ctx, "agent", args, &out, &errOut, run) }()
			for up := false; !up; {
				select {
				case line := <-out.lines:
					up = strings.HasPrefix(line, "load balancer on "+addr)
				case code := <-done:
					t.Fatalf("exit %d before the load balancer ran:\n%s", code, errOut.String())
				}
			}
			if code, body, err := ping(addr, f.caPEM, ""); err != nil {
				t.Fatal(err)
			} else if body != "pong" {
				t.Errorf("through the load balancer: %d %q", code, body)
			}
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("exit %d, want 0", code)
			}
		})
	}
}

// The command as a user runs it: a server address whose port cannot be
// dialed is a wrong flag value (exit 2, one line), in -server as in
// -servers; a -token-file or -data-dir that cannot be used is a failure
// (exit 1, one line), as in the example server.
func TestCommandExitCodes(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "a-file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("K10::server:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// -timeout 1s: a port taken for a server that is down (as before
	// this was a usage error) ends the command quickly.
	base := []string{"-token", "x", "-data-dir", dir, "-node-ip", "192.0.2.10", "-timeout", "1s"}
	srv := append([]string{"-server", "https://127.0.0.1:1"}, base...)
	for _, c := range []struct {
		args []string
		code int
		line string // stderr's one line; its start
	}{
		{append(srv, "-servers", "127.0.0.1:99999"), 2, `agent: server address "127.0.0.1:99999": port "99999" is not 1 to 65535`},
		{append(srv, "-servers", "127.0.0.1:0"), 2, `agent: server address "127.0.0.1:0": port "0" is not 1 to 65535`},
		{append(srv, "-servers", "127.0.0.1:"), 2, `agent: server address "127.0.0.1:": port "" is not 1 to 65535`},
		{append(srv, "-servers", "127.0.0.1:abc"), 2, `agent: server address "127.0.0.1:abc": port "abc" is not 1 to 65535`},
		{append([]string{"-server", "https://127.0.0.1:99999"}, base...), 2, `agent: server "https://127.0.0.1:99999": port "99999" is not 1 to 65535`},
		{append([]string{"-server", "https://127.0.0.1:0"}, base...), 2, `agent: server "https://127.0.0.1:0": port "0" is not 1 to 65535`},
		{append([]string{"-server", "https://127.0.0.1:"}, base...), 2, `agent: server "https://127.0.0.1:": port "" is not 1 to 65535`},
		{append([]string{"-server", "https://127.0.0.1:abc"}, base...), 2, `agent: server "https://127.0.0.1:abc" is not an https://host:port URL`},
		{[]string{"-server", "https://127.0.0.1:1", "-timeout", "1s", "-token-file", filepath.Join(dir, "missing")}, 1, "agent: -token-file: open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{[]string{"-server", "https://127.0.0.1:1", "-timeout", "1s", "-token-file", tokenFile, "-data-dir", notDir}, 1, "agent: reading the node password: open " + notDir},
	} {
		code, _, errOut := runCommand(t, c.args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != c.code || len(lines) != 1 || !strings.HasPrefix(lines[0], c.line) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and one line %q...", c.args, code, errOut, c.code, c.line)
		}
	}
}

// A state file that holds addresses the load balancer cannot dial (a port
// of "", 0, "abc" or 99999, written by hand or by another tool) does not
// stop `agent -wait -lb-listen`: they are dropped and logged, and the
// command runs its load balancer, at every start. (It exited 1 after
// getting its certificates, until someone deleted the file.)
func TestLoadBalancerBadStateFile(t *testing.T) {
	f := newFakeSupervisor(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "agent", "etc", "k3s-agent-load-balancer.json")
	if err := os.MkdirAll(filepath.Dir(state), 0o700); err != nil {
		t.Fatal(err)
	}
	body := `{"ServerURL":"` + f.url + `","ServerAddresses":["` + strings.TrimPrefix(f.url, "https://") +
		`","127.0.0.1:","127.0.0.1:0","127.0.0.1:abc","127.0.0.1:99999"]}`
	if err := os.WriteFile(state, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t) // the load balancer listens there
	for run := range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := command(t, ctx, append(baseArgs(f, dir), "-wait", "-lb-listen", addr)...)
		_, errOut, err := startLB(t, cmd, addr)
		if err != nil {
			cancel()
			t.Fatalf("run %d: %v", run, err)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("run %d: %v after SIGTERM, want exit 0:\n%s", run, err, errOut.String())
		}
		cancel()
		if run == 0 && !strings.Contains(errOut.String(), "127.0.0.1:99999") {
			t.Errorf("the addresses ignored are not logged:\n%s", errOut.String())
		}
	}
}

// A server that cannot be reached, for the whole -timeout: two lines at
// INFO (the failure, the wait), not two per attempt, and no "moving on
// to the next server" with one server; then the one line of the failure,
// "agent:" once.
func TestUnreachableServerQuiet(t *testing.T) {
	addr := freeAddr(t) // nothing listens there
	code, _, errOut := runCommand(t, "-server", "https://"+addr, "-token", "K10::server:"+secret, "-node-ip", "192.0.2.10",
		"-data-dir", t.TempDir(), "-backoff-base", "10ms", "-backoff-cap", "20ms", "-timeout", "1s")
	last := lastLine(t, errOut)
	if code != 1 || !strings.HasPrefix(last, "agent: giving up (context deadline exceeded); the last attempt: GET /cacerts: no server answered: "+addr) ||
		strings.Count(last, "agent:") != 1 {
		t.Errorf("exit %d, last line %q", code, last)
	}
	if n := strings.Count(errOut, "level=INFO"); n != 2 || strings.Contains(errOut, "moving on") {
		t.Errorf("%d lines at INFO, want 2, and none moving on:\n%s", n, errOut)
	}
}
