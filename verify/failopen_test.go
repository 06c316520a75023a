package verify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// outageStore's Create fails with a store error while down is set (a
// validating webhook that is down).
type outageStore struct {
	*countingStore
	down atomic.Bool
}

var errWebhook = errors.New(`admission webhook "secrets.example" denied the request: connection refused`)

func newOutageStore() *outageStore {
	s := &outageStore{countingStore: newCountingStore()}
	s.down.Store(true)
	s.createHook = func(context.Context) error {
		if s.down.Load() {
			return errWebhook
		}
		return nil
	}
	return s
}

// deferredLog records FailOpen.OnDeferred's calls.
type deferredLog struct {
	mu    sync.Mutex
	calls map[string]error
}

func (l *deferredLog) record(node string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = make(map[string]error)
	}
	l.calls[node] = err
}

func (l *deferredLog) get(node string) (error, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	err, ok := l.calls[node]
	return err, ok
}

// TestEnrollFailOpen: with the option on, a new node is let in during a
// Create outage, only with the password let in first, and its hash is
// stored by the background retry once the outage ends.
func TestEnrollFailOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newOutageStore()
		var log deferredLog
		v := newTestVerifier(t, s, &Options{FailOpen: &FailOpen{OnDeferred: log.record}})
		ctx := context.Background()
		if err := v.Ensure(ctx, "new", "right"); err != nil {
			t.Fatalf("enrollment during the outage: %v, want let in", err)
		}
		if st := v.Stats(); st.FailOpenEnrollments != 1 || st.FailOpenPending != 1 || st.Enrollments != 0 || st.ScryptRuns != 1 {
			t.Fatalf("stats %+v", st)
		}
		if err := v.Ensure(ctx, "new", "right"); err != nil || v.Stats().ScryptRuns != 1 {
			t.Fatalf("retry during the outage: %v, %+v; want let in without scrypt", err, v.Stats())
		}
		if err := v.Ensure(ctx, "new", "other"); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("another password during the outage: %v, want a mismatch", err)
		}
		time.Sleep(time.Minute) // retries fail while the outage lasts
		if _, ok := log.get("new"); ok {
			t.Fatal("reported before the outage ended")
		}
		s.down.Store(false)
		time.Sleep(2 * enrollRetryMax)
		if err, ok := log.get("new"); !ok || err != nil {
			t.Fatalf("after the outage: reported %v (%v), want nil", err, ok)
		}
		if st := v.Stats(); st.Enrollments != 1 || st.FailOpenPending != 0 || st.FailOpenFailures != 0 {
			t.Fatalf("stats %+v", st)
		}
		if err := v.Verify(ctx, "new", "right"); err != nil || v.Stats().ScryptRuns != 1 {
			t.Fatalf("verified after the retry stored it: %v, %+v; want a cache hit", err, v.Stats())
		}
		if err := v.Verify(ctx, "new", "other"); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("another password after the retry: %v", err)
		}
	})
}

// TestEnrollFailOpenReportsLoss: the retries run out, or another hash is
// stored meanwhile: the callback hears it and the node is no longer let in
// without a stored hash.
func TestEnrollFailOpenReportsLoss(t *testing.T) {
	for _, tt := range []struct {
		name   string
		outage func(*outageStore) // what happens after the node was let in
		want   error
	}{
		{"retries run out", func(*outageStore) {}, errWebhook},
		{"another hash stored", func(s *outageStore) {
			s.MemoryStore.Set("new", mustHash(t, "someone-else"))
			s.down.Store(false)
		}, ErrMismatchedHashAndPassword},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newOutageStore()
				var log deferredLog
				v := newTestVerifier(t, s, &Options{FailOpen: &FailOpen{RetryFor: time.Minute, OnDeferred: log.record}})
				ctx := context.Background()
				if err := v.Ensure(ctx, "new", "right"); err != nil {
					t.Fatal(err)
				}
				tt.outage(s)
				time.Sleep(2 * time.Minute)
				if err, ok := log.get("new"); !ok || !errors.Is(err, tt.want) {
					t.Fatalf("reported %v (%v), want %v", err, ok, tt.want)
				}
				if st := v.Stats(); st.FailOpenFailures != 1 || st.FailOpenPending != 0 || st.Enrollments != 0 {
					t.Fatalf("stats %+v", st)
				}
				// No longer let in on the old grounds: with the outage
				// still on, a new enrollment; with another hash stored, a
				// verification against it.
				err := v.Ensure(ctx, "new", "right")
				if tt.want == ErrMismatchedHashAndPassword && !errors.Is(err, ErrMismatchedHashAndPassword) ||
					tt.want == errWebhook && (err != nil || v.Stats().FailOpenEnrollments != 2) {
					t.Fatalf("next request: %v, %+v", err, v.Stats())
				}
			})
		})
	}
}

// TestEnrollFailsClosedByDefault: without the option a Create outage is a
// store error, and nothing is let in or cached.
func TestEnrollFailsClosedByDefault(t *testing.T) {
	s := newOutageStore()
	v := newTestVerifier(t, s, nil)
	if err := v.Ensure(context.Background(), "new", "right"); !errors.Is(err, errWebhook) {
		t.Fatalf("enrollment during the outage: %v, want the store error", err)
	}
	s.down.Store(false)
	if err := v.Ensure(context.Background(), "new", "right"); err != nil || v.Stats().Enrollments != 1 {
		t.Fatalf("after the outage: %v, %+v", err, v.Stats())
	}
}

// TestFailOpenNeedsFreshRead (G): FailOpen lets a node in only after
// a read past the store's cache says it has no hash: with the fresh reads
// spent, a guess for a node enrolled elsewhere is refused, not let in.
func TestFailOpenNeedsFreshRead(t *testing.T) {
	s := &staleStore{MemoryStore: NewMemoryStore()}
	s.Set("n", mustHash(t, "right"))
	v := newTestVerifier(t, s, &Options{FailOpen: &FailOpen{}})
	if err := v.Ensure(context.Background(), "n", "guess"); !errors.Is(err, errForbidden) {
		t.Fatalf("a guess with the fresh reads spent: %v, want the Create's error", err)
	}
	if st := v.Stats(); st.FailOpenEnrollments != 0 {
		t.Fatalf("stats %+v: let in", st)
	}
	s.fresh = true
	if err := v.Ensure(context.Background(), "n", "guess"); err == nil {
		t.Fatal("a guess with a fresh read: let in")
	}
	if st := v.Stats(); st.FailOpenEnrollments != 0 {
		t.Fatalf("stats %+v: let in", st)
	}
}

// TestFailOpenPendingBounded: concurrent fail-open enrollments never let
// in more than FailOpen.MaxPending at once, whatever MaxQueue.
func TestFailOpenPendingBounded(t *testing.T) {
	s := newCountingStore()
	s.createHook = func(context.Context) error { return errors.New("webhook down") }
	const maxPending = 4
	v := newTestVerifier(t, s, &Options{FailOpen: &FailOpen{MaxPending: maxPending}, MaxConcurrent: 4})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() { v.Ensure(context.Background(), fmt.Sprint("n", i), "pw") })
	}
	wg.Wait()
	if st := v.Stats(); st.FailOpenPending != maxPending || st.FailOpenEnrollments != maxPending {
		t.Fatalf("stats %+v: want MaxPending (%d) let in", st, maxPending)
	}
}
