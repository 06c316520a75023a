package verify

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodepass/nodepass/scrypt"
)

// TestBatchCachedBeforeSlotReleased: a batch's outcomes are cached before
// its slot goes to the next batch: a guess for a node whose own password
// was in the batch before finds it verified and costs no scrypt.
func TestBatchCachedBeforeSlotReleased(t *testing.T) {
	s := NewMemoryStore()
	s.Set("busy", mustHash(t, "pw"))
	s.Set("node", mustHash(t, "right"))
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1})
	g := newGate()
	g.install(t, v)
	go v.Verify(context.Background(), "busy", "pw")
	<-g.entered
	done := make(chan error, 2)
	go func() { done <- v.Verify(context.Background(), "node", "right") }()
	waitFor(t, "the node's password to queue", func() bool { return v.Stats().Queued == 1 })
	go func() { done <- v.Verify(context.Background(), "node", "guess") }()
	waitFor(t, "the guess to queue", func() bool { return v.Stats().Queued == 2 })
	g.open()
	var matches, mismatches int
	for range 2 {
		switch err := <-done; {
		case err == nil:
			matches++
		case errors.Is(err, ErrMismatchedHashAndPassword):
			mismatches++
		default:
			t.Fatal(err)
		}
	}
	if st := v.Stats(); matches != 1 || mismatches != 1 || st.ScryptRuns != 2 || st.KnownMatchRejects != 1 {
		t.Fatalf("stats %+v: want 2 scrypt runs (busy, the node's password) and the guess a known-match reject", st)
	}
}

// TestQueuedJobsHoldNoGoroutine: a queued computation holds no
// goroutine and at most 4 KiB of heap, whatever the backlog.
func TestQueuedJobsHoldNoGoroutine(t *testing.T) {
	s := NewMemoryStore()
	s.Set("busy", mustHash(t, "pw"))
	const n = 2000
	for i := range n {
		s.Set(fmt.Sprint("n", i), mustHashAt(t, "pw", i))
	}
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1, MaxQueue: 2 * n})
	g := newGate()
	g.install(t, v)
	go v.Verify(context.Background(), "busy", "pw")
	<-g.entered
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	for i := range n {
		v.Verify(cancelled(), fmt.Sprint("n", i), "guess")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if st := v.Stats(); st.Queued != n {
		t.Fatalf("%d queued, want %d", st.Queued, n)
	}
	if d := runtime.NumGoroutine() - goroutines; d > 10 {
		t.Errorf("%d more goroutines for %d queued computations", d, n)
	}
	// The job, its task and context, and its node name's queue and ask
	// log (one name per job here): about 3 KiB.
	if perJob := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n; perJob > 4096 {
		t.Errorf("%d bytes of live heap per queued computation, want at most 4 KiB", perJob)
	}
	g.open()
	waitFor(t, "work to finish", func() bool { return idle(v) })
}

// TestFailedComputationNotCached: an error other than a mismatch (here
// from the hasher) is returned and the next request computes again.
func TestFailedComputationNotCached(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "pw"))
	v := newTestVerifier(t, s, nil)
	var calls atomic.Int64
	derive := v.derive
	v.derive = func(keys []scrypt.Job, lanes int) {
		derive(keys, lanes)
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

// panickyObserver panics when told of the computation for one node,
// in ObserveQueueWait or in ObserveScrypt.
type panickyObserver struct {
	inScrypt bool
	node     string
}

type nodeKey struct{}

func (o panickyObserver) ObserveQueueWait(ctx context.Context, d time.Duration) {
	if !o.inScrypt && ctx.Value(nodeKey{}) == o.node {
		panic("observer broke")
	}
}

func (o panickyObserver) ObserveScrypt(ctx context.Context, d time.Duration) {
	if o.inScrypt && ctx.Value(nodeKey{}) == o.node {
		panic("observer broke")
	}
}

// TestObserverPanicKeepsErrorContract: a panic in the Observer is
// recovered and counted in Stats.Panics; every job of the batch, the
// observed one's included, gets its own answer, and any error starts
// with "verify: ".
func TestObserverPanicKeepsErrorContract(t *testing.T) {
	for _, inScrypt := range []bool{false, true} {
		t.Run(fmt.Sprint("scrypt=", inScrypt), func(t *testing.T) {
			s := NewMemoryStore()
			const n = 4
			for i := range n {
				s.Set(fmt.Sprint("n", i), mustHash(t, "pw"))
			}
			v, g := occupied(t, s, &Options{Observer: panickyObserver{inScrypt, "n0"}})
			errs := make(chan error, n)
			for i := range n {
				node := fmt.Sprint("n", i)
				go func() { errs <- v.Verify(context.WithValue(context.Background(), nodeKey{}, node), node, "pw") }()
			}
			waitFor(t, "the jobs to queue", func() bool { return v.Stats().Queued == n })
			g.open()
			failed := 0
			for range n {
				if err := <-errs; err != nil {
					failed++
					if !strings.HasPrefix(err.Error(), "verify: ") {
						t.Errorf("error %q does not start with \"verify: \"", err)
					}
				}
			}
			if failed > 0 {
				t.Errorf("%d of %d verifications failed for the Observer's panic, want none", failed, n)
			}
			if p := v.Stats().Panics; p == 0 {
				t.Error("the Observer's panic is not counted in Stats.Panics")
			}
		})
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
		v.derive = func([]scrypt.Job, int) { panic("hasher exploded") }
		if err := v.Verify(ctx, "n", "pw"); err == nil || !strings.Contains(err.Error(), "hasher exploded") {
			t.Fatalf("err %v", err)
		}
		// The slot was given back: the next computation runs.
		v.derive = v.pool.KeyBatch
		if err := v.Verify(ctx, "n", "pw"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestColdBurstFillsBatches: 64 cold verifications that ask at once, on
// 2 slots, run in full batches of scrypt.Lanes(), but for the first,
// which starts alone (nothing told it a burst was coming), and the last:
// the jobs after the first wait for their batch to fill instead of each
// computing alone.
func TestColdBurstFillsBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testParams
		p.LogN = 11 // 2 MiB a hash: a fill time of 1.5 ms before estimates
		const n = 64
		s := NewMemoryStore()
		for i := range n {
			h, err := GenerateFromPassword("pw", p)
			if err != nil {
				t.Fatal(err)
			}
			s.Set(fmt.Sprint("n", i), h)
		}
		v := newTestVerifier(t, s, &Options{Params: p, MaxConcurrent: 2})
		var mu sync.Mutex
		var sizes []int
		derive := v.derive
		v.derive = func(keys []scrypt.Job, lanes int) {
			mu.Lock()
			first := sizes == nil
			sizes = append(sizes, len(keys))
			mu.Unlock()
			if first {
				// The first job computes while the others arrive: that it
				// is not done yet is what tells them a burst is under
				// way. Without this its real computation may end before
				// the next goroutine asks, in no time on the bubble's
				// clock, and that job would rightly start alone too.
				synctest.Wait()
			}
			derive(keys, lanes)
		}
		verifyAll(t, v, n)
		lanes := scrypt.Lanes()
		want := append([]int{1}, slices.Repeat([]int{lanes}, (n-1)/lanes)...)
		if (n-1)%lanes > 0 {
			want = append(want, (n-1)%lanes)
		}
		slices.Sort(want)
		if slices.Sort(sizes); !slices.Equal(sizes, want) {
			t.Fatalf("%d cold verifications ran in batches of %v, want %v", n, sizes, want)
		}
		if st := v.Stats(); st.ScryptRuns != n {
			t.Fatalf("stats %+v, want %d scrypt runs", st, n)
		}
	})
}
