package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// RunStore is Run with the servers over store, which the caller made and
// filled, instead of a fresh memory store holding h's hashes: a store
// that holds them makes the run a reboot, an empty one makes it a first
// boot in which every node enrolls. It is how cmd/bench -store kube runs
// the herd over kube.Store on a real API server. Store faults and spikes
// (Scenario.StoreFaults, StoreSpikes) are not supported here. The caller
// closes store after RunStore returns.
//
// RunStore follows Run step for step; the two must change together.
func RunStore(ctx context.Context, sc Scenario, h *Herd, modelName string, store verify.Store) (*Result, error) {
	sc = sc.withDefaults()
	if err := sc.validate(); err != nil {
		return nil, err
	}
	if err := ValidModel(modelName); err != nil {
		return nil, err
	}
	if err := h.validate(sc); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("bench: RunStore with a nil store")
	}
	if sc.StoreFaults > 0 || sc.StoreSpikes > 0 {
		return nil, errors.New("bench: RunStore does not inject store faults or spikes")
	}
	var localBound time.Duration
	if sc.BoundSample > 0 {
		var err error
		if localBound, err = h.EstimateLowerBound(ctx, sc.BoundSample, verify.ScryptXCrypto); err != nil {
			return nil, err
		}
	}
	params := verify.DefaultParams
	params.LogN = sc.LogN
	models := make([]model, 0, sc.Servers)
	var tgt target
	defer func() {
		for _, m := range models {
			m.close(!sc.NoDrain)
		}
		if tgt != nil && !sc.NoDrain {
			tgt.close()
		}
	}()
	r := newRun(sc, h.Nodes)
	for i := range sc.Servers {
		m, err := newModel(modelName, store, params, sc.TimeScale, r.guard, r.adv.tracker.observer(i))
		if err != nil {
			return nil, err
		}
		models = append(models, r.adv.tracker.wrap(m, i))
	}
	switch sc.Mode {
	case ModeInproc:
		tgt = &inprocTarget{servers: models, second: sc.scale(time.Second), drain: !sc.NoDrain}
	case ModeHTTP:
		t, err := newHTTPTarget(models, sc.Nodes+sc.Duplicates+sc.Attackers)
		if err != nil {
			return nil, err
		}
		tgt = t
	}
	r.target = tgt
	res := r.execute(ctx)
	res.Model = modelName
	for _, m := range models {
		res.ScryptRuns += m.scryptRuns()
	}
	r.adv.figures(res)
	res.SetLocalBound(localBound)
	res.finish(h.LowerBound, h.LowerBoundFast)
	return res, nil
}

// CountingStore is a verify.Store that counts the calls it passes on to
// another store. It is safe for concurrent use.
type CountingStore struct {
	inner         verify.Store
	gets, creates atomic.Uint64
}

// NewCountingStore returns a CountingStore over store.
func NewCountingStore(store verify.Store) *CountingStore { return &CountingStore{inner: store} }

// Get counts the call and returns the inner store's Get.
func (s *CountingStore) Get(ctx context.Context, node string) (string, error) {
	s.gets.Add(1)
	return s.inner.Get(ctx, node)
}

// Create counts the call and returns the inner store's Create.
func (s *CountingStore) Create(ctx context.Context, node, hash string) error {
	s.creates.Add(1)
	return s.inner.Create(ctx, node, hash)
}

// Calls returns the Get and Create calls counted so far.
func (s *CountingStore) Calls() (gets, creates uint64) { return s.gets.Load(), s.creates.Load() }
