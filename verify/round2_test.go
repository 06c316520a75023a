package verify

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodepass/nodepass/scrypt"
)

// The second review's defects (issue 23), each with a test that fails on
// the code it reviewed (3843199).

// cancelled is a context that has ended: a caller that leaves at once.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestEnrollmentsBoundedByMaxQueue (A): requests for names with no stored
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

// TestFreshReadsBounded (A): enrollments waiting on GetFresh count
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

// TestLateArrivalNotLockedOut (B): a node whose request reaches the
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

// TestQueuedJobsHoldNoGoroutine (C): a queued computation holds no
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

// mustHashAt is mustHash with a salt of its own per i, quickly: the
// stored hashes of a big test population.
func mustHashAt(t *testing.T, password string, i int) string {
	t.Helper()
	return format([]byte(fmt.Sprintf("salt%04d", i)), testParams.LogN, testParams.R, testParams.P, make([]byte, testParams.KeyLen))
}

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

// TestIdleBuffersReleased: the scrypt buffers a Verifier used are released
// once it has had nothing to compute for bufferIdle, and at Close.
func TestIdleBuffersReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewMemoryStore()
		s.Set("n", mustHash(t, "pw"))
		v, err := New(s, &Options{Params: testParams})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		if err := v.Verify(context.Background(), "n", "pw"); err != nil {
			t.Fatal(err)
		}
		if n, _ := v.pool.Idle(); n == 0 {
			t.Fatal("no idle buffer after a computation")
		}
		time.Sleep(bufferIdle - time.Second)
		synctest.Wait()
		if n, _ := v.pool.Idle(); n == 0 {
			t.Fatal("buffers released before the quiet period")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n, b := v.pool.Idle(); n != 0 {
			t.Fatalf("%d idle buffers (%d bytes) after %v of quiet", n, b, bufferIdle)
		}
	})
}

// TestHerdBuffersBound: a herd's scrypt buffers, in use and idle, stay
// within MaxConcurrent × scrypt.Lanes() × 128·r·(N+2), the bound
// Options.MaxConcurrent states, and the herd runs in batches.
func TestHerdBuffersBound(t *testing.T) {
	p := testParams
	p.LogN = 10
	s := NewMemoryStore()
	const n = 64
	for i := range n {
		h, err := GenerateFromPassword("pw", p)
		if err != nil {
			t.Fatal(err)
		}
		s.Set(fmt.Sprint("n", i), h)
	}
	var batches atomic.Int64
	v := newTestVerifier(t, s, &Options{Params: p, MaxConcurrent: 2})
	derive := v.derive
	v.derive = func(keys []scrypt.Job) {
		batches.Add(1)
		derive(keys)
	}
	// The first two hold both slots until the rest are queued.
	g := newGate()
	g.install(t, v)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := v.Verify(context.Background(), fmt.Sprint("n", i), "pw"); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "the herd to queue", func() bool { st := v.Stats(); return st.InFlight+st.Queued == n })
	g.open()
	wg.Wait()
	bound := int64(2*scrypt.Lanes()) * 128 * int64(p.R) * (1<<p.LogN + 2)
	if _, idle := v.pool.Idle(); idle > bound || idle == 0 {
		t.Fatalf("%d bytes of buffers after the herd, want 1 to %d", idle, bound)
	}
	if st := v.Stats(); st.ScryptRuns != n {
		t.Fatalf("stats %+v", st)
	}
	if scrypt.Lanes() > 1 && batches.Load() > 2+n/2 {
		t.Fatalf("%d batches for %d computations with %d lanes", batches.Load(), n, scrypt.Lanes())
	}
}
