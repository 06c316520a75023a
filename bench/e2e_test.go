package bench

import (
	"context"
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

// TestHerdHTTP runs a 30-node herd over HTTPS against every model. It
// checks counts, not time: retries are scaled down to 0.5-1 s, while the
// client timeout (10 s) and the deadline (2 min) are long enough for a
// starved machine; normally every node joins at its first attempt.
func TestHerdHTTP(t *testing.T) {
	h := testHerd(t)
	for _, name := range Models() {
		t.Run("model="+name, func(t *testing.T) {
			sc := Scenario{Nodes: 30, LogN: testLogN, Mode: ModeHTTP, TimeScale: 0.1, BoundSample: 4,
				ClientTimeout: 100 * time.Second, Deadline: 20 * time.Minute}
			res, err := Run(t.Context(), sc, h, name)
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
			if res.ScryptRuns < 30 {
				t.Errorf("%d scrypt runs for 30 nodes", res.ScryptRuns)
			}
			if name == ModelNodepass && res.ScryptRuns != 30 {
				t.Errorf("nodepass ran scrypt %d times for 30 nodes, want once each", res.ScryptRuns)
			}
			if res.Model != name || res.Mode != ModeHTTP || res.Agent != PolicyJitter || res.PeakHeap == 0 {
				t.Errorf("result header %q %q %q heap %d", res.Model, res.Mode, res.Agent, res.PeakHeap)
			}
			if res.LowerBound != h.LowerBound || res.Ratio <= 0 || res.P50 > res.P99 || res.P99 > res.Max {
				t.Errorf("lower bound %v ratio %v p50 %v p99 %v max %v", res.LowerBound, res.Ratio, res.P50, res.P99, res.Max)
			}
			checkReached(t, res)
			// Over HTTPS the local bound counts a connection per node.
			if res.LocalTransport <= 0 || res.LocalBound <= res.LocalTransport || res.LocalRatio <= 0 {
				t.Errorf("local lower bound %v with transport %v, ratio %v", res.LocalBound, res.LocalTransport, res.LocalRatio)
			}
		})
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
		if res.LocalBound <= 0 || res.LocalRatio <= 0 || res.LocalTransport != 0 {
			t.Errorf("%s: local lower bound %v (transport %v, want 0 in-process), ratio %v", name, res.LocalBound, res.LocalTransport, res.LocalRatio)
		}
	}
}

// TestHTTPTarget checks the wire: HTTP/2, the status codes of a wrong
// password and of a full in-flight cap.
func TestHTTPTarget(t *testing.T) {
	h := testHerd(t)
	store := verify.NewMemoryStore()
	for _, n := range h.Nodes[:2] {
		store.Set(n.Name, n.Hash)
	}
	m := newK3s(store, verify.Params{}, 1)
	defer m.close(true)
	nodes := []Node{h.Nodes[0], {Name: h.Nodes[1].Name, Password: "wrong"}}
	tgt, err := newHTTPTarget([]model{m}, len(nodes))
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if o := tgt.attempt(ctx, 0, 0, nodes[0]); o.status != http.StatusOK {
		t.Errorf("right password: %+v", o)
	}
	if o := tgt.attempt(ctx, 1, 0, nodes[1]); o.status != http.StatusForbidden {
		t.Errorf("wrong password: %+v", o)
	}
	release, _ := m.admit() // the cap of 1 is now full
	if o := tgt.attempt(ctx, 0, 0, nodes[0]); o.status != http.StatusTooManyRequests {
		t.Errorf("past the in-flight cap: %+v", o)
	}
	release()
	if n := tgt.nonH2.Load(); n != 0 {
		t.Errorf("%d responses were not HTTP/2", n)
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
		if got := tgt.answer(c.err); got != c.want {
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
	tripped := 0
	guard := &heapGuard{max: 1, trip: func() { tripped++ }}
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
	if tripped != 1 || m.scryptRuns() != 0 {
		t.Errorf("guard tripped %d times, %d scrypt runs; want 1 and 0", tripped, m.scryptRuns())
	}
}

func TestK3sModelEnrollsUnknownNode(t *testing.T) {
	store := verify.NewMemoryStore()
	m := newK3s(store, verify.Params{LogN: testLogN, R: 8, P: 1, KeyLen: 64, SaltLen: 8}, 0)
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
	if got := m.scryptRuns(); got != 2 { // one hash, one verification; the empty name costs none
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
	if lb, err := ParseLB("Failover"); err != nil || lb != LBFailover {
		t.Errorf("ParseLB(Failover) = %q, %v", lb, err)
	}
	if _, err := ParseLB("random"); err == nil {
		t.Error("ParseLB(random) did not fail")
	}
	if m, err := ParseMode("http"); err != nil || m != ModeHTTP {
		t.Errorf("ParseMode(http) = %q, %v", m, err)
	}
	if _, err := ParseMode("grpc"); err == nil {
		t.Error("ParseMode(grpc) did not fail")
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
