package verify

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

const (
	failBaseDelay = 100 * time.Millisecond // the second consecutive mismatch
	failWindow    = 10 * time.Minute       // a count older than this restarts
	failNames     = 16384                  // names tracked at most (LRU)
)

// failures counts consecutive mismatches per node name: it says whether a
// name is failing (for the admission's suspects) and how long to hold back
// the next answer refusing it. Node names are not secret; the
// map is bounded, least recently failing name first out. Safe for
// concurrent use.
type failures struct {
	maxDelay time.Duration // <= 0: no delay
	size     atomic.Int64  // entries, to keep matches off the lock
	mu       sync.Mutex
	names    *simplelru.LRU[string, failState]
}

type failState struct {
	n    int
	last time.Time
}

func newFailures(maxDelay time.Duration) *failures {
	names, err := simplelru.NewLRU[string, failState](failNames, nil)
	if err != nil {
		panic(err) // only for a non-positive size
	}
	return &failures{maxDelay: maxDelay, names: names}
}

// mismatch records a mismatch for name: a computed one, or one answered
// from the cache.
func (f *failures) mismatch(name string) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	st, _ := f.names.Get(name)
	if now.Sub(st.last) > failWindow {
		st.n = 0
	}
	st.n++
	st.last = now
	f.names.Add(name, st)
	f.size.Store(int64(f.names.Len()))
}

// match forgets name's failures.
func (f *failures) match(name string) {
	if f.size.Load() == 0 {
		return
	}
	f.mu.Lock()
	f.names.Remove(name)
	f.size.Store(int64(f.names.Len()))
	f.mu.Unlock()
}

// failing reports whether name has a recorded mismatch in the window.
func (f *failures) failing(name string) bool {
	if f.size.Load() == 0 {
		return false
	}
	f.mu.Lock()
	st, ok := f.names.Peek(name)
	f.mu.Unlock()
	return ok && st.n > 0 && time.Since(st.last) <= failWindow
}

// delay returns how long to hold back an answer that refuses name: 0 up
// to its first recorded mismatch, then 100 ms doubling with each further
// one, up to maxDelay.
func (f *failures) delay(name string) time.Duration {
	if f.maxDelay <= 0 || f.size.Load() == 0 {
		return 0
	}
	f.mu.Lock()
	st, ok := f.names.Peek(name)
	f.mu.Unlock()
	if !ok || st.n < 2 || time.Since(st.last) > failWindow {
		return 0
	}
	if shift := st.n - 2; shift < 32 {
		return min(failBaseDelay<<shift, f.maxDelay)
	}
	return f.maxDelay
}
