package verify

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Store holds one stored hash per node. Implementations must be safe for
// concurrent use. Get is on every request's path: it should answer from
// memory (kube's Store reads an informer cache).
type Store interface {
	// Get returns node's stored hash, or an error wrapping ErrNotFound.
	Get(ctx context.Context, node string) (string, error)
	// Create stores a hash for a new node, or fails wrapping ErrExists.
	Create(ctx context.Context, node, hash string) error
}

// FreshGetter is a Store whose Get may lag writes made elsewhere (kube's
// reads an informer cache). Ensure confirms Get's ErrNotFound with GetFresh
// before it hashes a new node's password, at most once per enrollment and
// MaxQueue at a time. An implementation past its own budget of direct
// reads may answer from its cache, a miss then wrapping ErrNotFresh too:
// the enrollment goes on, but Options.FailOpen needs a read that ran.
type FreshGetter interface {
	// GetFresh is Get past the cache.
	GetFresh(ctx context.Context, node string) (string, error)
}

// MemoryStore is a DigestStore in process memory, for tests, benchmarks
// and single-process servers. It is safe for concurrent use, ignores its
// methods' contexts and never blocks; make it with NewMemoryStore.
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

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{m: make(map[string]string), digests: make(map[string]memoryDigest)}
}

// GetWithDigest implements DigestStore.
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

// RememberDigest implements DigestStore: for a hash not node's, it records
// nothing and returns nil.
func (s *MemoryStore) RememberDigest(_ context.Context, node, hash string, digest []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[node] == hash && hash != "" {
		s.digests[node] = memoryDigest{hash: hash, digest: slices.Clone(digest)}
	}
	return nil
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, node string) (string, error) {
	s.mu.RLock()
	h, ok := s.m[node]
	s.mu.RUnlock()
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrNotFound, node)
	}
	return h, nil
}

// Create implements Store.
func (s *MemoryStore) Create(_ context.Context, node, hash string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[node]; ok {
		return fmt.Errorf("%w: %q", ErrExists, node)
	}
	s.m[node] = hash
	return nil
}

// Set stores hash for node, replacing any, as an operator rotating a
// node's password does.
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
