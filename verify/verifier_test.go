package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nodepass/nodepass/scrypt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestVerifier returns a Verifier with cheap parameters, closed at the
// end of the test.
func newTestVerifier(t *testing.T, store Store, opts *Options) *Verifier {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Params == (Params{}) {
		o.Params = testParams
	}
	if o.MaxFailDelay == 0 {
		o.MaxFailDelay = -1 // tests of the delay set it themselves
	}
	if o.MaxWait == 0 {
		// Only the overload tests may see an OverloadError: a loaded CI
		// machine under -race must make the others slower, not fail them.
		o.MaxWait = time.Hour
	}
	v, err := New(store, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// mustHash hashes password with testParams.
func mustHash(t *testing.T, password string) string {
	t.Helper()
	h, err := GenerateFromPassword(password, testParams)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// gate blocks the hasher until released, to make sharing and queueing
// deterministic.
type gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 1024), release: make(chan struct{})} }

// open releases the hasher, once however often it is called.
func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// install makes every batch of v's computations wait at g while it is
// shut, each telling entered as it comes; once g is open, batches pass
// without a word, however many (with one lane, every job is a batch of
// its own: more than entered holds). It opens g when t ends, before v's
// Close (registered when v was made), which would wait for gated work
// for ever if t failed with g shut.
func (g *gate) install(t testing.TB, v *Verifier) {
	t.Cleanup(g.open)
	derive := v.derive
	v.derive = func(keys []scrypt.Job) {
		select {
		case <-g.release:
		default:
			select {
			case g.entered <- struct{}{}:
			case <-g.release:
			}
			<-g.release
		}
		derive(keys)
	}
}

// waitFor polls cond; it fails the test rather than hang if cond never
// holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// idle reports whether v has no computation running or waiting for a
// slot (an enrollment's Create may still be under way).
func idle(v *Verifier) bool {
	st := v.Stats()
	return st.InFlight == 0 && st.Queued == 0
}

// countingStore counts calls and can inject failures.
type countingStore struct {
	*MemoryStore
	gets, creates atomic.Int64
	getErr        func(n int64) error // called with the 1-based call count
	createHook    func(ctx context.Context) error
}

func newCountingStore() *countingStore { return &countingStore{MemoryStore: NewMemoryStore()} }

func (s *countingStore) Get(ctx context.Context, node string) (string, error) {
	n := s.gets.Add(1)
	if s.getErr != nil {
		if err := s.getErr(n); err != nil {
			return "", err
		}
	}
	return s.MemoryStore.Get(ctx, node)
}

func (s *countingStore) Create(ctx context.Context, node, hash string) error {
	s.creates.Add(1)
	if s.createHook != nil {
		if err := s.createHook(ctx); err != nil {
			return err
		}
	}
	return s.MemoryStore.Create(ctx, node, hash)
}

func TestNewValidatesOptions(t *testing.T) {
	if _, err := New(nil, nil); err == nil {
		t.Error("nil store accepted")
	}
	for _, o := range []Options{
		{MaxConcurrent: -1}, {MaxWait: -1}, {MaxQueue: -1}, {Limits: Limits{MaxPasswordLen: -1}}, {WorkTimeout: -1},
		{Limits: Limits{MaxMemory: -1}},
		{Params: Params{LogN: 4}},
	} {
		if _, err := New(NewMemoryStore(), &o); err == nil || !strings.HasPrefix(err.Error(), "verify: ") {
			t.Errorf("options %+v: err %v, want a verify: error", o, err)
		}
	}
	v, err := New(NewMemoryStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.opts.Params != DefaultParams || v.opts.MaxWait != DefaultMaxWait || v.opts.MaxConcurrent < 1 {
		t.Fatalf("defaults not applied: %+v", v.opts)
	}
}

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

func TestStoreErrorsWrappedAndNotCached(t *testing.T) {
	s := newCountingStore()
	s.Set("n", mustHash(t, "pw"))
	boom := errors.New("apiserver unavailable")
	s.getErr = func(n int64) error {
		if n <= 2 {
			return boom
		}
		return nil
	}
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	for _, call := range []func(context.Context, string, string) error{v.Verify, v.Ensure} {
		err := call(ctx, "n", "pw")
		if !errors.Is(err, boom) || errors.Is(err, ErrMismatchedHashAndPassword) || errors.Is(err, ErrNotFound) {
			t.Fatalf("err %v: want the store error, not a mismatch", err)
		}
		if !strings.HasPrefix(err.Error(), `verify: store Get("n")`) {
			t.Fatalf("err %q does not say what failed", err)
		}
	}
	if err := v.Verify(ctx, "n", "pw"); err != nil {
		t.Fatalf("after the store recovered: %v", err)
	}
	if st := v.Stats(); st.StoreErrors != 2 || st.ScryptRuns != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestFailedComputationNotCached: an error other than a mismatch (here
// from the hasher) is returned and the next request computes again.
func TestFailedComputationNotCached(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "pw"))
	v := newTestVerifier(t, s, nil)
	var calls atomic.Int64
	derive := v.derive
	v.derive = func(keys []scrypt.Job) {
		derive(keys)
		if calls.Add(1) == 1 {
			keys[0].Key, keys[0].Err = nil, errors.New("transient")
		}
	}
	if err := v.Verify(context.Background(), "n", "pw"); err == nil || !strings.Contains(err.Error(), "transient") || errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatalf("first call: %v", err)
	}
	if err := v.Verify(context.Background(), "n", "pw"); err != nil {
		t.Fatalf("second call: %v", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d computations, want 2", calls.Load())
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
	v.derive = scrypt.KeyBatch
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

type panicStore struct{ MemoryStore }

func (*panicStore) Get(context.Context, string) (string, error) { panic("store exploded") }

type panicCreateStore struct{ *MemoryStore }

func (panicCreateStore) Create(context.Context, string, string) error { panic("create exploded") }

func TestPanicsBecomeErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("store Get", func(t *testing.T) {
		v := newTestVerifier(t, &panicStore{}, nil)
		if err := v.Verify(ctx, "n", "pw"); err == nil || !strings.Contains(err.Error(), "store exploded") {
			t.Fatalf("err %v", err)
		}
		if v.Stats().Panics != 1 {
			t.Fatal("panic not counted")
		}
	})
	t.Run("store Create in shared work", func(t *testing.T) {
		v := newTestVerifier(t, panicCreateStore{NewMemoryStore()}, nil)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if err := v.Ensure(ctx, "n", "pw"); err == nil || !strings.Contains(err.Error(), "create exploded") {
					t.Errorf("err %v", err)
				}
			})
		}
		wg.Wait()
	})
	t.Run("hasher", func(t *testing.T) {
		s := NewMemoryStore()
		s.Set("n", mustHash(t, "pw"))
		v := newTestVerifier(t, s, &Options{MaxConcurrent: 1})
		v.derive = func([]scrypt.Job) { panic("hasher exploded") }
		if err := v.Verify(ctx, "n", "pw"); err == nil || !strings.Contains(err.Error(), "hasher exploded") {
			t.Fatalf("err %v", err)
		}
		// The slot was given back: the next computation runs.
		v.derive = scrypt.KeyBatch
		if err := v.Verify(ctx, "n", "pw"); err != nil {
			t.Fatal(err)
		}
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

// TestHangingStoreTimesOut: shared work (here an enrollment's Create) is
// bounded by WorkTimeout even though no caller waits for it.
func TestHangingStoreTimesOut(t *testing.T) {
	s := newCountingStore()
	s.createHook = func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	v := newTestVerifier(t, s, &Options{WorkTimeout: 50 * time.Millisecond})
	err := v.Ensure(context.Background(), "n", "pw")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "store Create") {
		t.Fatalf("err %v", err)
	}
	if st := v.Stats(); st.StoreErrors != 1 || st.Enrollments != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestClose(t *testing.T) {
	s := NewMemoryStore()
	s.Set("a", mustHash(t, "pw"))
	s.Set("b", mustHash(t, "pw"))
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1})
	g := newGate()
	g.install(t, v)
	ctx := context.Background()
	a := make(chan error, 1)
	b := make(chan error, 1)
	go func() { a <- v.Verify(ctx, "a", "pw") }()
	<-g.entered
	go func() { b <- v.Verify(ctx, "b", "pw") }()
	waitFor(t, "b to queue", func() bool { return v.Stats().Queued == 1 })
	closed := make(chan struct{})
	go func() { v.Close(); close(closed) }()
	if err := <-b; err != ErrClosed {
		t.Fatalf("queued work on Close: %v, want ErrClosed", err)
	}
	g.open() // Close waits for the running computation
	<-closed
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	if st := v.Stats(); st.ScryptRuns != 1 {
		t.Fatalf("stats %+v: want the running computation finished, the queued one dropped", st)
	}
	// Its outcome is cached, but the Verifier is closed: no answer but ErrClosed.
	if err := v.Verify(ctx, "a", "pw"); err != ErrClosed {
		t.Fatalf("cached tuple after Close: %v, want ErrClosed", err)
	}
	if err := v.Verify(ctx, "b", "pw"); !errors.Is(err, ErrClosed) {
		t.Fatalf("new work after Close: %v", err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}

type recordingObserver struct {
	scrypt, wait atomic.Int64
	mu           sync.Mutex
	callers      []string // the "caller" label of each scrypt computation's context
}

func (o *recordingObserver) ObserveScrypt(ctx context.Context, _ time.Duration) {
	o.scrypt.Add(1)
	l, _ := pprof.Label(ctx, "caller")
	if w, _ := pprof.Label(ctx, ProfileLabel); w != ProfileScrypt {
		l += " without " + ProfileLabel + "=" + ProfileScrypt
	}
	o.mu.Lock()
	o.callers = append(o.callers, l)
	o.mu.Unlock()
}

func (o *recordingObserver) ObserveQueueWait(context.Context, time.Duration) { o.wait.Add(1) }

func TestObserver(t *testing.T) {
	obs := &recordingObserver{}
	s := NewMemoryStore()
	v := newTestVerifier(t, s, &Options{Observer: obs})
	// The observer sees the labels of the request that started the work.
	ctx := pprof.WithLabels(context.Background(), pprof.Labels("caller", "first"))
	if err := v.Ensure(ctx, "n", "pw"); err != nil {
		t.Fatal(err)
	}
	s.Set("m", mustHash(t, "pw"))
	ctx = pprof.WithLabels(context.Background(), pprof.Labels("caller", "second"))
	if err := v.Verify(ctx, "m", "other"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	if obs.scrypt.Load() != 2 || obs.wait.Load() != 2 {
		t.Fatalf("observed %d scrypt, %d waits; want 2 and 2", obs.scrypt.Load(), obs.wait.Load())
	}
	if want := []string{"first", "second"}; !slices.Equal(obs.callers, want) {
		t.Fatalf("scrypt computations observed with caller labels %q, want %q", obs.callers, want)
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

// queuedOverload returns err as an *OverloadError whose work stays
// queued, or fails t.
func queuedOverload(t *testing.T, err error) *OverloadError {
	t.Helper()
	var oe *OverloadError
	if !errors.As(err, &oe) || !oe.Queued {
		t.Fatalf("err %v, want a queued OverloadError", err)
	}
	return oe
}
