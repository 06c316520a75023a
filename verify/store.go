package verify

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Store holds one stored hash per node. Implementations must be safe for
// concurrent use. The Verifier calls Get on every request that is not
// rejected as invalid input, so Get should answer from memory (the kube
// package's Store reads an informer cache).
type Store interface {
	// Get returns node's stored hash, or an error wrapping ErrNotFound.
	Get(ctx context.Context, node string) (string, error)
	// Create stores a hash for a new node, or fails wrapping ErrExists.
	Create(ctx context.Context, node, hash string) error
}

// FreshGetter is implemented by a Store whose Get may answer from a cache
// that lags behind writes made elsewhere, as kube's Store reads an
// informer cache. Before Ensure hashes a new node's password it confirms
// Get's ErrNotFound with GetFresh, a read that sees every write completed
// before it (one API call for kube), so that a node just enrolled by
// another server is verified against that hash instead of costing one
// scrypt and one failing Create, as k3s reads the API before it creates.
//
// It costs at most one GetFresh per enrollment computation: under a flood
// of new names, at most one per distinct (node, password) that reaches
// the scheduler, so no more than MaxQueue + MaxConcurrent at a time. An
// implementation may rate-limit them further: when its own budget is
// spent it answers from its cache, and a miss there wraps both
// ErrNotFound and ErrNotFresh. The enrollment then goes on (Create
// settles it), but Options.EnrollFailOpen lets a node in only after a
// fresh read that ran.
type FreshGetter interface {
	// GetFresh is Get without the cache: node's stored hash, or an error
	// wrapping ErrNotFound (and ErrNotFresh when the read did not reach
	// past the cache).
	GetFresh(ctx context.Context, node string) (string, error)
}

// MemoryStore is a Store in process memory, for tests, benchmarks and
// single-process servers. It is safe for concurrent use; the zero value is
// not usable, use NewMemoryStore.
type MemoryStore struct {
	mu      sync.RWMutex
	m       map[string]string
	digests map[string]memoryDigest
}

// memoryDigest is a remembered digest and the stored hash it is bound to.
type memoryDigest struct {
	hash   string
	digest []byte
}

// NewMemoryStore returns an empty MemoryStore. It is a DigestStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{m: make(map[string]string), digests: make(map[string]memoryDigest)}
}

// GetWithDigest is Get, with the digest remembered for node's stored hash
// (nil if none). It does not block and ignores ctx.
func (s *MemoryStore) GetWithDigest(_ context.Context, node string) (string, []byte, error) {
	s.mu.RLock()
	h, ok := s.m[node]
	d := s.digests[node]
	s.mu.RUnlock()
	if !ok {
		return "", nil, fmt.Errorf("%w: %q", ErrNotFound, node)
	}
	if d.hash != h {
		return h, nil, nil
	}
	return h, d.digest, nil
}

// RememberDigest records digest for node while its stored hash is hash;
// for any other hash, or a node without one, it records nothing and
// returns nil (the digest would never be read). It ignores ctx.
func (s *MemoryStore) RememberDigest(_ context.Context, node, hash string, digest []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[node] == hash && hash != "" {
		s.digests[node] = memoryDigest{hash: hash, digest: slices.Clone(digest)}
	}
	return nil
}

// Get returns node's hash or an error wrapping ErrNotFound. It does not
// block and ignores ctx.
func (s *MemoryStore) Get(_ context.Context, node string) (string, error) {
	s.mu.RLock()
	h, ok := s.m[node]
	s.mu.RUnlock()
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrNotFound, node)
	}
	return h, nil
}

// Create stores hash for node unless node already has one, in which case it
// returns an error wrapping ErrExists and keeps the stored hash. It ignores
// ctx.
func (s *MemoryStore) Create(_ context.Context, node, hash string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[node]; ok {
		return fmt.Errorf("%w: %q", ErrExists, node)
	}
	s.m[node] = hash
	return nil
}

// Set stores hash for node, replacing any stored one: what an operator does
// when rotating a node's password by rewriting its secret.
func (s *MemoryStore) Set(node, hash string) {
	s.mu.Lock()
	s.m[node] = hash
	s.mu.Unlock()
}

// Delete removes node's hash and its remembered digest, if any.
func (s *MemoryStore) Delete(node string) {
	s.mu.Lock()
	delete(s.m, node)
	delete(s.digests, node)
	s.mu.Unlock()
}

// Len returns the number of stored hashes.
func (s *MemoryStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}
