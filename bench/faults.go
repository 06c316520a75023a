package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// errStoreFault is the error an injected store fault returns. The servers
// answer it with 500, as any store failure.
var errStoreFault = errors.New("bench: injected store fault")

// FaultResult has the figures of a run with store faults.
type FaultResult struct {
	// Probability is Scenario.StoreFaults, SpikeProbability
	// Scenario.StoreSpikes and SpikeS the spike's latency in seconds
	// (scaled).
	Probability      float64 `json:"probability"`
	SpikeProbability float64 `json:"spike_probability"`
	SpikeS           float64 `json:"spike_s"`
	// Calls counts the store calls (Get and Create, every server),
	// Failures those that failed with an injected fault and Spikes those
	// that answered late.
	Calls    uint64 `json:"calls"`
	Failures uint64 `json:"failures"`
	Spikes   uint64 `json:"spikes"`
	// FaultAnswers counts requests answered with an injected fault (500).
	// CachedErrors counts those among them whose own store calls had all
	// succeeded: a fault that came back from a cache (or, for an
	// enrollment, from work shared with another request). Must be 0.
	FaultAnswers uint64 `json:"fault_answers"`
	CachedErrors uint64 `json:"cached_errors"`
	// After a run in which every honest node joined, the faults are turned
	// off and every honest node asks every server once more, directly
	// (not over HTTP): RecheckAsked requests, RecheckJoined answered nil,
	// at the cost of RecheckScrypt scrypt computations. A store error
	// remembered anywhere would show here as a failed recheck.
	RecheckAsked  int    `json:"recheck_asked"`
	RecheckJoined int    `json:"recheck_joined"`
	RecheckScrypt uint64 `json:"recheck_scrypt"`
}

// faultStore wraps a Store with injected faults: each call fails with
// probability fail; a call that does not fail answers after spike with
// probability slow. The draws come from one seeded source in call order,
// so n calls always inject the same number of faults.
//
// It is safe for concurrent use.
type faultStore struct {
	inner      verify.DigestStore
	fail, slow float64
	spike      time.Duration
	off        atomic.Bool // no more faults

	mu  sync.Mutex
	rng *rand.Rand

	calls, failures, spikes atomic.Uint64
}

// newFaultStore returns inner with sc's faults, or nil if sc has none.
func newFaultStore(inner verify.DigestStore, sc Scenario) *faultStore {
	if !sc.faults() {
		return nil
	}
	return &faultStore{
		inner: inner, fail: sc.StoreFaults, slow: sc.StoreSpikes, spike: sc.scale(sc.StoreSpike),
		rng: rand.New(rand.NewPCG(sc.Seed, 4<<40)),
	}
}

// Get is the inner store's Get, after a possible fault.
func (s *faultStore) Get(ctx context.Context, node string) (string, error) {
	if err := s.fault(ctx); err != nil {
		return "", err
	}
	return s.inner.Get(ctx, node)
}

// GetWithDigest is the inner store's (a verify.DigestStore), after a
// possible fault: it stands for Get when the Verifier has a DigestKey, so
// a run makes the same draws with digests or without.
func (s *faultStore) GetWithDigest(ctx context.Context, node string) (string, []byte, error) {
	if err := s.fault(ctx); err != nil {
		return "", nil, err
	}
	return s.inner.GetWithDigest(ctx, node)
}

// RememberDigest is the inner store's, without faults: it runs off the
// request path, where a fault would cost a later request one scrypt and
// could not be answered to anyone.
func (s *faultStore) RememberDigest(ctx context.Context, node, hash string, digest []byte) error {
	return s.inner.RememberDigest(ctx, node, hash, digest)
}

// Create is the inner store's Create, after a possible fault.
func (s *faultStore) Create(ctx context.Context, node, hash string) error {
	if err := s.fault(ctx); err != nil {
		return err
	}
	return s.inner.Create(ctx, node, hash)
}

// fault draws this call's fault: an error, a wait of spike (or until ctx
// ends, whose error it returns), or nothing. A request that meets a fault
// is marked, so that a fault answered to another request shows.
func (s *faultStore) fault(ctx context.Context) error {
	if s.off.Load() {
		return nil
	}
	s.calls.Add(1)
	s.mu.Lock()
	fail, slow := s.rng.Float64(), s.rng.Float64()
	s.mu.Unlock()
	if fail < s.fail {
		s.failures.Add(1)
		markFaulted(ctx)
		return errStoreFault
	}
	if slow >= s.slow {
		return nil
	}
	s.spikes.Add(1)
	t := time.NewTimer(s.spike)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		markFaulted(ctx)
		return context.Cause(ctx)
	}
}

func markFaulted(ctx context.Context) {
	if r, ok := ctx.Value(requestKey{}).(*request); ok {
		r.faulted.Store(true)
	}
}

// figures returns the faults' counts, with the answers tr saw.
func (s *faultStore) figures(tr *tracker) *FaultResult {
	return &FaultResult{
		Probability: s.fail, SpikeProbability: s.slow, SpikeS: s.spike.Seconds(),
		Calls: s.calls.Load(), Failures: s.failures.Load(), Spikes: s.spikes.Load(),
		FaultAnswers: tr.faultAnswers.Load(), CachedErrors: tr.cachedErrors.Load(),
	}
}

// recheck turns the faults off and asks every server once more for every
// honest node, on GOMAXPROCS goroutines, each request within timeout; it
// fills f's recheck figures and updates its answer counts from tr.
func recheck(ctx context.Context, f *FaultResult, s *faultStore, tr *tracker, models []model, nodes []Node, timeout time.Duration) {
	s.off.Store(true)
	runs0 := sumCounts(models).scrypt
	var joined atomic.Int64
	parallel(ctx, len(models)*len(nodes), runtime.GOMAXPROCS(0), func(i int) error {
		m, n := models[i/len(nodes)], nodes[i%len(nodes)]
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if m.Ensure(rctx, n.Name, n.Password) == nil {
			joined.Add(1)
		}
		return nil
	})
	f.RecheckAsked, f.RecheckJoined, f.RecheckScrypt = len(models)*len(nodes), int(joined.Load()), sumCounts(models).scrypt-runs0
	f.CachedErrors, f.FaultAnswers = tr.cachedErrors.Load(), tr.faultAnswers.Load()
}

// valuesOf returns a context that ends with base and carries values's
// values: a k3s model's store calls outlive the request, but the store
// still learns which request they serve.
func valuesOf(values, base context.Context) context.Context {
	return valuesCtx{Context: base, values: values}
}

type valuesCtx struct {
	context.Context
	values context.Context
}

func (c valuesCtx) Value(key any) any { return c.values.Value(key) }
