package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// testLogN keeps scrypt cheap enough for -race.
const testLogN = 6

var (
	herdOnce sync.Once
	herd30   *Herd
	herdErr  error
)

// testParams are k3s's parameters at testLogN.
var testParams = verify.Params{LogN: testLogN, R: 8, P: 1, KeyLen: 64, SaltLen: 8}

// testHerd returns a 30-node herd at testLogN, made once.
func testHerd(t *testing.T) *Herd {
	t.Helper()
	herdOnce.Do(func() {
		herd30, herdErr = NewHerd(context.Background(), 30, testLogN)
		if herdErr == nil {
			herdErr = herd30.MeasureLowerBound(context.Background())
		}
	})
	if herdErr != nil {
		t.Fatal(herdErr)
	}
	return herd30
}

// httpScenario is testHerd over HTTPS, its retries scaled down to 0.5-1
// s, its client timeout (10 s) and deadline (2 min) long enough for a
// starved machine.
var httpScenario = Scenario{Nodes: 30, LogN: testLogN, Mode: ModeHTTP, TimeScale: 0.1, BoundSample: 4,
	ClientTimeout: 100 * time.Second, Deadline: 20 * time.Minute}

// TestHerdHTTP runs a 30-node herd over HTTPS against every model. It
// checks counts, not time: retries are scaled down to 0.5-1 s, while the
// client timeout (10 s) and the deadline (2 min) are long enough for a
// starved machine; normally every node joins at its first attempt.
func TestHerdHTTP(t *testing.T) {
	h := testHerd(t)
	for _, name := range Models() {
		t.Run("model="+name, func(t *testing.T) {
			res, err := Run(t.Context(), httpScenario, h, name)
			if err != nil {
				t.Fatal(err)
			}
			if res.Joined != 30 || res.Stopped != "" || len(res.JoinTimes) != 30 {
				t.Fatalf("joined %d (%d join times), stopped %q", res.Joined, len(res.JoinTimes), res.Stopped)
			}
			if res.Attempts < 30 || res.Errors != 0 || res.ConnErrors != 0 {
				t.Errorf("attempts %d errors %d conn errors %d", res.Attempts, res.Errors, res.ConnErrors)
			}
			if res.Attempts != 30+res.Shed+res.Timeouts {
				t.Errorf("attempts %d != 30 joins + %d shed + %d timeouts", res.Attempts, res.Shed, res.Timeouts)
			}
			checkAgentCounts(t, res, uint64(len(httpSteps)))
			if res.Handshakes != res.Requests || res.Connections != res.Requests {
				t.Errorf("%d requests, %d TLS handshakes, %d connections accepted: want a new connection per request",
					res.Requests, res.Handshakes, res.Connections)
			}
			if res.Model != name || res.Mode != ModeHTTP || res.Agent != PolicyJitter || res.PeakHeap == 0 {
				t.Errorf("result header %q %q %q heap %d", res.Model, res.Mode, res.Agent, res.PeakHeap)
			}
			if res.LowerBound != h.LowerBound || res.Ratio <= 0 || res.P50 > res.P99 || res.P99 > res.Max {
				t.Errorf("lower bound %v ratio %v p50 %v p99 %v max %v", res.LowerBound, res.Ratio, res.P50, res.P99, res.Max)
			}
			checkReached(t, res)
			if (name == ModelNodepass) != (res.HeapBound > 0) || res.PeakMemory > res.HeapBound && res.HeapBound > 0 || res.PeakMemory < res.PeakHeap {
				t.Errorf("peak memory %d (heap %d), bound %d", res.PeakMemory, res.PeakHeap, res.HeapBound)
			}
			// Over HTTPS the local bound counts a connection per node.
			if res.LocalTransport <= 0 || res.LocalBound <= res.LocalTransport || res.LocalRatio <= 0 {
				t.Errorf("local lower bound %v with transport %v, ratio %v", res.LocalBound, res.LocalTransport, res.LocalRatio)
			}
		})
	}
}

// checkAgentCounts checks the counts of a herd that every node joined,
// with perAttempt requests in an attempt that succeeds: every node's last
// attempt sent them all, and both certificate requests of that attempt
// were password-checked, by scrypt (k3s models, 2 per node) or, for
// nodepass, once by scrypt and once from its cache.
func checkAgentCounts(t *testing.T, res *Result, perAttempt uint64) {
	t.Helper()
	n := uint64(res.Nodes)
	if res.Attempts < n || res.Requests < perAttempt*n || res.Requests > perAttempt*res.Attempts {
		t.Errorf("%s: %d attempts, %d requests for %d nodes; want at least %d per node, at most %d per attempt",
			res.Model, res.Attempts, res.Requests, n, perAttempt, perAttempt)
	}
	switch {
	case res.Model == ModelNodepass && (res.ScryptRuns != n || res.CacheHits < n):
		t.Errorf("nodepass: %d scrypt runs and %d cache hits for %d nodes, want one of each per node", res.ScryptRuns, res.CacheHits, n)
	case res.Model != ModelNodepass && res.ScryptRuns < 2*n:
		t.Errorf("%s: %d scrypt runs for %d nodes, want 2 per node at least", res.Model, res.ScryptRuns, n)
	}
}

// checkReached checks that a run in which every node joined knows when
// their first requests reached the servers: in order, and before the end.
func checkReached(t *testing.T, res *Result) {
	t.Helper()
	if res.ReachedFirst <= 0 || res.ReachedFirst > res.ReachedMedian || res.ReachedMedian > res.ReachedLast ||
		res.ReachedLast > res.Completion {
		t.Errorf("%s: first requests reached the servers at %v, %v (median), %v; completion %v",
			res.Model, res.ReachedFirst, res.ReachedMedian, res.ReachedLast, res.Completion)
	}
}

// TestHerdInprocServers runs every model in-process with three servers
// and failover, the path go test -bench takes.
func TestHerdInprocServers(t *testing.T) {
	h := testHerd(t)
	for _, name := range Models() {
		sc := Scenario{Nodes: 30, LogN: testLogN, Servers: 3, LB: LBFailover, TimeScale: 0.1, BoundSample: 4,
			ClientTimeout: 100 * time.Second, Deadline: 20 * time.Minute,
			Agent: BackoffPolicy{Base: time.Second, Cap: 30 * time.Second}}
		res, err := Run(t.Context(), sc, h, name)
		if err != nil {
			t.Fatal(err)
		}
		if res.Joined != 30 || res.Stopped != "" || res.Servers != 3 || res.LB != LBFailover {
			t.Errorf("%s: joined %d stopped %q servers %d lb %q", name, res.Joined, res.Stopped, res.Servers, res.LB)
		}
		checkReached(t, res)
		checkAgentCounts(t, res, uint64(len(inprocSteps)))
		if res.Handshakes != 0 || res.Connections != 0 {
			t.Errorf("%s: %d TLS handshakes, %d connections in-process", name, res.Handshakes, res.Connections)
		}
		if res.LocalBound <= 0 || res.LocalRatio <= 0 || res.LocalTransport != 0 {
			t.Errorf("%s: local lower bound %v (transport %v, want 0 in-process), ratio %v", name, res.LocalBound, res.LocalTransport, res.LocalRatio)
		}
	}
}

// httpTarget is agents and servers in one process: httpAgents against
// the httpServers.
type httpTarget struct {
	*httpAgents
	srv *httpServers
}

func (t httpTarget) close() {
	t.httpAgents.close()
	t.srv.close()
}

// pool returns a certificate pool holding the CA, as an agent builds it
// from /cacerts.
func (ca *benchCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// httpPair starts HTTPS servers for models and agents' clients for nodes
// against them, closed when the test ends.
func httpPair(t *testing.T, models []model, nodes []Node) httpTarget {
	t.Helper()
	srv, err := newHTTPServers(models, 0, Scenario{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	agents, err := newHTTPAgents(t.Context(), srv.urls, srv.ca.pem, names)
	if err != nil {
		srv.close()
		t.Fatal(err)
	}
	tgt := httpTarget{agents, srv}
	t.Cleanup(tgt.close)
	return tgt
}

// TestAgentAttemptHTTPS checks an attempt of a k3s agent over HTTPS:
// its ten requests in order (three of /cacerts, the first refused at the
// TLS handshake, then the configuration, the two CA files and four
// certificate POSTs), each on a new connection that the server accepted;
// on a k3s model, the token checked with scrypt on each of the seven
// authenticated ones and the node password on both kubelet certificate
// requests. A wrong password ends the attempt at the first of them,
// after 4 + 1 computations.
func TestAgentAttemptHTTPS(t *testing.T) {
	h := testHerd(t)
	store := verify.NewMemoryStore()
	for _, n := range h.Nodes[:2] {
		store.Set(n.Name, n.Hash)
	}
	m := newK3s(store, testParams)
	defer m.close(true)
	if err := m.loadToken(h.Token, true); err != nil {
		t.Fatal(err)
	}
	nodes := []Node{h.Nodes[0], {Name: h.Nodes[1].Name, Password: "wrong"}}
	tgt := httpPair(t, []model{m}, nodes)
	ctx := t.Context()

	o, requests, handshakes := attempt(ctx, tgt, 30*time.Second, 0, 0, nodes[0], h.Token)
	if o.status != http.StatusOK || requests != 10 || handshakes != 10 || o.guardedAt.IsZero() {
		t.Errorf("right password: %+v after %d requests, %d TLS handshakes; want 200 after 10 and 10", o, requests, handshakes)
	}
	if conns := tgt.srv.conns.Load(); conns != 10 {
		t.Errorf("the server accepted %d connections for 10 requests, want a new one each", conns)
	}
	if m.counts().scrypt != 9 {
		t.Errorf("%d scrypt runs for one attempt, want 9 (7 tokens, 2 node passwords)", m.counts().scrypt)
	}
	o, requests, handshakes = attempt(ctx, tgt, 30*time.Second, 1, 0, nodes[1], h.Token)
	if o.status != http.StatusForbidden || requests != 7 || handshakes != 7 {
		t.Errorf("wrong password: %+v after %d requests, %d handshakes; want 403 at the 7th", o, requests, handshakes)
	}
	if conns := tgt.srv.conns.Load(); conns != 17 {
		t.Errorf("the server accepted %d connections for 17 requests", conns)
	}
	if m.counts().scrypt != 14 {
		t.Errorf("%d scrypt runs after an attempt cut at the serving certificate, want 9 + 5", m.counts().scrypt)
	}
	o, requests, _ = attempt(ctx, tgt, 30*time.Second, 0, 0, nodes[0], "wrong-token")
	if o.status != http.StatusUnauthorized || requests != 4 {
		t.Errorf("wrong token: %+v after %d requests; want 401 at the 4th", o, requests)
	}
}

// TestScryptPerAttempt counts, for each model, the requests and scrypt
// computations of one agent's first attempt and of its second, over
// HTTPS: k3s-v1.25 checks the token as plaintext and the node password
// with scrypt (2 per attempt); v1.28 and latest check the token with
// scrypt on each of the seven authenticated requests too (9); nodepass
// knows the token from its load and the node's password after its first
// check (1, then 0).
func TestScryptPerAttempt(t *testing.T) {
	h := testHerd(t)
	for _, c := range []struct {
		model         string
		first, second uint64
	}{{ModelK3s125, 2, 2}, {ModelK3s128, 9, 9}, {ModelK3sLatest, 9, 9}, {ModelNodepass, 1, 0}} {
		t.Run(c.model, func(t *testing.T) {
			store := verify.NewMemoryStore()
			store.Set(h.Nodes[0].Name, h.Nodes[0].Hash)
			m, err := newModel(c.model, store, testParams, 1, nil, nil, serverEnv{token: h.Token})
			if err != nil {
				t.Fatal(err)
			}
			defer m.close(true)
			tgt := httpPair(t, []model{m}, h.Nodes[:1])
			for i, want := range []uint64{c.first, c.first + c.second} {
				o, requests, handshakes := attempt(t.Context(), tgt, 30*time.Second, 0, 0, h.Nodes[0], h.Token)
				if o.status != http.StatusOK || requests != 10 || handshakes != 10 {
					t.Fatalf("attempt %d: %+v after %d requests, %d handshakes; want 200 after 10 and 10", i+1, o, requests, handshakes)
				}
				if got := m.counts().scrypt; got != want {
					t.Errorf("after attempt %d: %d scrypt runs, want %d", i+1, got, want)
				}
			}
		})
	}
}

// TestK3sLatestInFlight checks k3s-latest's max-in-flight caps: 10
// mutating requests (the certificate POSTs) and 20 others, each refused
// past its cap with 429 and Retry-After: 1, over HTTPS and in-process;
// /cacerts is outside them.
func TestK3sLatestInFlight(t *testing.T) {
	h := testHerd(t)
	store := verify.NewMemoryStore()
	store.Set(h.Nodes[0].Name, h.Nodes[0].Hash)
	mi, err := newModel(ModelK3sLatest, store, testParams, 1, nil, nil, serverEnv{token: h.Token})
	if err != nil {
		t.Fatal(err)
	}
	m := mi.(*k3sModel)
	defer m.close(true)
	take := func(mutating bool, n int) (releases []func()) {
		for i := range n {
			release, ok := m.admit(mutating)
			if !ok {
				t.Fatalf("request %d of %d refused (mutating %v)", i+1, n, mutating)
			}
			releases = append(releases, release)
		}
		return releases
	}
	writes := take(true, k3sLatestWrites)
	if _, ok := m.admit(true); ok {
		t.Fatalf("mutating request %d admitted", k3sLatestWrites+1)
	}
	reads := take(false, k3sLatestReads-1) // a GET and a POST apart

	tgt := httpPair(t, []model{m}, h.Nodes[:1])
	ctx := t.Context()
	for _, c := range []struct {
		s    step
		want int
	}{{stepServingCert, http.StatusTooManyRequests}, {stepConfig, http.StatusOK}, {stepCACerts, http.StatusOK}} {
		o := tgt.do(ctx, 0, 0, h.Nodes[0], c.s, h.Token)
		if o.status != c.want || (c.want == http.StatusTooManyRequests) != (o.retryAfter == time.Second) {
			t.Errorf("%s %s with the mutating cap full: %+v, want %d (Retry-After 1 s with 429)", c.s.method(), c.s.path(), o, c.want)
		}
	}
	reads = append(reads, take(false, 1)...) // the non-mutating cap full
	if o := tgt.do(ctx, 0, 0, h.Nodes[0], stepConfig, h.Token); o.status != http.StatusTooManyRequests || o.retryAfter != time.Second {
		t.Errorf("GET config with the non-mutating cap full: %+v, want 429 with Retry-After 1 s", o)
	}
	if o := tgt.do(ctx, 0, 0, h.Nodes[0], stepCACerts, h.Token); o.status != http.StatusOK {
		t.Errorf("GET /cacerts with both caps full: %+v, want 200", o)
	}
	in := &inprocTarget{servers: []model{m}, second: 100 * time.Millisecond}
	if o := in.do(ctx, 0, 0, h.Nodes[0], stepServingCert, h.Token); o.status != http.StatusTooManyRequests || o.retryAfter != 100*time.Millisecond {
		t.Errorf("in-process with the mutating cap full: %+v, want 429 with one scaled second", o)
	}
	for _, release := range append(writes, reads...) {
		release()
	}
	if o := tgt.do(ctx, 0, 0, h.Nodes[0], stepServingCert, h.Token); o.status != http.StatusOK {
		t.Errorf("POST after the caps emptied: %+v, want 200", o)
	}
	// Every authenticated request paid its token's scrypt before the
	// caps (five of them), and only the one admitted POST its node
	// password's.
	if m.counts().scrypt != 6 {
		t.Errorf("%d scrypt runs, want 6: 5 tokens (k3s authenticates before its caps) and 1 node password", m.counts().scrypt)
	}
}

// TestKubeletCertificates checks what the benchmark's servers answer a
// certificate request: a POST's CSR key signed for the node, a GET's
// legacy key sent with its certificate, a CSR for another node refused.
func TestKubeletCertificates(t *testing.T) {
	ca, err := newBenchCA(DefaultCAAge, false)
	if err != nil {
		t.Fatal(err)
	}
	k, err := newAgentKey("node-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		client, post bool
		body         []byte
		cn           string
		blocks       int
	}{
		{false, true, k.csrs[stepServingCert], "node-1", 2},
		{true, true, k.csrs[stepClientCert], "system:node:node-1", 2},
		{false, false, nil, "node-1", 3},
	} {
		out, err := ca.kubeletCert("node-1", c.client, c.post, c.body)
		if err != nil {
			t.Fatal(err)
		}
		var blocks []*pem.Block
		for rest := out; ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			blocks = append(blocks, b)
		}
		if len(blocks) != c.blocks {
			t.Fatalf("%s: %d PEM blocks, want %d", c.cn, len(blocks), c.blocks)
		}
		cert, err := x509.ParseCertificate(blocks[0].Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s: %v", c.cn, err)
		}
		pub, _ := cert.PublicKey.(*ecdsa.PublicKey)
		if cert.Subject.CommonName != c.cn || c.post != (pub != nil && pub.Equal(k.key.Public())) {
			t.Errorf("certificate for %q, the agent's key %v; want %q, %v", cert.Subject.CommonName, !c.post, c.cn, c.post)
		}
	}
	csr2, err := k.request("node-2", stepServingCert)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.kubeletCert("node-1", false, true, csr2); err == nil || !strings.Contains(err.Error(), "node-2") {
		t.Errorf("a CSR for node-2 on node-1's request: %v", err)
	}
	if _, err := ca.kubeletCert("node-1", false, true, []byte("junk")); err == nil {
		t.Error("a body that is no CSR was signed")
	}
}

// TestInprocAnswers checks that in-process answers map errors as httpauth
// does, Retry-After rounded up to whole (scaled) seconds.
func TestInprocAnswers(t *testing.T) {
	tgt := &inprocTarget{second: 100 * time.Millisecond}
	for _, c := range []struct {
		err  error
		want outcome
	}{
		{nil, outcome{status: 200}},
		{verify.ErrMismatchedHashAndPassword, outcome{status: 403}},
		{verify.ErrInvalidInput, outcome{status: 400}},
		{verify.ErrNotFound, outcome{status: 401}},
		{&verify.OverloadError{After: 250 * time.Millisecond}, outcome{status: 503, retryAfter: 300 * time.Millisecond}},
		{&verify.OverloadError{After: time.Millisecond}, outcome{status: 503, retryAfter: 100 * time.Millisecond}},
		{verify.ErrClosed, outcome{status: 503}},
		{errors.New("store down"), outcome{status: 500}},
	} {
		if got, want := tgt.answer(c.err, true), c.want; got != want && (want.status != 403 && want.status != 400 || got.status != 401) {
			t.Errorf("answer(%v) for a token = %+v, want %+v or 401", c.err, got, want)
		}
		if got := tgt.answer(c.err, false); got != c.want {
			t.Errorf("answer(%v) = %+v, want %+v", c.err, got, c.want)
		}
	}
}

// TestK3sModelHeapGuard checks that an unbounded model asks the guard
// before each scrypt call and runs none once it has tripped.
func TestK3sModelHeapGuard(t *testing.T) {
	h := testHerd(t)
	store := verify.NewMemoryStore()
	store.Set(h.Nodes[0].Name, h.Nodes[0].Hash)
	guard := newHeapGuard(1)
	m, err := newModel(ModelK3s128, store, verify.DefaultParams, 1, guard, nil, serverEnv{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.close(true)
	for range 2 {
		if err := m.Ensure(t.Context(), h.Nodes[0].Name, h.Nodes[0].Password); !errors.Is(err, errGuardTripped) {
			t.Errorf("Ensure past the guard: %v", err)
		}
	}
	select {
	case <-guard.done:
	default:
		t.Error("the guard did not trip")
	}
	if m.counts().scrypt != 0 {
		t.Errorf("%d scrypt runs past the guard, want 0", m.counts().scrypt)
	}
}

func TestK3sModelEnrollsUnknownNode(t *testing.T) {
	store := verify.NewMemoryStore()
	m := newK3s(store, verify.Params{LogN: testLogN, R: 8, P: 1, KeyLen: 64, SaltLen: 8})
	defer m.close(true)
	ctx := t.Context()
	if err := m.Ensure(ctx, "new-node", "pw"); err != nil {
		t.Fatal(err)
	}
	if err := m.Ensure(ctx, "new-node", "other"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Errorf("second password: %v", err)
	}
	if err := m.Ensure(ctx, "", "pw"); !errors.Is(err, verify.ErrInvalidInput) {
		t.Errorf("empty node: %v", err)
	}
	if got := m.counts().scrypt; got != 2 { // one hash, one verification; the empty name costs none
		t.Errorf("%d scrypt runs, want 2", got)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	h := testHerd(t)
	ctx := t.Context()
	for _, c := range []struct {
		sc    Scenario
		model string
		want  string
	}{
		{Scenario{Nodes: 30, LogN: testLogN}, "k3s-v2", "unknown model"},
		{Scenario{Nodes: 31, LogN: testLogN}, ModelNodepass, "herd has 30 nodes"},
		{Scenario{Nodes: 30, LogN: 7}, ModelNodepass, "logN 6"},
		{Scenario{Nodes: 30, LogN: testLogN, Servers: -1}, ModelNodepass, "servers -1"},
		{Scenario{Nodes: 30, LogN: testLogN, LB: "random"}, ModelNodepass, "load balancer"},
		{Scenario{Nodes: 30, LogN: testLogN, Mode: "grpc"}, ModelNodepass, "mode"},
		{Scenario{Nodes: 30, LogN: testLogN, TimeScale: -1}, ModelNodepass, "time scale"},
		{Scenario{Nodes: 30, LogN: testLogN, Agent: JitterPolicy{Min: 2, Max: 1}}, ModelNodepass, "jitter policy"},
	} {
		_, err := Run(ctx, c.sc, h, c.model)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "bench: ") {
			t.Errorf("Run(%+v, %q) = %v, want an error about %q", c.sc, c.model, err, c.want)
		}
	}
	if _, err := Run(ctx, Scenario{}, nil, ModelNodepass); err == nil {
		t.Error("Run with a nil herd did not fail")
	}
}

func TestParseLBAndMode(t *testing.T) {
	var lb LB
	if err := lb.Set("Failover"); err != nil || lb != LBFailover {
		t.Errorf("LB.Set(Failover): %q, %v", lb, err)
	}
	if err := lb.Set("random"); err == nil {
		t.Error("LB.Set(random) did not fail")
	}
	var m Mode
	if err := m.Set("http"); err != nil || m != ModeHTTP {
		t.Errorf("Mode.Set(http): %q, %v", m, err)
	}
	if err := m.Set("grpc"); err == nil {
		t.Error("Mode.Set(grpc) did not fail")
	}
}

// TestEstimateTransport: the transport bound makes real HTTPS requests
// on new connections, and stops at the end of its context.
func TestEstimateTransport(t *testing.T) {
	h := testHerd(t)
	sc := Scenario{Mode: ModeHTTP, BoundSample: 4}
	d, err := h.EstimateTransport(t.Context(), sc)
	if err != nil || d <= 0 {
		t.Fatalf("EstimateTransport: %v, %v", d, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := h.EstimateTransport(ctx, sc); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
}
