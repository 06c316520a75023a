package verify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodepass/nodepass/cache"
	"github.com/nodepass/nodepass/scrypt"
)

// TestKnownMatch: once a node's password is verified, guesses cost no
// scrypt; a rotated hash or another node is not covered by it; the
// verified password is still accepted when its own entry is gone.
func TestKnownMatch(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "right"))
	s.Set("other", mustHash(t, "right"))
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	if err := v.Verify(ctx, "n", "right"); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := v.Verify(ctx, "n", fmt.Sprint("guess-", i)); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatal(err)
		}
	}
	if st := v.Stats(); st.ScryptRuns != 1 || st.KnownMatchRejects != 100 {
		t.Fatalf("stats %+v: want 1 scrypt run and 100 known-match rejects", st)
	}
	// Another node with its own hash: computed.
	if err := v.Verify(ctx, "other", "guess-0"); !errors.Is(err, ErrMismatchedHashAndPassword) || v.Stats().ScryptRuns != 2 {
		t.Fatalf("other node: %v, %+v", err, v.Stats())
	}
	// The verified tuple's own entry evicted: the pair still answers it.
	stored, _ := s.Get(ctx, "n")
	evict(v.cache, v.cache.Key("n", stored, "right"))
	if err := v.Verify(ctx, "n", "right"); err != nil || v.Stats().ScryptRuns != 2 {
		t.Fatalf("verified password after eviction: %v, %+v", err, v.Stats())
	}
	// Rotation: the new hash has no verified password yet.
	s.Set("n", mustHash(t, "new"))
	if err := v.Verify(ctx, "n", "right"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	if err := v.Verify(ctx, "n", "new"); err != nil {
		t.Fatalf("new password after rotation: %v", err)
	}
	if st := v.Stats(); st.ScryptRuns != 4 {
		t.Fatalf("stats %+v: want the rotated hash computed twice", st)
	}
}

// TestFailDelay: consecutive mismatches for a name are answered later and
// later, up to MaxFailDelay; a match is never delayed and resets the count;
// the caller's context cuts the delay short.
func TestFailDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewMemoryStore()
		s.Set("n", mustHash(t, "right"))
		v := newTestVerifier(t, s, &Options{MaxFailDelay: 500 * time.Millisecond})
		ctx := context.Background()
		elapsed := func(pw string) (time.Duration, error) {
			start := time.Now()
			err := v.Verify(ctx, "n", pw)
			return time.Since(start), err
		}
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}
		for i, w := range want {
			d, err := elapsed(fmt.Sprint("guess-", i))
			if !errors.Is(err, ErrMismatchedHashAndPassword) || d != w {
				t.Fatalf("mismatch %d: %v after %v, want mismatch after %v", i+1, err, d, w)
			}
		}
		if d, err := elapsed("right"); err != nil || d != 0 {
			t.Fatalf("match: %v after %v, want no delay", err, d)
		}
		if d, _ := elapsed("guess-0"); d != 0 {
			t.Fatalf("first mismatch after a match delayed %v", d)
		}
		if d, _ := elapsed("guess-0"); d != 100*time.Millisecond {
			t.Fatalf("second mismatch delayed %v", d)
		}
		// The count starts again after a quiet failWindow.
		time.Sleep(failWindow + time.Second)
		if d, _ := elapsed("guess-0"); d != 0 {
			t.Fatalf("mismatch after a quiet window delayed %v", d)
		}
		// A caller that leaves is not held.
		elapsed("guess-1")
		cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := v.Verify(cctx, "n", "guess-2"); !errors.Is(err, ErrMismatchedHashAndPassword) || time.Since(start) != 10*time.Millisecond {
			t.Fatalf("cancelled caller: %v after %v", err, time.Since(start))
		}
		v.Close()
	})
}

// TestDuplicateHostname: a second machine with the same name retrying a
// wrong password costs one scrypt, however often it retries.
func TestDuplicateHostname(t *testing.T) {
	s := NewMemoryStore()
	s.Set("dup", mustHash(t, "first-machine"))
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	for range 50 {
		if err := v.Ensure(ctx, "dup", "second-machine"); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatal(err)
		}
	}
	if err := v.Ensure(ctx, "dup", "first-machine"); err != nil {
		t.Fatal(err)
	}
	if st := v.Stats(); st.ScryptRuns != 2 {
		t.Fatalf("%d scrypt runs, want 2", st.ScryptRuns)
	}
}

// blockingStore blocks Get or Create until the call's context ends.
type blockingStore struct {
	*MemoryStore
	blockGet, blockCreate atomic.Bool
	entered               chan string
}

func (s *blockingStore) Get(ctx context.Context, node string) (string, error) {
	if s.blockGet.Load() {
		s.entered <- "get"
		<-ctx.Done()
		return "", ctx.Err()
	}
	return s.MemoryStore.Get(ctx, node)
}

func (s *blockingStore) Create(ctx context.Context, node, hash string) error {
	if s.blockCreate.Load() {
		s.entered <- "create"
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
			// then completes: the caller is gone, the enrollment is not
		}
	}
	return s.MemoryStore.Create(ctx, node, hash)
}

// TestCancelAtEveryPoint: a caller leaving at any point gets its context's
// error (never an accept), leaks nothing, and spoils nothing for the next
// caller.
func TestCancelAtEveryPoint(t *testing.T) {
	s := &blockingStore{MemoryStore: NewMemoryStore(), entered: make(chan string, 10)}
	v := newTestVerifier(t, s, nil)
	bg := context.Background()

	t.Run("in Get", func(t *testing.T) {
		s.blockGet.Store(true)
		defer s.blockGet.Store(false)
		ctx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { done <- v.Ensure(ctx, "a", "pw") }()
		<-s.entered
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "store Get") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("in enrollment Create", func(t *testing.T) {
		s.blockCreate.Store(true)
		defer s.blockCreate.Store(false)
		ctx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { done <- v.Ensure(ctx, "b", "pw") }()
		<-s.entered
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		// The enrollment completes after its caller left.
		waitFor(t, "detached enrollment", func() bool { return v.Stats().Enrollments == 1 })
		runs := v.Stats().ScryptRuns
		if err := v.Ensure(bg, "b", "pw"); err != nil || v.Stats().ScryptRuns != runs {
			t.Fatalf("retry after detached enrollment: %v, stats %+v", err, v.Stats())
		}
	})
	t.Run("waiting for a slot", func(t *testing.T) {
		s.Set("c", mustHash(t, "pw"))
		s.Set("d", mustHash(t, "pw"))
		v := newTestVerifier(t, s, &Options{MaxConcurrent: 1})
		g := newGate()
		g.install(t, v)
		go v.Verify(bg, "c", "pw")
		<-g.entered
		ctx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { done <- v.Verify(ctx, "d", "pw") }()
		waitFor(t, "d to queue", func() bool { return v.Stats().Queued == 1 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		g.open()
		waitFor(t, "work to finish", func() bool { return idle(v) })
		if st := v.Stats(); st.ScryptRuns != 2 {
			t.Fatalf("queued work of a caller that left did not run: %+v", st)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(bg)
		cancel()
		s.Set("e", mustHash(t, "pw"))
		if err := v.Verify(ctx, "e", "pw"); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err) // either answered at once or the context's error
		}
	})
}

// TestStoreFaultsNeverCached: a store failing at random never causes an
// accept of a wrong password, never a mismatch for the right one, and
// every error it causes is retried afresh.
func TestStoreFaultsNeverCached(t *testing.T) {
	s := newCountingStore()
	boom := errors.New("injected store fault")
	// 30 % of store calls fail, at random: a fixed pattern could line up
	// with one node's calls and starve it.
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	fault := func() error {
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() < 0.3 {
			return boom
		}
		return nil
	}
	s.getErr = func(int64) error { return fault() }
	s.createHook = func(context.Context) error { return fault() }
	v := newTestVerifier(t, s, nil)
	var wg sync.WaitGroup
	for node := range 20 {
		wg.Go(func() {
			name := fmt.Sprint("node-", node)
			joined := false
			for attempt := 0; attempt < 50 && !joined; attempt++ {
				if err := v.Ensure(context.Background(), name, "right"); err == nil {
					joined = true
				} else if !errors.Is(err, boom) {
					t.Errorf("%s: %v", name, err)
				}
				if err := v.Verify(context.Background(), name, "wrong"); err == nil {
					t.Errorf("%s: wrong password accepted", name)
				} else if !errors.Is(err, boom) && !errors.Is(err, ErrMismatchedHashAndPassword) && !errors.Is(err, ErrNotFound) {
					t.Errorf("%s: %v", name, err)
				}
			}
			if !joined {
				t.Errorf("%s never joined", name)
			}
		})
	}
	wg.Wait()
	if st := v.Stats(); st.Enrollments != 20 || st.StoreErrors == 0 {
		t.Fatalf("stats %+v", st)
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

// TestQueuedGuessAnsweredByKnownMatch: a guess queued before the node's own
// password was verified costs no scrypt when its turn comes after.
func TestQueuedGuessAnsweredByKnownMatch(t *testing.T) {
	s := NewMemoryStore()
	s.Set("busy", mustHash(t, "pw"))
	s.Set("n", mustHash(t, "right"))
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1})
	g := newGate()
	g.install(t, v)
	ctx := context.Background()
	go v.Verify(ctx, "busy", "pw")
	<-g.entered
	guess := make(chan error, 1)
	go func() { guess <- v.Verify(ctx, "n", "guess") }()
	waitFor(t, "the guess to queue", func() bool { return v.Stats().Queued == 1 })
	right := make(chan error, 2)
	go func() { right <- v.Verify(ctx, "n", "right") }()
	waitFor(t, "the password to queue", func() bool { return v.Stats().Queued == 2 })
	go func() { right <- v.Verify(ctx, "n", "right") }() // the agent asks again
	waitFor(t, "the retry to join", func() bool { return v.Stats().Shared == 1 })
	g.open()
	for range 2 {
		if err := <-right; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-guess; !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	if st := v.Stats(); st.ScryptRuns != 2 || st.KnownMatchRejects != 1 {
		t.Fatalf("stats %+v: want 2 scrypt runs (busy, right) and the guess answered by the known match", st)
	}
}

// TestFullNameHeld: when a name has no room in the queue, a new password
// for it waits in the name's line for its whole MaxWait, so that a
// guesser cannot spin on answers; a caller that waits it out gets the
// password queued (over the name's cap), to be computed for its retry.
func TestFullNameHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewMemoryStore()
		s.Set("busy", mustHash(t, "pw"))
		s.Set("n", mustHash(t, "right"))
		v := newTestVerifier(t, s, &Options{MaxConcurrent: 1, MaxQueuedPerNode: 2, MaxFailDelay: time.Second, MaxWait: 3 * time.Second})
		ctx := context.Background()
		for i := range 3 { // three computed mismatches
			v.Verify(ctx, "n", fmt.Sprint("old-guess-", i))
		}
		g := newGate()
		g.install(t, v)
		go v.Verify(ctx, "busy", "pw")
		<-g.entered
		sctx, cancel := context.WithCancel(ctx)
		for i := range 2 {
			go v.Verify(sctx, "n", fmt.Sprint("queued-guess-", i))
		}
		synctest.Wait()
		start := time.Now()
		err := v.Verify(ctx, "n", "waiting-guess")
		var oe *OverloadError
		if !errors.As(err, &oe) || !oe.Queued {
			t.Fatalf("err %v, want an overload with the work queued", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("held %v, want MaxWait (3 s)", d)
		}
		if st := v.Stats(); st.Queued != 3 {
			t.Fatalf("%d queued, want 3: the name's two and the one that waited", st.Queued)
		}
		cancel()
		g.open()
		v.Close()
	})
}

// TestGuessForFailingNameWaits: once a name has failed, a new password for
// it (a first ask) is computed only after other nodes' work.
func TestGuessForFailingNameWaits(t *testing.T) {
	s := NewMemoryStore()
	for _, n := range []string{"busy", "attacked", "honest"} {
		s.Set(n, mustHash(t, "right"))
	}
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1})
	ctx := context.Background()
	if err := v.Verify(ctx, "attacked", "guess-0"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	derive := v.derive
	g := newGate()
	v.derive = func(keys []scrypt.Job) {
		g.entered <- struct{}{}
		<-g.release
		mu.Lock()
		for _, k := range keys {
			order = append(order, string(k.Password))
		}
		mu.Unlock()
		derive(keys)
	}
	go v.Verify(ctx, "busy", "right")
	<-g.entered
	done := make(chan error, 2)
	go func() { done <- v.Verify(ctx, "attacked", "guess-1") }()
	waitFor(t, "the guess to queue", func() bool { return v.Stats().Queued == 1 })
	go func() { done <- v.Verify(ctx, "honest", "right") }()
	waitFor(t, "the honest node to queue", func() bool { return v.Stats().Queued == 2 })
	g.open()
	for range 2 {
		<-done
	}
	waitFor(t, "work to finish", func() bool { return idle(v) })
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 3 || order[1] != "right" || order[2] != "guess-1" {
		t.Fatalf("computed in order %q, want busy, honest, then the guess", order)
	}
}

// evict pushes k's own entry out of c, a cache with the default sizes,
// with as many matches of other tuples (no pair's).
func evict(c *cache.Cache, k cache.Key) {
	for i := range cache.DefaultMatchSize {
		c.Put(c.Key("filler", "", fmt.Sprint(i)), cache.Match)
	}
	if _, ok := c.Get(k); ok {
		panic("evict: still cached")
	}
}
