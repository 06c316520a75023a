package agent

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nodepass/nodepass/agent/internal/statefile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logBuffer collects a Client's log lines, and signals each that holds
// watch on seen if both are set.
type logBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	watch string
	seen  chan string
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen != nil && bytes.Contains(p, []byte(l.watch)) {
		l.seen <- string(p)
	}
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// joined returns a cluster, its server, and the data directory of a node
// that has joined it.
func joined(t *testing.T) (*cluster, *supervisor, string) {
	t.Helper()
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	dir := t.TempDir()
	get(t, newClient(t, testOptions(cl, s.addr, dir, nil)))
	return cl, s, dir
}

// testOptions are a node's options against server, its data in dir.
func testOptions(cl *cluster, server, dir string, logs *logBuffer) *Options {
	var w interface{ Write([]byte) (int, error) } = &logBuffer{}
	if logs != nil {
		w = logs
	}
	return &Options{
		Server:           "https://" + server,
		Token:            cl.token(),
		NodeName:         "worker-1",
		NodeIP:           "192.0.2.10",
		DataDir:          dir,
		NodePasswordFile: filepath.Join(dir, "password"),
		HeaderTimeout:    time.Second, // a live server answers in milliseconds, even under -race or qemu
		RequestTimeout:   2 * time.Second,
		Backoff:          Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
		Logger:           slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

func newClient(t *testing.T, opts *Options) *Client {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func get(t *testing.T, c *Client) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := c.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerCA == nil {
		t.Error("Result.ServerCA is nil after Get")
	}
	return res
}

var allFiles = []string{
	"client-ca.crt", "server-ca.crt",
	"serving-kubelet.crt", "serving-kubelet.key", "client-kubelet.crt", "client-kubelet.key",
	"client-kube-proxy.crt", "client-kube-proxy.key", "client-k3s-controller.crt", "client-k3s-controller.key",
}

// ageFiles sets the time the agent's certificates in dir were written.
func ageFiles(t *testing.T, dir string, when time.Time) {
	t.Helper()
	for _, f := range allFiles {
		if err := os.Chtimes(filepath.Join(dir, "agent", f), when, when); err != nil {
			t.Fatal(err)
		}
	}
}

// checkFiles checks that the agent's files are where a k3s agent keeps
// them, mode 0600, with no temporary file beside them.
func checkFiles(t *testing.T, dir string) {
	t.Helper()
	for _, f := range allFiles {
		fi, err := os.Stat(filepath.Join(dir, "agent", f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "agent"))
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// A first join against one server over HTTP/2: every file written, one
// TLS handshake for the whole attempt (a k3s agent makes one per
// request, ten), eight requests.
func TestColdJoin(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	s.announce = []string{s.addr}
	dir := t.TempDir()
	c := newClient(t, testOptions(cl, s.addr, dir, nil))
	res := get(t, c)
	checkFiles(t, dir)
	for _, cr := range res.Certs {
		if !cr.Issued || cr.Verdict.State != CertValid || cr.Err != nil {
			t.Errorf("%s: issued %v, status %v, err %v; want issued, valid", cr.Name, cr.Issued, cr.Verdict.State, cr.Err)
		}
	}
	if string(res.Config) != s.config() {
		t.Errorf("config %q", res.Config)
	}
	st := c.Stats()
	if st.Handshakes != 1 || s.conns.Load() != 1 {
		t.Errorf("%d handshakes, server saw %d connections; want 1", st.Handshakes, s.conns.Load())
	}
	if s.http1.Load() != 0 {
		t.Errorf("%d requests over HTTP/1, want every one over HTTP/2", s.http1.Load())
	}
	// k3s's join (pkg/agent/config get()) does not ask /apiservers: 8.
	if st.Requests != 8 || s.total() != 8 {
		t.Errorf("%d requests, server saw %d; want 8", st.Requests, s.total())
	}
	if st.Attempts != 1 || st.Requested != 4 || st.Issued != 4 || st.Kept != 0 || st.Failovers != 0 {
		t.Errorf("stats %+v", st)
	}
	// The keys are the agent's: the certificates are for them.
	pw, err := os.ReadFile(filepath.Join(dir, "password"))
	if err != nil || len(strings.TrimSpace(string(pw))) != 32 {
		t.Errorf("password file %q, %v; want 32 hex digits", pw, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "password")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("password file mode: %v", err)
	}
}

// A restart with valid certificates requests none: the servers check no
// node password, and the agent sends only the four requests that cost
// them nothing, over one handshake.
func TestRestartKeepsValidCertificates(t *testing.T) {
	cl, s, dir := joined(t)
	before := map[string][]byte{}
	for _, f := range allFiles {
		before[f], _ = os.ReadFile(filepath.Join(dir, "agent", f))
	}
	nodeBefore, totalBefore := s.nodeRequests(), s.total()

	c := newClient(t, testOptions(cl, s.addr, dir, nil))
	res := get(t, c)
	for _, cr := range res.Certs {
		if cr.Issued || cr.Verdict.State != CertValid {
			t.Errorf("%s: issued %v, status %v; want kept, valid", cr.Name, cr.Issued, cr.Verdict.State)
		}
	}
	st := c.Stats()
	if st.Requested != 0 || st.Kept != 4 {
		t.Errorf("requested %d, kept %d; want 0, 4", st.Requested, st.Kept)
	}
	if n := s.nodeRequests() - nodeBefore; n != 0 {
		t.Errorf("%d node-password requests on restart, want 0", n)
	}
	// config, client-ca, server-ca: /cacerts is not asked again, the CA
	// on disk matches the token.
	if n := s.total() - totalBefore; n != 3 || st.Requests != 3 {
		t.Errorf("%d requests on restart (server saw %d), want 3", st.Requests, n)
	}
	if st.Handshakes != 1 {
		t.Errorf("%d handshakes, want 1", st.Handshakes)
	}
	for _, f := range allFiles {
		if b, _ := os.ReadFile(filepath.Join(dir, "agent", f)); !bytes.Equal(b, before[f]) {
			t.Errorf("%s changed on restart", f)
		}
	}
}

// A server that completes the TLS handshake and never answers costs one
// header timeout: the request moves to the next server at once, and the
// hung server is not tried again within the recovery delay. The same for
// one that never completes the handshake. The log says what timed out.
func TestHungServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tls    bool
		protos []string
		says   string
	}{
		{"HTTP/2", true, []string{"h2", "http/1.1"}, "no response headers within 1s"},
		{"HTTP/1.1", true, nil, "no response headers within 1s"},
		{"no TLS handshake", false, nil, "no TLS connection within 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t)
			var ca *testCA
			if tc.tls {
				ca = cl.serverCA
			}
			hung, handshakes := hungServer(t, ca, tc.protos...)
			s := newSupervisor(t, cl)
			s.announce = []string{hung, s.addr}
			var logs logBuffer
			opts := testOptions(cl, s.addr, t.TempDir(), &logs)
			opts.Servers = []string{hung} // remembered: the hung one first
			c := newClient(t, opts)
			res := get(t, c)
			if l := logs.String(); !strings.Contains(l, `err="`+hung+": "+tc.says+`"`) || strings.Contains(l, "deadline exceeded") {
				t.Errorf("the log does not say %q of %s:\n%s", tc.says, hung, l)
			}
			if !res.usable() {
				t.Fatal("certificates not usable")
			}
			st := c.Stats()
			wantRequests, wantHandshakes := uint64(1), int32(1)
			if !tc.tls {
				wantRequests, wantHandshakes = 0, 0
			}
			if st.ServerRequests[hung] != wantRequests {
				t.Errorf("%d requests to the hung server, want %d (then left out)", st.ServerRequests[hung], wantRequests)
			}
			if st.Failovers != 1 || st.Handshakes != 2 {
				t.Errorf("%d failovers, %d handshakes started; want 1, 2", st.Failovers, st.Handshakes)
			}
			if handshakes.Load() != wantHandshakes {
				t.Errorf("hung server completed %d handshakes, want %d", handshakes.Load(), wantHandshakes)
			}
			if s.nodeRequests() != 2 {
				t.Errorf("%d node-password requests, want 2", s.nodeRequests())
			}
		})
	}
}

// A server that closes every connection is left for the next at once.
func TestClosingServer(t *testing.T) {
	cl := newCluster(t)
	closing, accepted := closingServer(t)
	s := newSupervisor(t, cl)
	opts := testOptions(cl, s.addr, t.TempDir(), nil)
	opts.Servers = []string{closing}
	c := newClient(t, opts)
	get(t, c)
	st := c.Stats()
	if accepted.Load() != 1 || st.Failovers != 1 {
		t.Errorf("closing server accepted %d connections, %d failovers; want 1, 1", accepted.Load(), st.Failovers)
	}
	if st.ServerRequests[closing] != 0 {
		t.Errorf("%d requests sent to the closing server, want 0 (its handshake failed)", st.ServerRequests[closing])
	}
}

// Options.DialContext makes every connection to every server: the
// configured one, the others known, /cacerts before the CA is known and
// the rest. The servers are named 127.0.0.2, where nothing listens: only
// the dialer given, which sends them to 127.0.0.1 as a proxy would,
// reaches them.
func TestDialMakesEveryConnection(t *testing.T) {
	cl := newCluster(t)
	a, b := newSupervisor(t, cl), newSupervisor(t, cl)
	at2 := func(addr string) string { return strings.Replace(addr, "127.0.0.1:", "127.0.0.2:", 1) }
	var mu sync.Mutex
	var dialed []string
	opts := testOptions(cl, at2(a.addr), t.TempDir(), nil)
	opts.Servers = []string{at2(b.addr), at2(a.addr)}
	opts.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, strings.Replace(addr, "127.0.0.2:", "127.0.0.1:", 1))
	}
	c := newClient(t, opts)
	get(t, c)
	st := c.Stats()
	mu.Lock()
	defer mu.Unlock()
	if uint64(len(dialed)) != st.Handshakes || a.total() == 0 || b.total() == 0 {
		t.Errorf("%d dials for %d handshakes, %d and %d requests to the servers; want a dial for each, and both servers used",
			len(dialed), st.Handshakes, a.total(), b.total())
	}
	for _, d := range dialed {
		if d != at2(a.addr) && d != at2(b.addr) {
			t.Errorf("dialed %s, not a server", d)
		}
	}
}

// An agent whose only server fails once (a 502, as a load balancer's
// address may answer while its backend changes) asks it again
// after the backoff's wait, not after RecoveryDelay: two attempts, the
// second within the test's deadline although RecoveryDelay is an hour and
// the backoff's cap ten minutes.
func TestOneServerRetriedAfterBackoff(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	var failed atomic.Bool
	s.override = func(w http.ResponseWriter, r *http.Request) bool {
		if failed.CompareAndSwap(false, true) {
			http.Error(w, "backend changing", http.StatusBadGateway)
			return true
		}
		return false
	}
	opts := testOptions(cl, s.addr, t.TempDir(), nil)
	opts.RecoveryDelay, opts.Backoff.Cap = time.Hour, 10*time.Minute
	c := newClient(t, opts)
	get(t, c)
	if st := c.Stats(); st.Attempts != 2 {
		t.Errorf("%d attempts, want 2", st.Attempts)
	}
}

// A 429 with Retry-After moves the request to the next server at once,
// and leaves the busy server out for the Retry-After.
func TestRetryAfterMovesOn(t *testing.T) {
	for _, tc := range []struct {
		name        string
		retryAfter  string
		least, most time.Duration // how long the busy server is left out, with a cap of an hour
	}{
		{"within the cap", "1800", 29 * time.Minute, 30 * time.Minute},
		{"bounded by the cap", "7200", 59 * time.Minute, time.Hour},
		{"as an HTTP date", time.Now().Add(30 * time.Minute).UTC().Format(http.TimeFormat), 28 * time.Minute, 30 * time.Minute},
		// Past what a Duration holds in seconds: still the cap.
		{"9,223,372,037 seconds", "9223372037", 59 * time.Minute, time.Hour},
		{"past 64 bits", "99999999999999999999", 59 * time.Minute, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t)
			busy := newSupervisor(t, cl)
			busy.override = func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Retry-After", tc.retryAfter)
				http.Error(w, "busy", http.StatusTooManyRequests)
				return true
			}
			s := newSupervisor(t, cl)
			opts := testOptions(cl, s.addr, t.TempDir(), nil)
			opts.Servers = []string{busy.addr}
			opts.Backoff.Cap = time.Hour
			c := newClient(t, opts)
			get(t, c)
			if n := busy.total(); n != 1 {
				t.Errorf("busy server got %d requests, want 1", n)
			}
			if d := c.servers.nextUp(time.Now()); d != 0 {
				t.Errorf("NextUp %v, want 0: the healthy server is up", d)
			}
			if left := time.Until(c.servers.down[busy.addr]); left < tc.least || left > tc.most {
				t.Errorf("busy server left out for %v, want within [%v, %v]", left, tc.least, tc.most)
			}
		})
	}
}

// A 400 ends the request with the server's message.
func TestBadRequestIsClear(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	s.override = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost {
			return false
		}
		http.Error(w, "certificate request for \"x\", want \"worker-1\"\nmore", http.StatusBadRequest)
		return true
	}
	opts := testOptions(cl, s.addr, t.TempDir(), nil)
	opts.StopOnRejection = true // a 400 ends Get: no deadline to meet on a loaded machine
	_, err := newClient(t, opts).Get(t.Context())
	want := s.addr + ` answered 400 Bad Request to POST /v1-k3s/serving-kubelet.crt: certificate request for "x", want "worker-1"`
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "more") {
		t.Fatalf("Get: %v; want it to say %s", err, want)
	}
}

// What does not mend by asking again ends Get within one attempt with
// StopOnRejection: a token whose CA hash is another CA's, a program the
// server does not serve (404), a node name it refuses (400, as nodepass's
// httpauth answers a name that is not a DNS-1123 subdomain).
func TestPermanentErrorsStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(*Options)
		want error
	}{
		{"CA hash", func(o *Options) { o.Token = "K10" + strings.Repeat("0", 64) + "::server:s3cret" }, ErrCARejected},
		{"program", func(o *Options) { o.Program = "rke2" }, ErrRefused},
		{"node name", func(o *Options) { o.NodeName = "worker_1" }, ErrRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t)
			s := newSupervisor(t, cl)
			s.override = func(w http.ResponseWriter, r *http.Request) bool {
				if strings.Contains(r.Header.Get("K3s-Node-Name"), "_") {
					http.Error(w, "invalid node name or password", http.StatusBadRequest)
					return true
				}
				return false
			}
			opts := testOptions(cl, s.addr, t.TempDir(), nil)
			opts.StopOnRejection = true
			tc.opts(opts)
			c := newClient(t, opts)
			_, err := c.Get(t.Context())
			if !errors.Is(err, tc.want) {
				t.Errorf("Get: %v, want %v", err, tc.want)
			}
			if n := c.Stats().Attempts; n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
		})
	}
}

// RKE2: its routes, its headers, its controller's certificate.
func TestProgramRKE2(t *testing.T) {
	dir := t.TempDir()
	c := newClient(t, &Options{Server: "https://127.0.0.1:9345", Token: "pw", NodeName: "n1", NodeIP: "192.0.2.1",
		Program: "rke2", DataDir: dir, NodePassword: "p", Logger: discard})
	if err := c.addresses(); err != nil {
		t.Fatal(err)
	}
	req, err := c.request(t.Context(), "127.0.0.1:9345", call{method: "POST", path: c.prefix + "/serving-kubelet.crt", node: true})
	if err != nil {
		t.Fatal(err)
	}
	if req.URL.String() != "https://127.0.0.1:9345/v1-rke2/serving-kubelet.crt" {
		t.Errorf("URL %s", req.URL)
	}
	for h, want := range map[string]string{"Rke2-Node-Name": "n1", "Rke2-Node-Password": "p", "Rke2-Node-Ip": "192.0.2.1"} {
		if got := req.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if u, p, ok := req.BasicAuth(); !ok || u != "node" || p != "pw" {
		t.Errorf("basic auth %q %q %v", u, p, ok)
	}
	if last := c.certs[3]; last.certFile != filepath.Join(dir, "agent", "client-rke2-controller.crt") || last.cn != "system:rke2-controller" {
		t.Errorf("controller certificate %s, %s", last.certFile, last.cn)
	}
	if c.opts.StateFile != filepath.Join(dir, "agent", "etc", "rke2-agent-load-balancer.json") {
		t.Errorf("state file %s", c.opts.StateFile)
	}
}

// A node name with capitals joins, as in k3s, which lower-cases it on
// both sides (pkg/util/net.go GetHostnameAndIPs, and the server's
// pkg/nodepassword/validate.go getNodeInfo, which signs for the
// lower-case name): the node headers carry it lower-cased, the two
// node-password requests are sent once each, and a restart keeps what
// they got.
func TestNodeNameLowerCased(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	var mu sync.Mutex
	var names []string
	s.override = func(_ http.ResponseWriter, r *http.Request) bool {
		if n := r.Header.Get("K3s-Node-Name"); n != "" {
			mu.Lock()
			names = append(names, n)
			mu.Unlock()
		}
		return false
	}
	dir := t.TempDir()
	opts := testOptions(cl, s.addr, dir, nil)
	opts.NodeName = "Worker-1"
	get(t, newClient(t, opts))
	if n := s.nodeRequests(); n != 2 {
		t.Errorf("%d node-password requests, want 2", n)
	}
	mu.Lock()
	if !slices.Equal(names, []string{"worker-1", "worker-1"}) {
		t.Errorf("K3s-Node-Name headers %q, want worker-1 twice", names)
	}
	mu.Unlock()
	c := newClient(t, opts)
	get(t, c)
	if st := c.Stats(); st.Requested != 0 {
		t.Errorf("%d certificates requested on restart, want 0", st.Requested)
	}
}

// A 403 to a node-password request ends the attempt with an error that
// names the node and the password file.
func TestNodePasswordRejected(t *testing.T) {
	cl := newCluster(t)
	cl.passwords["worker-1"] = "another"
	s := newSupervisor(t, cl)
	dir := t.TempDir()
	opts := testOptions(cl, s.addr, dir, nil)
	opts.StopOnRejection = true
	c := newClient(t, opts)
	_, err := c.Get(t.Context())
	if !errors.Is(err, ErrNodePasswordRejected) {
		t.Fatalf("Get: %v, want ErrNodePasswordRejected", err)
	}
	for _, want := range []string{`"worker-1"`, filepath.Join(dir, "password")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if n := s.count("POST /v1-k3s/serving-kubelet.crt"); n != 1 {
		t.Errorf("%d serving certificate requests, want 1 (403 is not passed on to the next server)", n)
	}
}

// A wrong token: 401, ErrTokenRejected.
func TestTokenRejected(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	opts := testOptions(cl, s.addr, t.TempDir(), nil)
	opts.Token = strings.TrimSuffix(cl.token(), cl.secret) + "wrong"
	opts.StopOnRejection = true
	_, err := newClient(t, opts).Get(t.Context())
	if !errors.Is(err, ErrTokenRejected) {
		t.Fatalf("Get: %v, want ErrTokenRejected", err)
	}
}

// A token whose CA hash is not the server's CA's: nothing but /cacerts
// is sent.
func TestTokenCAHashMismatch(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	opts := testOptions(cl, s.addr, t.TempDir(), nil)
	opts.Token = "K10" + strings.Repeat("0", 64) + "::server:" + cl.secret
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := newClient(t, opts).Get(ctx)
	if !errors.Is(err, ErrCARejected) || errors.Is(err, ErrTokenRejected) {
		t.Fatalf("Get: %v, want ErrCARejected alone: the agent refused the CA, the server refused nothing", err)
	}
	if n, m := s.total(), s.count("GET /cacerts"); n != m {
		t.Errorf("%d requests, %d of them /cacerts: the token went to a server the agent does not trust", n, m)
	}
}

// The servers announced are kept in the state file, and the next run
// starts from them; the configured server is never dropped.
func TestStateFile(t *testing.T) {
	cl := newCluster(t)
	a, b := newSupervisor(t, cl), newSupervisor(t, cl)
	a.announce = []string{b.addr} // a does not announce itself
	b.announce = []string{b.addr}
	dir := t.TempDir()
	learnServers(t, testOptions(cl, a.addr, dir, nil))
	path := filepath.Join(dir, "agent", "etc", "k3s-agent-load-balancer.json")
	s, err := statefile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Default != "https://"+a.addr || !slices.Equal(s.Addresses, []string{b.addr, a.addr}) {
		t.Errorf("state %+v, want default %s and both servers", s, a.addr)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode: %v, %v", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range ents {
		if e.Name() != filepath.Base(path) && e.Name() != "serving-kubelet-server-ca.sha256" {
			t.Errorf("%s beside the state file: a temporary file left?", e.Name())
		}
	}
	c := newClient(t, testOptions(cl, a.addr, dir, nil))
	if got := c.servers.addresses(); !slices.Equal(got, []string{b.addr, a.addr}) {
		t.Errorf("servers on restart %v, want %v", got, []string{b.addr, a.addr})
	}
}

// A corrupt state file is logged and ignored; a missing one is no error.
func TestStateFileCorrupt(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	dir := t.TempDir()
	path := filepath.Join(dir, "agent", "etc", "k3s-agent-load-balancer.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"ServerAddresses":["a:1",`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	c := newClient(t, testOptions(cl, s.addr, dir, &logs))
	if !strings.Contains(logs.String(), "ignoring the server list") || !strings.Contains(logs.String(), path) {
		t.Errorf("no log line naming the corrupt state file:\n%s", logs.String())
	}
	if got := c.servers.addresses(); !slices.Equal(got, []string{s.addr}) {
		t.Errorf("servers %v, want only the configured one", got)
	}
	get(t, c)

	var logs2 logBuffer
	c2 := newClient(t, testOptions(cl, s.addr, t.TempDir(), &logs2))
	if strings.Contains(logs2.String(), "ignoring") || len(c2.servers.addresses()) != 1 {
		t.Errorf("missing state file: servers %v, logs:\n%s", c2.servers.addresses(), logs2.String())
	}
}

var discard = slog.New(slog.DiscardHandler)

// learnServers runs Get, then Renew until it has asked a server for the
// list of servers once, and returns the Client.
func learnServers(t *testing.T, opts *Options) *Client {
	t.Helper()
	return renewFor(t, opts, 2)
}

// renewFor runs Get, then Renew until it has gone to sleep sleeps times
// (the first time before it asks for the list of servers, if that is
// due), and returns the Client.
func renewFor(t *testing.T, opts *Options, sleeps int) *Client {
	t.Helper()
	logs := &logBuffer{watch: "agent: next renewal", seen: make(chan string, 8)}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newClient(t, opts)
	get(t, c)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- c.Renew(ctx) }()
	for range sleeps {
		<-logs.seen
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Renew: %v", err)
	}
	return c
}

// A renewal that fails while the certificates are valid: Get goes on with
// them, and Renew retries until the servers issue new ones.
func TestRenewalFailureKeepsValid(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	var short atomic.Bool // issue certificates 95 % through their life
	short.Store(true)
	s.validity = func() (time.Time, time.Time) {
		if short.Load() {
			return time.Now().Add(-95 * time.Hour), time.Now().Add(5 * time.Hour)
		}
		return time.Now().Add(-time.Minute), time.Now().Add(365 * 24 * time.Hour)
	}
	dir := t.TempDir()
	get(t, newClient(t, testOptions(cl, s.addr, dir, nil)))
	ageFiles(t, dir, time.Now().Add(-95*time.Hour)) // issued 95 hours ago

	var failing atomic.Bool
	failing.Store(true)
	s.override = func(w http.ResponseWriter, r *http.Request) bool {
		if failing.Load() && r.Method == http.MethodPost {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	logs := logBuffer{watch: "certificate written", seen: make(chan string, 4)}
	c := newClient(t, testOptions(cl, s.addr, dir, &logs))
	res := get(t, c)
	for _, cr := range res.Certs {
		if cr.Verdict.State != CertRenewDue || cr.Err == nil || cr.Issued {
			t.Errorf("%s: %v, err %v, issued %v; want renewal due and failed", cr.Name, cr.Verdict.State, cr.Err, cr.Issued)
		}
	}
	if !strings.Contains(logs.String(), "going on with the certificate on disk") {
		t.Errorf("no log line for the failed renewal:\n%s", logs.String())
	}

	// In the background: the servers recover, and issue certificates.
	short.Store(false)
	failing.Store(false)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- c.Renew(ctx) }()
	for range 4 {
		<-logs.seen
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Renew: %v, want context.Canceled", err)
	}
	for _, sp := range c.certs {
		if st := c.check(sp, c.diskCA(sp.serverCA), time.Now()); st.State != CertValid {
			t.Errorf("%s after Renew: %v (%v)", sp.name, st.State, st.Err)
		}
	}
}

// A corrupt certificate on disk is logged and requested again; the
// others are kept.
func TestCorruptCertificateRequestedAgain(t *testing.T) {
	cl, s, dir := joined(t)
	file := filepath.Join(dir, "agent", "client-kube-proxy.crt")
	if err := os.WriteFile(file, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	c := newClient(t, testOptions(cl, s.addr, dir, &logs))
	get(t, c)
	if st := c.Stats(); st.Requested != 1 || st.Kept != 3 {
		t.Errorf("requested %d, kept %d; want 1, 3", st.Requested, st.Kept)
	}
	if n := s.count("POST /v1-k3s/client-kube-proxy.crt"); n != 2 {
		t.Errorf("kube-proxy certificate requested %d times, want 2", n)
	}
	if !strings.Contains(logs.String(), "corrupt") || !strings.Contains(logs.String(), file) {
		t.Errorf("no log line naming the corrupt file:\n%s", logs.String())
	}
}

// A cluster whose client CA changed: the three client certificates are
// requested again, the serving one kept.
func TestCertificatesOfAnotherCA(t *testing.T) {
	cl, s, dir := joined(t)
	cl.mu.Lock()
	cl.clientCA = newTestCA(t, "client-ca-2")
	cl.mu.Unlock()
	c := newClient(t, testOptions(cl, s.addr, dir, nil))
	res := get(t, c)
	for _, cr := range res.Certs {
		if want := cr.Name != "serving-kubelet"; cr.Issued != want {
			t.Errorf("%s: issued %v, want %v", cr.Name, cr.Issued, want)
		}
	}
}

// With every server gone, the certificates on disk (valid) are used.
func TestOfflineUsesCertificatesOnDisk(t *testing.T) {
	cl, s, dir := joined(t)
	s.srv.Close()
	res := get(t, newClient(t, testOptions(cl, s.addr, dir, nil)))
	if res.Offline == nil {
		t.Fatal("Offline not set with the server gone")
	}
	for _, cr := range res.Certs {
		if !cr.Verdict.State.Usable() {
			t.Errorf("%s: %v", cr.Name, cr.Verdict.State)
		}
	}
}

// A connection made after the last one closed resumes its TLS session.
// A session that presented the node's client certificate is resumed only
// by a connection that presents it: the server keeps the identity with
// the session. The join presents none; the next Get presents the
// certificate just issued, over a new connection.
func TestSessionResumed(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	c := newClient(t, testOptions(cl, s.addr, t.TempDir(), nil))
	for range 2 {
		get(t, c)
		c.mu.Lock()
		c.dropConn(s.addr)
		c.mu.Unlock()
	}
	get(t, c)
	if st := c.Stats(); st.Handshakes != 3 || st.Resumed != 1 {
		t.Errorf("%d handshakes, %d resumed; want 3, the third resumed", st.Handshakes, st.Resumed)
	}
	if users := s.usersOf("GET /v1-k3s/config"); !slices.Equal(users, []string{"node", "node", "node"}) {
		t.Errorf("config requests authenticated as %q, want the token each time", users)
	}
}

// The two node-password requests of a join go to the same server, which
// has the password in its cache after the first; the other requests go
// round the servers. (Round robin alone sends the two, which follow each
// other, to the two servers.)
func TestNodePasswordRequestsStay(t *testing.T) {
	cl := newCluster(t)
	a, b := newSupervisor(t, cl), newSupervisor(t, cl)
	a.announce = []string{a.addr, b.addr}
	b.announce = a.announce
	opts := testOptions(cl, a.addr, t.TempDir(), nil)
	opts.Servers = []string{b.addr}
	get(t, newClient(t, opts))
	if na, nb := a.nodeRequests(), b.nodeRequests(); na*nb != 0 || na+nb != 2 {
		t.Errorf("node-password requests: %d to one server, %d to the other; want both to one", na, nb)
	}
	if a.total() == 0 || b.total() == 0 {
		t.Errorf("requests %d and %d: want both servers used", a.total(), b.total())
	}
}

// Certificates dated as k3s dates them, on a CA five years old, by
// today's rule and by the older one (see issueRule). A restart requests
// none, and each is due for renewal 70-90 % of the way from when it was
// written to when it expires: a year, not the five since the CA's
// NotBefore.
func TestKeptOnOldCA(t *testing.T) {
	for _, rule := range []issueRule{ruleToday, ruleOlder} {
		t.Run(rule.String(), func(t *testing.T) {
			cl := newCluster(t)
			cl.serverCA = newTestCAAt(t, "server-ca", time.Now().Add(-5*year), nil)
			cl.clientCA = newTestCAAt(t, "client-ca", time.Now().Add(-5*year), nil)
			s := newSupervisor(t, cl)
			s.rule = rule
			dir := t.TempDir()
			written := time.Now()
			get(t, newClient(t, testOptions(cl, s.addr, dir, nil)))
			c := newClient(t, testOptions(cl, s.addr, dir, nil))
			res := get(t, c)
			if st := c.Stats(); st.Requested != 0 || st.Kept != 4 {
				t.Errorf("on restart: %d certificates requested, %d kept; want 0, 4", st.Requested, st.Kept)
			}
			for _, cr := range res.Certs {
				life := cr.Verdict.NotAfter.Sub(written)
				if at := cr.Verdict.RenewAt.Sub(written); at < life*7/10-time.Minute || at > life*9/10+time.Minute {
					t.Errorf("%s: renewal %v after it was written, want within 70-90 %% of %v", cr.Name, at, life)
				}
			}
		})
	}
}

// An agent whose clock lags its server's by two hours gets certificates
// before their NotBefore: it keeps them, on this run and the next, and
// does not renew them before most of a year.
func TestClockLag(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	s.validity = func() (time.Time, time.Time) {
		nb := time.Now().Add(2 * time.Hour)
		return nb, nb.Add(year)
	}
	dir := t.TempDir()
	c := newClient(t, testOptions(cl, s.addr, dir, nil))
	get(t, c)
	if st := c.Stats(); st.Attempts != 1 || st.Issued != 4 {
		t.Errorf("%d attempts, %d certificates issued; want 1, 4", st.Attempts, st.Issued)
	}
	c = newClient(t, testOptions(cl, s.addr, dir, nil))
	get(t, c)
	if st := c.Stats(); st.Requested != 0 {
		t.Errorf("%d certificates requested on restart, want 0", st.Requested)
	}
	c.mu.Lock()
	d := c.untilRenewal(nil)
	c.mu.Unlock()
	if d < 200*24*time.Hour {
		t.Errorf("renewal in %v, want most of a year", d)
	}
}

// Without Options.NodeIP, the node-password requests carry the address
// of the default route, as k3s's agent sends it (pkg/util/net.go
// GetHostnameAndIPs, the header set in pkg/agent/config/config.go
// getNodeNamedCrt): an address of one of the host's interfaces.
func TestNodeIPOfDefaultRoute(t *testing.T) {
	conn, err := net.Dial("udp", "198.51.100.1:9")
	if err != nil {
		t.Skipf("no IPv4 default route: %v", err)
	}
	want := conn.LocalAddr().(*net.UDPAddr).IP
	conn.Close()
	addrs, _ := net.InterfaceAddrs()
	if !slices.ContainsFunc(addrs, func(a net.Addr) bool { n, ok := a.(*net.IPNet); return ok && n.IP.Equal(want) }) {
		t.Fatalf("the route's source %v is none of the interfaces' addresses %v", want, addrs)
	}
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	opts := testOptions(cl, s.addr, t.TempDir(), nil)
	opts.NodeIP = ""
	get(t, newClient(t, opts))
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ips) != 2 {
		t.Fatalf("%d node-password requests, want 2", len(s.ips))
	}
	for _, h := range s.ips {
		if first, _, _ := strings.Cut(h, ","); first != want.String() {
			t.Errorf("Node-Ip %q, want %v first", h, want)
		}
	}
}

// A node whose address changed (DHCP, a move, a new --node-ip) renews its
// serving certificate at the next start, and keeps the three others: the
// API server dials the kubelet at its InternalIP, the address the agent
// sends now. k3s's agent sends the current addresses at every start
// (pkg/agent/config/config.go get, pkg/util/net.go GetHostnameAndIPs) and
// its server makes them the serving certificate's IP SANs
// (pkg/server/handlers/handlers.go ServingKubeletCert).
func TestServingCertNewAddress(t *testing.T) {
	for _, ips := range []string{"192.0.2.11", "192.0.2.10,2001:db8::10"} {
		t.Run(ips, func(t *testing.T) {
			cl, s, dir := joined(t) // with 192.0.2.10
			opts := testOptions(cl, s.addr, dir, nil)
			opts.NodeIP = ips
			c := newClient(t, opts)
			res := get(t, c)
			if st := c.Stats(); st.Requested != 1 || !res.Certs[0].Issued {
				t.Fatalf("%d certificates requested (serving issued: %v); want the serving certificate alone", st.Requested, res.Certs[0].Issued)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "agent", "serving-kubelet.crt"))
			block, _ := pem.Decode(b)
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, ip := range strings.Split(ips, ",") {
				if !slices.ContainsFunc(cert.IPAddresses, net.ParseIP(ip).Equal) {
					t.Errorf("the new serving certificate names %v, not %s", cert.IPAddresses, ip)
				}
			}
			c = newClient(t, opts)
			get(t, c)
			if n := c.Stats().Requested; n != 0 {
				t.Errorf("%d certificates requested on the next restart, want 0", n)
			}
		})
	}
}

// A node with no address (no --node-ip, no default route yet, early in a
// boot) sends nothing and keeps nothing: its attempt fails, as k3s's
// agent fails and retries (pkg/agent/config/config.go get: "failed to
// get node name and addresses"), and the next attempt looks again.
// Certificates on disk do not stand in: whether the serving certificate
// names the node's address cannot be told.
func TestNoAddress(t *testing.T) {
	cl, s, dir := joined(t)
	before := s.total()
	logs := &logBuffer{watch: "waiting to retrieve the certificates", seen: make(chan string, 100)}
	opts := testOptions(cl, s.addr, dir, logs)
	opts.NodeIP = ""
	c := newClient(t, opts)
	c.routeIPs = func() []net.IP { return nil }
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-logs.seen; cancel() }() // after the first attempt
	res, err := c.Get(ctx)
	if !errors.Is(err, errNoAddress) || res != nil {
		t.Errorf("Get: %v, %v; want errNoAddress and no certificates", res, err)
	}
	if n := s.total() - before; n != 0 {
		t.Errorf("%d requests sent without an address, want 0", n)
	}

	// The route comes up after two attempts.
	var looks atomic.Int32
	c.routeIPs = func() []net.IP {
		if looks.Add(1) <= 2 {
			return nil
		}
		return []net.IP{net.ParseIP("192.0.2.20")}
	}
	res = get(t, c)
	if st := c.Stats(); looks.Load() != 3 || !res.Certs[0].Issued || st.Requested != 1 {
		t.Errorf("looked %d times, serving issued %v, %d requested; want 3, true, 1", looks.Load(), res.Certs[0].Issued, st.Requested)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if last := s.ips[len(s.ips)-1]; last != "192.0.2.20" {
		t.Errorf("Node-Ip %q, want 192.0.2.20", last)
	}
}
