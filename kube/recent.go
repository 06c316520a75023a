package kube

import (
	"sync"
	"time"
)

// recent remembers, for a while, the secret names this Store created or was
// told exist. The informer cache learns of a new secret one watch event
// after the API server has it; until then a cache miss on such a name must
// be checked against the API server rather than answered with ErrNotFound,
// which would let the node enroll a second time.
//
// It is safe for concurrent use. Entries expire after ttl; expired entries
// are swept at most once per ttl, when an entry is added, so the map holds
// about the names added in the last two ttl.
type recent struct {
	ttl time.Duration
	now func() time.Time

	mu        sync.Mutex
	m         map[string]time.Time // name -> expiry
	nextSweep time.Time
}

func newRecent(ttl time.Duration, now func() time.Time) *recent {
	return &recent{ttl: ttl, now: now, m: make(map[string]time.Time)}
}

// add remembers name for ttl from now.
func (r *recent) add(name string) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[name] = now.Add(r.ttl)
	if now.Before(r.nextSweep) {
		return
	}
	for k, exp := range r.m {
		if !now.Before(exp) {
			delete(r.m, k)
		}
	}
	r.nextSweep = now.Add(r.ttl)
}

// has reports whether name was added less than ttl ago.
func (r *recent) has(name string) bool {
	now := r.now()
	r.mu.Lock()
	exp, ok := r.m[name]
	r.mu.Unlock()
	return ok && now.Before(exp)
}

// len returns the number of entries held, expired or not.
func (r *recent) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
