package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Store holds one hash per node, safe for concurrent use. Get is on every
// request's path: it should answer from memory.
type Store interface {
	Get(ctx context.Context, node string) (string, error) // or an error wrapping ErrNotFound
	Create(ctx context.Context, node, hash string) error  // or an error wrapping ErrExists
}

// FreshGetter is a Store whose Get may lag. Ensure confirms ErrNotFound
// with GetFresh before it hashes; a GetFresh that read its cache wraps
// ErrNotFresh too, which FailOpen does not trust.
type FreshGetter interface {
	GetFresh(ctx context.Context, node string) (string, error) // Get past the cache
}

// DigestStore is a Store that also remembers a digest per node of a
// password verified against its hash (Options.DigestKey), for every
// Verifier sharing it.
type DigestStore interface {
	Store
	// GetWithDigest is Get, with the digest remembered for node's hash.
	GetWithDigest(ctx context.Context, node string) (hash string, digest []byte, err error)
	// RememberDigest replaces node's digest while its hash is hash.
	RememberDigest(ctx context.Context, node, hash string, digest []byte) error
}

// MemoryStore is a DigestStore in memory, safe for concurrent use; its
// methods never block, and its reads write no shared memory, so that
// concurrent requests do not slow one another. Make it with
// NewMemoryStore.
type MemoryStore struct {
	m sync.Map // node → *memoryEntry, replaced whole, never changed
}

// memoryEntry is a node's stored hash, and the digest remembered for
// that hash (nil: none).
type memoryEntry struct {
	hash   string
	digest []byte
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, node string) (string, error) {
	hash, _, err := s.GetWithDigest(ctx, node)
	return hash, err
}

// GetWithDigest implements DigestStore.
func (s *MemoryStore) GetWithDigest(_ context.Context, node string) (string, []byte, error) {
	e, ok := s.m.Load(node)
	if !ok {
		return "", nil, fmt.Errorf("%w: %q", ErrNotFound, node)
	}
	return e.(*memoryEntry).hash, e.(*memoryEntry).digest, nil
}

// RememberDigest implements DigestStore; for a hash not node's it does
// nothing.
func (s *MemoryStore) RememberDigest(_ context.Context, node, hash string, digest []byte) error {
	for {
		e, ok := s.m.Load(node)
		if !ok || hash == "" || e.(*memoryEntry).hash != hash {
			return nil
		}
		if s.m.CompareAndSwap(node, e, &memoryEntry{hash: hash, digest: slices.Clone(digest)}) {
			return nil
		}
	}
}

// Create implements Store.
func (s *MemoryStore) Create(_ context.Context, node, hash string) error {
	if _, loaded := s.m.LoadOrStore(node, &memoryEntry{hash: hash}); loaded {
		return fmt.Errorf("%w: %q", ErrExists, node)
	}
	return nil
}

// Set stores hash for node, replacing any. The digest remembered for
// node stays only if hash is the one it was remembered for.
func (s *MemoryStore) Set(node, hash string) {
	e := &memoryEntry{hash: hash}
	for {
		old, loaded := s.m.LoadOrStore(node, e)
		if !loaded || old.(*memoryEntry).hash == hash || s.m.CompareAndSwap(node, old, e) {
			return
		}
	}
}

// Delete removes node's hash and its remembered digest, if any.
func (s *MemoryStore) Delete(node string) { s.m.Delete(node) }

// The Verifier's store calls. Each defers storeDone: a panic becomes an
// error, and a failure other than ErrNotFound and ErrExists is counted
// and wrapped with the call it came from.

// read reads node's hash and, with remembered digests on, the digest
// remembered for it, in one store call.
func (v *Verifier) read(ctx context.Context, node string) (stored string, remembered []byte, err error) {
	if v.digests == nil {
		stored, err = v.get(ctx, node)
		return stored, nil, err
	}
	defer v.storeDone("GetWithDigest", node, &err)
	return v.digests.store.GetWithDigest(ctx, node)
}

// get reads node's hash. It is on every request's path, so it calls the
// store directly rather than through a closure.
func (v *Verifier) get(ctx context.Context, node string) (stored string, err error) {
	defer v.storeDone("Get", node, &err)
	return v.store.Get(ctx, node)
}

// getFresh is get past the store's cache, where it has one (FreshGetter).
func (v *Verifier) getFresh(ctx context.Context, node string) (stored string, err error) {
	fg, ok := v.store.(FreshGetter)
	if !ok {
		return v.get(ctx, node)
	}
	defer v.storeDone("GetFresh", node, &err)
	return fg.GetFresh(ctx, node)
}

// storeCreate stores a new node's hash.
func (v *Verifier) storeCreate(ctx context.Context, node, stored string) (err error) {
	defer v.storeDone("Create", node, &err)
	return v.store.Create(ctx, node, stored)
}

// storeDone, deferred by a call op of the store, turns its panic into an
// error in *err, passes ErrNotFound and ErrExists through as the store
// wrapped them, and counts and wraps any other failure.
func (v *Verifier) storeDone(op, node string, err *error) {
	if r := recover(); r != nil {
		atomic.AddUint64(&v.stats.Panics, 1)
		atomic.AddUint64(&v.stats.StoreErrors, 1)
		*err = fmt.Errorf("verify: store %s(%q) panicked: %v", op, node, r)
	} else if e := *err; e != nil && !errors.Is(e, ErrNotFound) && !errors.Is(e, ErrExists) {
		atomic.AddUint64(&v.stats.StoreErrors, 1)
		*err = fmt.Errorf("verify: store %s(%q): %w", op, node, e)
	}
}
