package bench

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// TestFaultStoreRate checks that faults are injected at the configured
// rates, that a request meeting one is marked, and that off turns them
// off.
func TestFaultStoreRate(t *testing.T) {
	inner := verify.NewMemoryStore()
	inner.Set("node-0001", "hash")
	sc := Scenario{StoreFaults: 0.3, StoreSpikes: 0.2, StoreSpike: time.Nanosecond}.WithDefaults()
	s := newFaultStore(inner, sc)
	const calls = 20000
	var marked int
	for i := range calls {
		req := new(request)
		ctx := context.WithValue(context.Background(), requestKey{}, req)
		var err error
		if i%2 == 0 {
			_, err = s.Get(ctx, "node-0001")
		} else {
			err = s.Create(ctx, "node-0002", "hash")
			inner.Delete("node-0002")
		}
		if errors.Is(err, errStoreFault) != req.faulted.Load() {
			t.Fatalf("call %d: error %v, request marked %v", i, err, req.faulted.Load())
		}
		if req.faulted.Load() {
			marked++
		} else if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	f := s.figures(newTracker(nil, nil, 1, ""))
	if f.Calls != calls || f.Failures != uint64(marked) {
		t.Fatalf("%d calls, %d failures; want %d, %d", f.Calls, f.Failures, calls, marked)
	}
	// Binomial: 0.3 of 20000 has a standard deviation of 65; the draws
	// are seeded, so the count is the same on every run.
	if got := float64(f.Failures) / calls; math.Abs(got-0.3) > 0.015 {
		t.Errorf("failure rate %.3f, want 0.3", got)
	}
	if got := float64(f.Spikes) / float64(calls-f.Failures); math.Abs(got-0.2) > 0.015 {
		t.Errorf("spike rate %.3f among calls that did not fail, want 0.2", got)
	}
	s.off.Store(true)
	for range 100 {
		if _, err := s.Get(context.Background(), "node-0001"); err != nil {
			t.Fatalf("with faults off: %v", err)
		}
	}
	if n := s.calls.Load(); n != calls {
		t.Errorf("%d calls counted with faults off", n-calls)
	}
}

// TestFaultSpikeEndsWithContext checks that a slow call returns when its
// caller gives up, marked as its fault.
func TestFaultSpikeEndsWithContext(t *testing.T) {
	s := newFaultStore(verify.NewMemoryStore(), Scenario{StoreSpikes: 1, StoreSpike: time.Hour}.WithDefaults())
	req := new(request)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), requestKey{}, req))
	cancel()
	if _, err := s.Get(ctx, "node-0001"); !errors.Is(err, context.Canceled) || !req.faulted.Load() {
		t.Errorf("Get = %v, marked %v", err, req.faulted.Load())
	}
}

// TestStoreFaultsRun runs the herd with 30 % store faults against every
// model: every node joins, nothing is cached that should not be, and
// with faults off every node is let in again.
func TestStoreFaultsRun(t *testing.T) {
	h := testHerd(t)
	for _, model := range Models() {
		t.Run(model, func(t *testing.T) {
			sc := adversityScenario()
			sc.StoreFaults, sc.StoreSpikes, sc.Duplicates = 0.3, 0.1, 3
			res, err := Run(t.Context(), sc, h, model)
			if err != nil {
				t.Fatal(err)
			}
			f := res.Faults
			if res.Joined != 30 || res.Stopped != "" || f == nil {
				t.Fatalf("joined %d, stopped %q, faults %+v", res.Joined, res.Stopped, f)
			}
			if f.Calls == 0 || f.Failures == 0 || f.FaultAnswers == 0 {
				t.Errorf("calls %d, failures %d, 500s %d", f.Calls, f.Failures, f.FaultAnswers)
			}
			if f.CachedErrors != 0 || res.Attack.Accepted() != 0 {
				t.Errorf("cached errors %d, wrong accepts %d", f.CachedErrors, res.Attack.Accepted())
			}
			if f.RecheckAsked != 30 || f.RecheckJoined != 30 {
				t.Errorf("recheck: %d of %d let in", f.RecheckJoined, f.RecheckAsked)
			}
			if model == ModelNodepass && f.RecheckScrypt != 0 {
				t.Errorf("nodepass recheck ran scrypt %d times, want every answer from the cache", f.RecheckScrypt)
			}
			if res.Errors == 0 {
				t.Error("no agent saw a 500")
			}
		})
	}
}

// errorCache is a broken model that remembers a node's store error and
// answers it again without asking the store.
type errorCache struct {
	model
	store verify.Store
	mu    sync.Mutex
	errs  map[string]error
}

func (m *errorCache) Ensure(ctx context.Context, node, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err, ok := m.errs[node]; ok {
		return err
	}
	_, err := m.store.Get(ctx, node)
	if err != nil {
		m.errs[node] = err
	}
	return err
}

// TestCachedErrorCounted checks that a store error answered again from a
// cache shows as a cached error.
func TestCachedErrorCounted(t *testing.T) {
	s := newFaultStore(verify.NewMemoryStore(), Scenario{StoreFaults: 0.5}.WithDefaults())
	s.fail = 1 // every call fails
	tr := newTracker(nil, nil, 1, "")
	m := tr.wrap(&errorCache{store: s, errs: map[string]error{}}, 0)
	for range 3 {
		if err := m.Ensure(t.Context(), "node-0001", "password"); !errors.Is(err, errStoreFault) {
			t.Fatalf("Ensure = %v", err)
		}
	}
	if f := s.figures(tr); f.Failures != 1 || f.FaultAnswers != 3 || f.CachedErrors != 2 {
		t.Errorf("failures %d, 500s %d, cached errors %d; want 1, 3, 2", f.Failures, f.FaultAnswers, f.CachedErrors)
	}
}
