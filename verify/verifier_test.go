package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodepass/nodepass/scrypt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(idleChild) != "" {
		idleChildMain() // TestNewHasherInInit's child
	}
	goleak.VerifyTestMain(m)
}

// newTestVerifier returns a Verifier with cheap parameters, closed at the
// end of the test.
func newTestVerifier(t *testing.T, store Store, opts *Options) *Verifier {
	t.Helper()
	return newShapedTestVerifier(t, store, opts, nil)
}

// newShapedTestVerifier is newTestVerifier with the slots and lanes
// shape chooses for the budget.
func newShapedTestVerifier(t *testing.T, store Store, opts *Options, shape func() (slots, lanes int)) *Verifier {
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
	v, err := newShaped(store, &o, shape)
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

// mustHashAt is mustHash with a salt of its own per i, quickly: the
// stored hashes of a big test population.
func mustHashAt(t *testing.T, password string, i int) string {
	t.Helper()
	return format([]byte(fmt.Sprintf("salt%04d", i)), testParams.LogN, testParams.R, testParams.P, make([]byte, testParams.KeyLen))
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
	v.derive = func(keys []scrypt.Job, lanes int) {
		select {
		case <-g.release:
		default:
			select {
			case g.entered <- struct{}{}:
			case <-g.release:
			}
			<-g.release
		}
		derive(keys, lanes)
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

// cancelled is a context that has ended: a caller that leaves at once.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
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
