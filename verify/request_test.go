package verify

import (
	"bytes"
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

func TestInvalidInputNeverReachesStore(t *testing.T) {
	s := newCountingStore()
	v := newTestVerifier(t, s, &Options{Limits: Limits{MaxPasswordLen: 64}})
	ctx := context.Background()
	for _, tt := range []struct{ name, node, password, want string }{
		{"empty node", "", "pw", "empty node name"},
		{"long node", strings.Repeat("a", 236), "pw", "236 bytes"},
		{"empty password", "n", "", "empty password"},
		{"long password", "n", strings.Repeat("p", 65), "65 bytes"},
		{"control char", "n\x00x", "pw", "control character"},
		{"newline", "n\nx", "pw", "control character"},
		{"bad utf8", "n\xffx", "pw", "UTF-8"},
	} {
		for _, call := range []func(context.Context, string, string) error{v.Verify, v.Ensure} {
			err := call(ctx, tt.node, tt.password)
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: err %v, want ErrInvalidInput mentioning %q", tt.name, err, tt.want)
			}
			if tt.password != "" && strings.Contains(err.Error(), tt.password) {
				t.Errorf("%s: error repeats the password", tt.name)
			}
		}
	}
	if n := s.gets.Load(); n != 0 {
		t.Fatalf("store read %d times for invalid input", n)
	}
	// The limits themselves are accepted.
	s.Set(strings.Repeat("a", maxNodeNameLen), mustHash(t, strings.Repeat("p", 64)))
	if err := v.Verify(ctx, strings.Repeat("a", maxNodeNameLen), strings.Repeat("p", 64)); err != nil {
		t.Fatal(err)
	}
}

// TestNamesAreCaseInsensitive: names that differ only in case are one
// node for every defence: the store, the cache, known-match rejects and
// the failure count.
func TestNamesAreCaseInsensitive(t *testing.T) {
	s := NewMemoryStore()
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	if err := v.Ensure(ctx, "Node-1", "right"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "node-1"); err != nil {
		t.Fatalf("stored under %v, want the lower-case name", err)
	}
	if err := v.Verify(ctx, "NODE-1", "right"); err != nil {
		t.Fatalf("upper case: %v", err)
	}
	for i, n := range []string{"Node-1", "NODE-1", "node-1", "nOdE-1"} {
		if err := v.Ensure(ctx, n, fmt.Sprint("guess-", i)); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("%s: %v", n, err)
		}
	}
	if st := v.Stats(); st.ScryptRuns != 1 || st.KnownMatchRejects != 4 {
		t.Fatalf("stats %+v: want 1 scrypt (the enrollment) and every case variant's guess a known-match reject", st)
	}
	if !v.fails.failing("node-1") || v.fails.delay("node-1") == 0 && v.opts.MaxFailDelay > 0 {
		t.Fatal("the mismatches of the case variants were not counted against one name")
	}
}

// TestNodeNamesMakeSecretNames: a node name is refused unless
// strings.ToLower(node + ".node-password.k3s"), the name of the secret k3s
// keeps its hash in, is a DNS-1123 subdomain, whatever the store: no
// wildcard, space, slash or other character a Kubernetes name cannot
// have reaches the store (or a certificate signed for the name).
func TestNodeNamesMakeSecretNames(t *testing.T) {
	s := newCountingStore()
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	longest := strings.Repeat("a", 253-len(".node-password.k3s"))
	for _, node := range []string{
		"*", "*.example.com", "bad name", "a/b", "a_b", "-a", "a-", ".a", "a.", "a..b", "a.-b", "a-.b",
		"ünïcode", "a:b", "a\\b", longest + "a",
	} {
		for _, call := range []func(context.Context, string, string) error{v.Verify, v.Ensure} {
			if err := call(ctx, node, "pw"); !errors.Is(err, ErrInvalidInput) {
				t.Errorf("node %q: %v, want ErrInvalidInput", node, err)
			}
		}
	}
	if g, c := s.gets.Load(), s.creates.Load(); g != 0 || c != 0 {
		t.Fatalf("invalid names reached the store: %d reads, %d creates", g, c)
	}
	for _, node := range []string{"a", "1", "node-1", "Node-1", "worker-1.example.com", "a.b-c.d", longest} {
		if err := v.Ensure(ctx, node, "pw"); err != nil {
			t.Errorf("node %q: %v", node, err)
		}
	}
}

func TestVerifyVectorsThroughStore(t *testing.T) {
	s := NewMemoryStore()
	v := newTestVerifier(t, s, nil)
	checked := 0
	for i, vec := range loadVectors(t) {
		if vec.Password == "" {
			continue // an empty password is invalid input for a Verifier
		}
		node := fmt.Sprintf("vector-%d", i)
		s.Set(node, vec.Hash)
		if err := v.Verify(context.Background(), node, vec.Password); err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no vector checked")
	}
}

func TestVerifyOutcomesAndCache(t *testing.T) {
	s := NewMemoryStore()
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	s.Set("a", mustHash(t, "right"))
	s.Set("b", mustHash(t, "right"))

	if err := v.Verify(ctx, "missing", "pw"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown node: %v", err)
	}
	// Node a: the wrong password first (computed, then cached), then the
	// right one (computed, then cached).
	for range 2 {
		if err := v.Verify(ctx, "a", "wrong"); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("wrong password: %v", err)
		}
	}
	for range 2 {
		if err := v.Verify(ctx, "a", "right"); err != nil {
			t.Fatal(err)
		}
	}
	want := Stats{ScryptRuns: 2, CacheHits: 2, Mismatches: 2}
	if st := v.Stats(); st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	// Node b: once the right password is verified, every other password
	// is a mismatch without scrypt.
	if err := v.Verify(ctx, "b", "right"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := v.Verify(ctx, "b", fmt.Sprint("guess-", i)); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("guess: %v", err)
		}
	}
	want = Stats{ScryptRuns: 3, CacheHits: 5, Mismatches: 5, KnownMatchRejects: 3}
	if st := v.Stats(); st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
}

// TestCacheHitAllocatesNothing: the claim behind BenchmarkVerify/path=hit.
func TestCacheHitAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, opts := range []*Options{nil, {DigestKey: bytes.Repeat([]byte{7}, MinDigestKeyLen)}} {
		s := NewMemoryStore()
		v := newTestVerifier(t, s, opts)
		ctx := context.Background()
		if err := v.Ensure(ctx, "node-1", "0123456789abcdef0123456789abcdef"); err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(ctx, "node-1", "wrong-password-0123456789abcdef"); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatal(err)
		}
		for _, pw := range []string{"0123456789abcdef0123456789abcdef", "wrong-password-0123456789abcdef"} {
			if n := testing.AllocsPerRun(1000, func() {
				v.Verify(ctx, "node-1", pw)
				v.Ensure(ctx, "node-1", pw)
			}); n != 0 {
				t.Errorf("cache hit (%q, digests %v) allocates %v times", pw, v.digests != nil, n)
			}
		}
	}
}

// TestCacheHitWithFailingNameTakesNoLock: once a name has a recorded
// mismatch (a guesser, a duplicate hostname), a cache hit for another
// name neither waits for the failure counts' lock nor allocates: the
// sharded cache's hits do not wait for one lock (issue 49).
func TestCacheHitWithFailingNameTakesNoLock(t *testing.T) {
	s := NewMemoryStore()
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	for _, node := range []string{"node-1", "guessed"} {
		if err := v.Ensure(ctx, node, "0123456789abcdef0123456789abcdef"); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Verify(ctx, "guessed", "a guess"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	v.fails.mu.Lock()
	done := make(chan error)
	go func() { done <- v.Verify(ctx, "node-1", "0123456789abcdef0123456789abcdef") }()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second): // a guard against a deadlock, not a timing
		v.fails.mu.Unlock()
		t.Fatalf("a cache hit for node-1 waited for the failure counts' lock: %v", <-done)
	}
	v.fails.mu.Unlock()
	if raceEnabled {
		return
	}
	if n := testing.AllocsPerRun(1000, func() {
		v.Verify(ctx, "node-1", "0123456789abcdef0123456789abcdef")
	}); n != 0 {
		t.Errorf("a cache hit beside a failing name allocates %v times", n)
	}
}

// TestConcurrentIdenticalRequestsShareOneScrypt: 200 requests for one
// tuple while its computation is held cost exactly one scrypt.
func TestConcurrentIdenticalRequestsShareOneScrypt(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "pw"))
	v := newTestVerifier(t, s, nil)
	g := newGate()
	g.install(t, v)
	const n = 200
	errs := make(chan error, n)
	for range n {
		go func() { errs <- v.Verify(context.Background(), "n", "pw") }()
	}
	<-g.entered
	waitFor(t, "all requests to join", func() bool { return v.Stats().Shared == n-1 })
	g.open()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if st := v.Stats(); st.ScryptRuns != 1 || st.Shared != n-1 {
		t.Fatalf("stats %+v: want 1 scrypt run shared by %d", st, n-1)
	}
}

// TestInterleavedPasswordsNeverMixed: right and wrong passwords for one
// node, concurrently and repeatedly, each get their own answer.
func TestInterleavedPasswordsNeverMixed(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "right"))
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 2})
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Go(func() {
			pw := "right"
			if i%2 == 1 {
				pw = fmt.Sprintf("wrong-%d", i%7)
			}
			// One name may have only MaxQueuedPerNode passwords queued:
			// the rest are told to come back, and do.
			err := v.Verify(context.Background(), "n", pw)
			for errors.Is(err, ErrOverloaded) {
				time.Sleep(time.Millisecond)
				err = v.Verify(context.Background(), "n", pw)
			}
			if (pw == "right") != (err == nil) {
				t.Errorf("password %q: err %v", pw, err)
			}
			if err != nil && !errors.Is(err, ErrMismatchedHashAndPassword) {
				t.Errorf("password %q: unexpected error %v", pw, err)
			}
		})
	}
	wg.Wait()
	// One right password and 7 distinct wrong ones: at most 8 computations.
	if st := v.Stats(); st.ScryptRuns > 8 {
		t.Fatalf("%d scrypt runs for 8 distinct tuples", st.ScryptRuns)
	}
}

// TestOtherNodeNeverRidesOnCachedSuccess: a password verified for one node
// is not accepted for another node, even one whose hash it matches only on
// the first node.
func TestOtherNodeNeverRidesOnCachedSuccess(t *testing.T) {
	s := NewMemoryStore()
	hA := mustHash(t, "pw-a")
	s.Set("a", hA)
	s.Set("b", mustHash(t, "pw-b"))
	s.Set("c", hA) // the same stored hash under another name
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	if err := v.Verify(ctx, "a", "pw-a"); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(ctx, "b", "pw-a"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatalf("node b accepted node a's password: %v", err)
	}
	runs := v.Stats().ScryptRuns
	if err := v.Verify(ctx, "c", "pw-a"); err != nil {
		t.Fatal(err)
	}
	if v.Stats().ScryptRuns != runs+1 {
		t.Fatal("node c answered from node a's cache entry")
	}
}

// TestRotatedHash: after the stored hash changes, the old password fails
// and the new one works, whatever was cached.
func TestRotatedHash(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "old"))
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	if err := v.Verify(ctx, "n", "old"); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(ctx, "n", "new"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	s.Set("n", mustHash(t, "new"))
	if err := v.Verify(ctx, "n", "old"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatalf("old password after rotation: %v", err)
	}
	if err := v.Verify(ctx, "n", "new"); err != nil {
		t.Fatalf("new password after rotation: %v", err)
	}
}

func TestInvalidStoredHash(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", "$1:0011223344556677:40:8:1:"+strings.Repeat("A", 86))
	v := newTestVerifier(t, s, nil)
	err := v.Verify(context.Background(), "n", "pw")
	if !errors.Is(err, ErrInvalidHash) || !strings.Contains(err.Error(), `node "n"`) {
		t.Fatalf("err %v", err)
	}
	if st := v.Stats(); st.ScryptRuns != 0 {
		t.Fatalf("%d scrypt runs for an invalid hash", st.ScryptRuns)
	}
}

// TestCancelledFirstCallerDoesNotFailOthers: the caller that started a
// computation leaves; the computation goes on for the caller that joined
// it and is cached.
func TestCancelledFirstCallerDoesNotFailOthers(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "pw"))
	v := newTestVerifier(t, s, nil)
	g := newGate()
	g.install(t, v)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- v.Verify(ctx, "n", "pw") }()
	<-g.entered
	second := make(chan error, 1)
	go func() { second <- v.Verify(context.Background(), "n", "pw") }()
	waitFor(t, "second caller to join", func() bool { return v.Stats().Shared == 1 })
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "verify: ") {
		t.Fatalf("cancelled caller: %v", err)
	}
	g.open()
	if err := <-second; err != nil {
		t.Fatalf("second caller: %v", err)
	}
	// A caller that leaves alone still gets its result cached.
	s.Set("m", mustHash(t, "pw"))
	g2 := newGate()
	v.derive = v.pool.KeyBatch
	g2.install(t, v)
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Verify(ctx2, "m", "pw") }()
	<-g2.entered
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	g2.open()
	waitFor(t, "detached work to finish", func() bool { return idle(v) })
	hits := v.Stats().CacheHits
	if err := v.Verify(context.Background(), "m", "pw"); err != nil {
		t.Fatal(err)
	}
	if st := v.Stats(); st.ScryptRuns != 2 || st.CacheHits != hits+1 {
		t.Fatalf("stats %+v: the retry should be a cache hit", st)
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

// TestLateArrivalNotLockedOut: a node whose request reaches the
// Verifier 3 s after its agent dialled, behind guesses whose callers
// wait, is answered within its agent's 10 s client timeout with its
// password kept queued (its place earned), not left to time out.
func TestLateArrivalNotLockedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewMemoryStore()
		s.Set("busy", mustHash(t, "pw"))
		s.Set("node", mustHash(t, "right"))
		v, err := New(s, &Options{Params: testParams, MaxConcurrent: 1, MaxQueuedPerNode: 2, MaxFailDelay: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		g := newGate()
		g.install(t, v)
		go v.Verify(context.Background(), "busy", "pw")
		<-g.entered
		// Two guessers whose callers wait hold the name's places.
		for i := range 2 {
			go v.Verify(context.Background(), "node", fmt.Sprint("guess-", i))
		}
		synctest.Wait()
		dialed := time.Now()
		time.Sleep(3 * time.Second) // a TLS handshake during a herd
		ctx, cancel := context.WithDeadline(WithArrival(context.Background(), dialed), dialed.Add(10*time.Second))
		defer cancel()
		err = v.Verify(ctx, "node", "right")
		var oe *OverloadError
		if !errors.As(err, &oe) || !oe.Queued {
			t.Fatalf("the node's request after %v: %v; want its password kept queued, answered within its client's timeout", time.Since(dialed), err)
		}
		g.open()
		synctest.Wait()
	})
}

// TestOverload: a request not answered within MaxWait gets a queued
// OverloadError (when it is sent away is the scheduler's policy, tested
// in verify/internal/sched); its work goes on, completes and is cached
// for the retry.
func TestOverload(t *testing.T) {
	s := NewMemoryStore()
	s.Set("busy", mustHash(t, "pw"))
	s.Set("late", mustHash(t, "pw"))
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1, MaxWait: 20 * time.Millisecond})
	g := newGate()
	g.install(t, v)
	ctx := context.Background()
	busy, leave := context.WithCancel(ctx)
	go v.Verify(busy, "busy", "pw")
	<-g.entered
	leave() // only the caller below is shed
	if oe := queuedOverload(t, v.Verify(ctx, "late", "pw")); oe.RetryAfter() <= 0 {
		t.Fatalf("RetryAfter %v, want > 0", oe.RetryAfter())
	}
	if st := v.Stats(); st.Shed != 1 || st.ShedAfterWait != 0 || st.Queued != 1 || st.InFlight != 1 {
		t.Fatalf("stats %+v: want one caller shed, not after a hold (nothing measured yet), one queued, one running", st)
	}
	g.open()
	waitFor(t, "queued work to finish", func() bool { return idle(v) })
	if err := v.Verify(ctx, "late", "pw"); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if st := v.Stats(); st.ScryptRuns != 2 || st.CacheHits != 1 {
		t.Fatalf("stats %+v: the retry should be a cache hit", st)
	}
}

// TestShedAfterWait: a caller held on an estimate (the Verifier has
// measured its computations) and sent away at MaxWait all the same is
// counted in ShedAfterWait.
func TestShedAfterWait(t *testing.T) {
	s := NewMemoryStore()
	for i := range 6 {
		s.Set(fmt.Sprint("warm-", i), mustHash(t, "pw"))
	}
	s.Set("busy", mustHash(t, "pw"))
	s.Set("held", mustHash(t, "pw"))
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1, MaxWait: 300 * time.Millisecond})
	ctx := context.Background()
	// One batch per slot and kind warms up, then four are measured.
	for i := range 6 {
		if err := v.Verify(ctx, fmt.Sprint("warm-", i), "pw"); err != nil {
			t.Fatal(err)
		}
	}
	g := newGate()
	g.install(t, v)
	busy, leave := context.WithCancel(ctx)
	go v.Verify(busy, "busy", "pw")
	<-g.entered
	leave() // only the caller below is shed
	queuedOverload(t, v.Verify(ctx, "held", "pw"))
	if st := v.Stats(); st.Shed != 1 || st.ShedAfterWait != 1 {
		t.Fatalf("shed %d, after a hold %d; want 1 and 1", st.Shed, st.ShedAfterWait)
	}
	g.open()
}

// TestQueueFull: past MaxQueue, new work is refused, not queued.
func TestQueueFull(t *testing.T) {
	s := NewMemoryStore()
	for _, n := range []string{"a", "b", "c"} {
		s.Set(n, mustHash(t, "pw"))
	}
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1, MaxQueue: 1})
	g := newGate()
	g.install(t, v)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go v.Verify(ctx, "a", "pw")
	<-g.entered
	go v.Verify(ctx, "b", "pw")
	waitFor(t, "b to queue", func() bool { return v.Stats().Queued == 1 })
	err := v.Verify(ctx, "c", "pw")
	var oe *OverloadError
	if !errors.As(err, &oe) || oe.Queued || oe.RetryAfter() <= 0 {
		t.Fatalf("err %v, want a refusal with RetryAfter > 0", err)
	}
	if st := v.Stats(); st.Queued != 1 {
		t.Fatalf("refused work was queued: %+v", st)
	}
	g.open()
	waitFor(t, "work to finish", func() bool { return idle(v) })
}
