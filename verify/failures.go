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

// failures counts consecutive mismatches per node name: whether a name
// is failing (for the scheduler's suspects) and how long to hold back
// the next answer refusing it, for the least recently failing failNames.
// Safe for concurrent use: a name with no failures is answered without
// the lock, so that a cache hit's match waits for nobody.
type failures struct {
	maxDelay time.Duration // <= 0: no delay
	listed   sync.Map      // the names in names, as keys
	count    atomic.Int64  // and how many
	mu       sync.Mutex
	names    *simplelru.LRU[string, failState] // a name leaves listed as it leaves names
}

type failState struct {
	n    int
	last time.Time
}

func newFailures(maxDelay time.Duration) *failures {
	f := &failures{maxDelay: maxDelay}
	names, err := simplelru.NewLRU(failNames, func(name string, _ failState) {
		f.listed.Delete(name)
		f.count.Add(-1)
	})
	if err != nil {
		panic(err) // only for a non-positive size
	}
	f.names = names
	return f
}

// mismatch records a mismatch for name.
func (f *failures) mismatch(name string) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	st, listed := f.names.Get(name)
	if now.Sub(st.last) > failWindow {
		st.n = 0
	}
	st.n++
	st.last = now
	f.names.Add(name, st)
	if !listed {
		f.listed.Store(name, nil)
		f.count.Add(1)
	}
}

// has reports whether name may have failures recorded, without the lock.
func (f *failures) has(name string) bool {
	if f.count.Load() == 0 {
		return false
	}
	_, ok := f.listed.Load(name)
	return ok
}

// match forgets name's failures.
func (f *failures) match(name string) {
	if f.has(name) {
		f.mu.Lock()
		f.names.Remove(name)
		f.mu.Unlock()
	}
}

// get returns name's failures, if it has any recorded.
func (f *failures) get(name string) (failState, bool) {
	if !f.has(name) {
		return failState{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.names.Peek(name)
}

// failing reports whether name has a recorded mismatch in the window.
func (f *failures) failing(name string) bool {
	st, ok := f.get(name)
	return ok && st.n > 0 && time.Since(st.last) <= failWindow
}

// delay returns how long to hold back an answer that refuses name: 0 up
// to its first recorded mismatch, then 100 ms doubling with each further
// one, up to maxDelay.
func (f *failures) delay(name string) time.Duration {
	if f.maxDelay <= 0 {
		return 0
	}
	st, ok := f.get(name)
	if !ok || st.n < 2 || time.Since(st.last) > failWindow {
		return 0
	}
	if shift := st.n - 2; shift < 32 {
		return min(failBaseDelay<<shift, f.maxDelay)
	}
	return f.maxDelay
}
