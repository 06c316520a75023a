package bench

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/nodepass/nodepass/verify"
)

// RunStore is Run with the servers over store, which the caller made and
// filled, instead of a fresh memory store holding h's hashes: a store
// that holds them makes the run a reboot, an empty one makes it a first
// boot in which every node enrolls. It is how cmd/bench -store kube runs
// the herd over kube.Store on a real API server. Store faults and spikes
// (Scenario.StoreFaults, StoreSpikes) are not supported here. The caller
// closes store after RunStore returns.
func RunStore(ctx context.Context, sc Scenario, h *Herd, modelName string, store verify.Store) (*Result, error) {
	sc, err := checkRun(sc, h, modelName)
	switch {
	case err != nil:
		return nil, err
	case store == nil:
		return nil, errors.New("bench: RunStore with a nil store")
	case sc.StoreFaults > 0 || sc.StoreSpikes > 0:
		return nil, errors.New("bench: RunStore does not inject store faults or spikes")
	case sc.Reboot != RebootNone:
		return nil, errors.New("bench: RunStore runs no -reboot scenario (its warm-up needs the memory store)")
	}
	return runOver(ctx, sc, h, modelName, nil, store, nil)
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
