package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestEnrollmentIsAMatch: Ensure of a new node stores a hash in the
// configured format and the next request costs no scrypt.
func TestEnrollmentIsAMatch(t *testing.T) {
	s := newCountingStore()
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	if err := v.Ensure(ctx, "n", "pw"); err != nil {
		t.Fatal(err)
	}
	stored, err := s.MemoryStore.Get(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if !hashShape.MatchString(stored) {
		t.Fatalf("stored hash %q not in the k3s format", stored)
	}
	if err := v.Verify(ctx, "n", "pw"); err != nil {
		t.Fatal(err)
	}
	if err := v.Ensure(ctx, "n", "pw"); err != nil {
		t.Fatal(err)
	}
	if err := v.Ensure(ctx, "n", "other"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatalf("other password: %v", err)
	}
	// The other password is refused without scrypt: the node's verified
	// password is known.
	if st := v.Stats(); st.Enrollments != 1 || st.ScryptRuns != 1 || st.CacheHits != 3 || st.KnownMatchRejects != 1 || s.creates.Load() != 1 {
		t.Fatalf("stats %+v, creates %d", st, s.creates.Load())
	}
}

// TestEnrollmentRace: concurrent first joins of one node with two
// passwords: exactly one password wins, every request with the other gets
// a mismatch.
func TestEnrollmentRace(t *testing.T) {
	for round := range 20 {
		s := NewMemoryStore()
		v := newTestVerifier(t, s, &Options{MaxConcurrent: 4})
		var wg sync.WaitGroup
		var okA, okB, mismatch atomic.Int64
		for i := range 40 {
			wg.Go(func() {
				pw := []string{"pw-a", "pw-b"}[i%2]
				err := v.Ensure(context.Background(), "n", pw)
				switch {
				case err == nil && pw == "pw-a":
					okA.Add(1)
				case err == nil:
					okB.Add(1)
				case errors.Is(err, ErrMismatchedHashAndPassword):
					mismatch.Add(1)
				default:
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		wg.Wait()
		a, b := okA.Load(), okB.Load()
		if !(a == 20 && b == 0 || a == 0 && b == 20) || mismatch.Load() != 20 {
			t.Fatalf("round %d: %d ok with a, %d ok with b, %d mismatches", round, a, b, mismatch.Load())
		}
		if st := v.Stats(); st.Enrollments != 1 {
			t.Fatalf("round %d: %d enrollments", round, st.Enrollments)
		}
		winner := "pw-a"
		if b > 0 {
			winner = "pw-b"
		}
		stored, _ := s.Get(context.Background(), "n")
		if err := CompareHashAndPassword(stored, winner); err != nil {
			t.Fatalf("round %d: stored hash does not match the winner: %v", round, err)
		}
	}
}

// TestConcurrentEnsureNewNode: many goroutines enrolling one new node with
// one password share a single hash and a single Create.
func TestConcurrentEnsureNewNode(t *testing.T) {
	s := newCountingStore()
	v := newTestVerifier(t, s, nil)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if err := v.Ensure(context.Background(), "new", "pw"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Requests that found the node already enrolled were cache hits; the
	// rest shared the one enrollment.
	if st := v.Stats(); st.ScryptRuns != 1 || st.Enrollments != 1 || s.creates.Load() != 1 {
		t.Fatalf("stats %+v, creates %d", st, s.creates.Load())
	}
}

// slowReadStore blocks every Get of one node after its first (the
// enrollment's re-read) until released.
type slowReadStore struct {
	*MemoryStore
	node    string
	reads   atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func (s *slowReadStore) Get(ctx context.Context, node string) (string, error) {
	if node == s.node && s.reads.Add(1) == 2 {
		close(s.entered)
		select {
		case <-s.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return s.MemoryStore.Get(ctx, node)
}

// TestEnrollmentReadHoldsNoSlot: while an enrollment reads the store, its
// job holds no scrypt slot, so another node's verification runs on the
// only slot meanwhile.
func TestEnrollmentReadHoldsNoSlot(t *testing.T) {
	s := &slowReadStore{MemoryStore: NewMemoryStore(), node: "new", entered: make(chan struct{}), release: make(chan struct{})}
	s.Set("known", mustHash(t, "pw"))
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1})
	ctx := context.Background()
	enrolled := make(chan error, 1)
	go func() { enrolled <- v.Ensure(ctx, "new", "pw") }()
	<-s.entered
	if st := v.Stats(); st.InFlight != 0 {
		t.Fatalf("stats %+v: the enrollment holds a slot while it reads the store", st)
	}
	if err := v.Verify(ctx, "known", "pw"); err != nil {
		t.Fatalf("another node's verification during the enrollment's read: %v", err)
	}
	close(s.release)
	if err := <-enrolled; err != nil {
		t.Fatal(err)
	}
}

// TestEnrollmentsBoundedByMaxQueue: requests for names with no stored
// hash count against MaxQueue like any: a flood of new names whose
// callers leave at once queues at most MaxQueue enrollments, the rest are
// refused, and a known node's request is not refused for hours.
func TestEnrollmentsBoundedByMaxQueue(t *testing.T) {
	s := NewMemoryStore()
	s.Set("busy", mustHash(t, "pw"))
	s.Set("known", mustHash(t, "pw"))
	const maxQueue = 8
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1, MaxQueue: maxQueue})
	g := newGate()
	g.install(t, v)
	go v.Verify(context.Background(), "busy", "pw")
	<-g.entered
	refused := 0
	for i := range 100 {
		err := v.Ensure(cancelled(), fmt.Sprint("new-", i), "pw")
		var oe *OverloadError
		if errors.As(err, &oe) && !oe.Queued {
			refused++
		}
	}
	waitFor(t, "the enrollments to settle", func() bool {
		st := v.Stats()
		return st.Queued == maxQueue || refused >= 100-maxQueue
	})
	if st := v.Stats(); st.Queued > maxQueue || refused < 100-maxQueue {
		t.Fatalf("%d waiting for a slot (MaxQueue %d), %d of 100 refused", st.Queued, maxQueue, refused)
	}
	err := v.Verify(cancelled(), "known", "pw")
	var oe *OverloadError
	if errors.As(err, &oe) && oe.RetryAfter() > time.Minute {
		t.Fatalf("a known node after the flood: %v", err)
	}
	g.open()
	waitFor(t, "work to finish", func() bool { return idle(v) })
}

// blockingFresh is a store whose GetFresh blocks until released,
// counting the calls in progress.
type blockingFresh struct {
	*MemoryStore
	now, most atomic.Int64
	release   chan struct{}
}

func (s *blockingFresh) GetFresh(ctx context.Context, node string) (string, error) {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return s.Get(ctx, node)
}

// TestFreshReadsBounded: enrollments waiting on GetFresh count
// against MaxQueue, so at most MaxQueue of them read at once, as the
// FreshGetter doc promises.
func TestFreshReadsBounded(t *testing.T) {
	s := &blockingFresh{MemoryStore: NewMemoryStore(), release: make(chan struct{})}
	const maxQueue = 8
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1, MaxQueue: maxQueue})
	for i := range 64 {
		v.Ensure(cancelled(), fmt.Sprint("new-", i), "pw")
	}
	waitFor(t, "the reads to start", func() bool { return s.now.Load() >= maxQueue })
	time.Sleep(10 * time.Millisecond) // room for more to start, were they allowed
	if m := s.most.Load(); m > maxQueue+1 {
		t.Fatalf("%d GetFresh calls at once, want at most MaxQueue + MaxConcurrent (%d)", m, maxQueue+1)
	}
	close(s.release)
	waitFor(t, "work to finish", func() bool { return idle(v) })
}

// laggingStore's Get misses nodes another server enrolled; GetFresh sees
// them.
type laggingStore struct {
	*countingStore
	fresh atomic.Int64
}

func (s *laggingStore) Get(ctx context.Context, node string) (string, error) {
	s.gets.Add(1)
	return "", ErrNotFound
}

func (s *laggingStore) GetFresh(ctx context.Context, node string) (string, error) {
	s.fresh.Add(1)
	return s.MemoryStore.Get(ctx, node)
}

// TestFreshGetConfirmsMiss: a node enrolled by another server, missing
// from this one's lagging cache, is verified against its hash (one scrypt)
// rather than hashed and created again.
func TestFreshGetConfirmsMiss(t *testing.T) {
	s := &laggingStore{countingStore: newCountingStore()}
	s.MemoryStore.Set("elsewhere", mustHash(t, "right"))
	v := newTestVerifier(t, s, nil)
	err := v.Ensure(context.Background(), "elsewhere", "right")
	// The Verifier then reads the hash with Get, which still lags: a store
	// whose reads lag its writes, not a mismatch.
	if err == nil || errors.Is(err, ErrMismatchedHashAndPassword) || s.creates.Load() != 0 || v.Stats().ScryptRuns != 0 || s.fresh.Load() != 1 {
		t.Fatalf("Ensure: %v, %d creates, %+v, %d fresh reads; want no scrypt, no create, one fresh read", err, s.creates.Load(), v.Stats(), s.fresh.Load())
	}
}

// staleStore is a store that answers like kube's over a real API server
// whose admission policy refuses every Create: its cache lags (Get
// misses), its fresh reads are spent (GetFresh answers from the cache,
// ErrNotFresh), and Create fails with another error than ErrExists, the
// node stored all the same (enrolled a moment ago on another server).
type staleStore struct {
	*MemoryStore
	fresh bool // GetFresh reads past the cache
}

var errForbidden = errors.New("forbidden by admission policy")

func (s *staleStore) Get(ctx context.Context, node string) (string, error) {
	return "", fmt.Errorf("%w: %q (cache)", ErrNotFound, node)
}

func (s *staleStore) GetFresh(ctx context.Context, node string) (string, error) {
	if !s.fresh {
		return "", fmt.Errorf("%w (%w): %q", ErrNotFound, ErrNotFresh, node)
	}
	return s.MemoryStore.Get(ctx, node)
}

func (s *staleStore) Create(context.Context, string, string) error { return errForbidden }

// TestNoHashWhileCreatesFail: while the store's Creates fail (an outage)
// and its fresh reads are spent, a new node's retry is refused without
// hashing; once the last failure is createFailingFor old, it hashes again.
func TestNoHashWhileCreatesFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &staleStore{MemoryStore: NewMemoryStore()}
		v, err := New(s, &Options{Params: testParams})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		if err := v.Ensure(context.Background(), "n", "pw"); !errors.Is(err, errForbidden) {
			t.Fatalf("first enrollment: %v", err)
		}
		for range 3 {
			time.Sleep(time.Second)
			if err := v.Ensure(context.Background(), "n", "pw"); !errors.Is(err, errForbidden) || !strings.Contains(err.Error(), "not enrolling") {
				t.Fatalf("a retry while Creates fail: %v", err)
			}
		}
		if st := v.Stats(); st.ScryptRuns != 1 {
			t.Fatalf("stats %+v: retries while Creates fail cost scrypt", st)
		}
		time.Sleep(createFailingFor)
		v.Ensure(context.Background(), "n", "pw")
		if st := v.Stats(); st.ScryptRuns != 2 {
			t.Fatalf("stats %+v: want a second hash once the failure is old", st)
		}
	})
}

// TestCloseDuringCreate: an enrollment whose Store.Create Close cuts short
// answers ErrClosed, not the store's context error; with FailOpen it is
// not let in either.
func TestCloseDuringCreate(t *testing.T) {
	for _, c := range []struct {
		name string
		opts *Options
	}{{"plain", nil}, {"failopen", &Options{FailOpen: &FailOpen{}}}} {
		t.Run(c.name, func(t *testing.T) {
			s := newCountingStore()
			entered := make(chan struct{})
			s.createHook = func(ctx context.Context) error {
				close(entered)
				<-ctx.Done()
				return ctx.Err()
			}
			v := newTestVerifier(t, s, c.opts)
			got := make(chan error, 1)
			go func() { got <- v.Ensure(context.Background(), "n", "pw") }()
			<-entered
			v.Close()
			if err := <-got; err != ErrClosed {
				t.Fatalf("enrollment cut short by Close: %v, want ErrClosed", err)
			}
			if st := v.Stats(); st.FailOpenEnrollments != 0 || st.Enrollments != 0 {
				t.Fatalf("stats %+v: let in", st)
			}
		})
	}
}
