package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/nodepass/nodepass/scrypt"
)

// TestShape: the budget's buffers go to slots first, then lanes, unless
// the kernels' measured times per hash say that fewer slots of wider
// batches compute more hashes per second.
func TestShape(t *testing.T) {
	none := func(int) (time.Duration, bool) { return 0, false }
	// An AMD EPYC's times per hash at k3s's parameters, ms, by lanes.
	epyc := func(l int) (time.Duration, bool) {
		return map[int]time.Duration{1: 64000, 2: 37000, 4: 19700, 8: 15400}[l] * time.Microsecond, true
	}
	for _, c := range []struct {
		buffers           int64
		maxSlots, maxLane int
		perHash           func(int) (time.Duration, bool)
		slots, lanes      int
	}{
		{32, 2, 8, none, 2, 8},
		{8, 2, 8, none, 2, 4},
		{4, 2, 8, none, 2, 2},
		{3, 2, 8, none, 2, 1},
		{1, 2, 8, none, 1, 1},
		{12, 12, 8, none, 12, 1},
		{1 << 20, 3, 8, none, 3, 8},
		{32, 24, 8, epyc, 16, 2},
		{16, 12, 8, epyc, 8, 2},
		{8, 2, 8, epyc, 2, 4},
		{8, 2, 1, epyc, 2, 1},
	} {
		batches := func(l int) int64 { return c.buffers / int64(l) }
		s, l := shape(batches, c.maxSlots, c.maxLane, c.perHash)
		if s != c.slots || l != c.lanes {
			t.Errorf("shape(%d buffers, %d slots, %d lanes) = %d slots × %d lanes, want %d × %d", c.buffers, c.maxSlots, c.maxLane, s, l, c.slots, c.lanes)
		}
	}
}

// TestScryptMemoryDefault: with the defaults, a Verifier's slots and
// lanes at k3s's parameters fit its default budget, and use it all up
// to GOMAXPROCS batches of scrypt.Lanes(); where the budget binds and
// the kernels are not measured yet, one batch of the widest lanes fits.
func TestScryptMemoryDefault(t *testing.T) {
	v, err := New(NewMemoryStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	cgroup, physical := machineMemory()
	total := v.mem().total
	if want := defaultScryptMemory(cgroup, physical, jobBytes(15, 8, 1, 64)); total != want {
		t.Fatalf("default budget %d, want %d", total, want)
	}
	sh := v.shape.Load()
	held := int64(sh.slots) * batchBytes(DefaultParams, sh.lanes)
	if !sh.final {
		held = batchBytes(DefaultParams, sh.lanes)
	}
	if held > total || sh.slots < 1 || sh.slots > runtime.GOMAXPROCS(0) {
		t.Fatalf("%+v holds %d bytes, budget %d", *sh, held, total)
	}
	if all := int64(runtime.GOMAXPROCS(0)) * batchBytes(DefaultParams, scrypt.Lanes()); all <= total && held != all {
		t.Fatalf("%+v: the budget binds where it should not", *sh)
	}
	least := jobBytes(15, 8, 1, 64)
	if _, err := New(NewMemoryStore(), &Options{ScryptMemory: least - 1}); err == nil {
		t.Fatal("New accepted a budget below one hash of its Params")
	}
	v2, err := New(NewMemoryStore(), &Options{ScryptMemory: least})
	if err != nil {
		t.Fatalf("a budget of one hash of its Params: %v", err)
	}
	v2.Close()
}

// TestScryptMemoryHeldUnderHerd: under a herd of hashes at two sizes,
// the bytes the batches hold at once and the Verifier's idle buffers stay
// within Options.ScryptMemory, and every node gets in.
func TestScryptMemoryHeldUnderHerd(t *testing.T) {
	p := testParams
	p.LogN = 10
	budget := 3 * lane(p.LogN, p.R) // two slots of one lane; a logN 11 hash takes two lanes' bytes
	s := NewMemoryStore()
	const n = 48
	for i := range n {
		q := p
		if i%4 == 0 {
			q.LogN = 11
		}
		h, err := GenerateFromPassword("pw", q)
		if err != nil {
			t.Fatal(err)
		}
		s.Set(fmt.Sprint("n", i), h)
	}
	// The shape New takes for 3 buffers without measured kernels
	// (TestShape), fixed: a 2-lane kernel measured more than twice as
	// fast per hash as a 1-lane one would make it 1 slot × 2 lanes, which
	// never holds more than 2 lanes at once.
	twoSlots := func() (int, int) { return 2, 1 }
	v := newShapedTestVerifier(t, s, &Options{Params: p, MaxConcurrent: 2, ScryptMemory: budget}, twoSlots)
	if m := herdHeld(t, v, n); m > budget {
		t.Errorf("batches held %d bytes at once, budget %d", m, budget)
	}
	if _, idle := v.pool.Idle(); idle > budget || idle == 0 {
		t.Errorf("%d bytes of idle buffers after the herd, want 1 to the budget, %d", idle, budget)
	}
	if st := v.Stats(); st.ScryptRuns != n {
		t.Errorf("stats %+v, want %d scrypt runs", st, n)
	}
}

// herdHeld verifies the nodes n0 to n<n-1> with "pw" at once and returns
// the most bytes v's batches held at once, each batch counted by what it
// allocates (TestScryptMemoryCountsEveryByte).
func herdHeld(t *testing.T, v *Verifier, n int) int64 {
	t.Helper()
	var inUse, most atomic.Int64
	derive := v.derive
	v.derive = func(keys []scrypt.Job, lanes int) {
		b := scrypt.KeyBatchBytes(keys, lanes)
		now := inUse.Add(b)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		derive(keys, lanes)
		inUse.Add(-b)
	}
	verifyAll(t, v, n)
	return most.Load()
}

// verifyAll verifies the nodes n0 to n<n-1> with "pw" through v at once.
func verifyAll(t *testing.T, v *Verifier, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := v.Verify(context.Background(), fmt.Sprint("n", i), "pw"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// lane is what one lane at (2^logN, r) takes of a budget, with p = 1
// and the longest key: k of them hold a batch of k such hashes, or
// batches of k in all.
func lane(logN, r int) int64 { return jobBytes(logN, r, 1, maxKeyLen) }

// TestScryptMemoryRefusesOversizeHash: a stored hash one lane of which
// needs more than the budget is ErrInvalidHash, with no scrypt run and
// no buffer allocated.
func TestScryptMemoryRefusesOversizeHash(t *testing.T) {
	p := testParams
	p.LogN = 10
	s := NewMemoryStore()
	big := p
	big.LogN = 12
	h, err := GenerateFromPassword("pw", big)
	if err != nil {
		t.Fatal(err)
	}
	s.Set("big", h)
	v := newTestVerifier(t, s, &Options{Params: p, ScryptMemory: 2 * lane(p.LogN, p.R)})
	if err := v.Verify(context.Background(), "big", "pw"); !errors.Is(err, ErrInvalidHash) {
		t.Fatalf("a hash over the budget: %v, want ErrInvalidHash", err)
	}
	if n, _ := v.pool.Idle(); n != 0 || v.Stats().ScryptRuns != 0 {
		t.Fatalf("%d buffers, %d scrypt runs for a refused hash", n, v.Stats().ScryptRuns)
	}
}

// TestScryptMemoryBoundsParallelHash: one computation with p ≥ 2 holds
// no more lanes than the budget gives a batch, whatever p.
func TestScryptMemoryBoundsParallelHash(t *testing.T) {
	p := testParams
	p.LogN = 10
	q := p
	q.P = 8
	h, err := GenerateFromPassword("pw", q)
	if err != nil {
		t.Fatal(err)
	}
	s := NewMemoryStore()
	s.Set("n", h)
	v := newTestVerifier(t, s, &Options{Params: p, MaxConcurrent: 1, ScryptMemory: 2 * lane(p.LogN, p.R)})
	if err := v.Verify(context.Background(), "n", "pw"); err != nil {
		t.Fatal(err)
	}
	// Idle after the computation: what it held at once.
	if n, size := v.pool.Idle(); n > 2 || size > v.mem().total {
		t.Fatalf("a p=8 hash held %d buffers (%d bytes), budget 2 lanes, %d bytes", n, size, v.mem().total)
	}
}

// TestNewDoesNoWork: New and NewHasher compute no scrypt, keep no
// buffer and start no goroutine (a digest writer included), even where the budget binds and the
// kernels are not measured (issue 49: New computed a throwaway batch
// there). The first full batch of a herd measures the widest kernels
// the budget allows, and the batches after it take the shape those
// measurements choose.
func TestNewDoesNoWork(t *testing.T) {
	p := testParams
	p.LogN, p.R = 9, 7 // a class no other test computes
	widest := min(2, scrypt.Lanes())
	if _, measured := scrypt.PerHash(1<<p.LogN, p.R, widest); measured {
		t.Skip("the class was measured before this test")
	}
	offHeap, others := scrypt.OffHeapBytes(), goleak.IgnoreCurrent()
	opts := &Options{Params: p, MaxConcurrent: 4, ScryptMemory: 2 * lane(p.LogN, p.R), DigestKey: make([]byte, MinDigestKeyLen)}
	v := newTestVerifier(t, NewMemoryStore(), opts)
	h, err := NewHasher(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, c := range scrypt.Choices() {
		if c.N == 1<<p.LogN && c.R == p.R {
			t.Fatalf("New computed scrypt at the Verifier's parameters: %+v", c)
		}
	}
	if n, _ := v.pool.Idle(); n != 0 || scrypt.OffHeapBytes() != offHeap {
		t.Fatalf("after New: %d idle buffers, %d bytes mapped (%d before)", n, scrypt.OffHeapBytes(), offHeap)
	}
	if err := goleak.Find(others); err != nil {
		t.Fatalf("New started a goroutine: %v", err)
	}
	// A herd: the first job computes alone, the others queue behind it
	// and run in full batches.
	g := newGate()
	g.install(t, v)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := v.Ensure(context.Background(), fmt.Sprint("n", i), "pw"); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "the herd to queue", func() bool { st := v.Stats(); return st.InFlight+st.Queued == 8 })
	if sh := v.shape.Load(); sh.final != (widest == 1) || sh.lanes != widest {
		t.Fatalf("before any batch: %+v, want batches of %d lanes, final only with one lane", *sh, widest)
	}
	g.open()
	wg.Wait()
	if _, measured := scrypt.PerHash(1<<p.LogN, p.R, widest); !measured {
		t.Fatalf("no kernel of %d lanes measured by the herd", widest)
	}
	if sh := v.shape.Load(); !sh.final || sh.slots*sh.lanes > 2 {
		t.Fatalf("after the herd: %+v, want a final shape within 2 lanes", *sh)
	}
}

// TestMemoryBudget: reservations never take more than the budget, and
// every one waiting is woken as bytes come back, however the takes and
// the releases interleave.
func TestMemoryBudget(t *testing.T) {
	const total, lanes = 8, 64
	m := newMemory(total)
	var held, most atomic.Int64
	var wg sync.WaitGroup
	for i := range lanes {
		wg.Go(func() {
			for range 200 {
				n := int64(1 + i%total) // up to the whole budget
				give := m.take(n)
				h := held.Add(n)
				for p := most.Load(); h > p && !most.CompareAndSwap(p, h); p = most.Load() {
				}
				held.Add(-n)
				give()
			}
		})
	}
	wg.Wait()
	if p := most.Load(); p > total {
		t.Fatalf("%d bytes held at once, budget %d", p, total)
	}
	if f := m.free.Load(); f != total {
		t.Fatalf("%d bytes free after every release, want %d", f, total)
	}
}

// TestVerifiersKeepOwnBuffers: two Verifiers in one process keep their
// scrypt buffers apart: one's Close (or quiet period) does not drop the
// other's idle buffers.
func TestVerifiersKeepOwnBuffers(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "pw"))
	a, err := New(s, &Options{Params: testParams})
	if err != nil {
		t.Fatal(err)
	}
	b := newTestVerifier(t, s, nil)
	for _, v := range []*Verifier{a, b} {
		if err := v.Verify(context.Background(), "n", "pw"); err != nil {
			t.Fatal(err)
		}
	}
	before := idleBuffers(b)
	if before == 0 {
		t.Fatal("no idle buffers after a computation")
	}
	a.Close()
	if n := idleBuffers(b); n != before {
		t.Fatalf("another Verifier's Close left %d of %d idle buffers", n, before)
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

// failingFresh is a store whose GetFresh blocks until released, then
// fails.
type failingFresh struct {
	*MemoryStore
	release chan struct{}
}

var errFreshRead = errors.New("fresh read failed")

func (s *failingFresh) GetFresh(ctx context.Context, node string) (string, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return "", errFreshRead
}

// TestIdleBuffersReleasedAfterWorkWithoutBatch: the quiet timer that
// fires while work is under way (an enrollment reading the store) comes
// back: when that work ends without a batch (its read failed), the
// Verifier's idle scrypt buffers are released bufferIdle later, not kept
// until the next computation.
func TestIdleBuffersReleasedAfterWorkWithoutBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &failingFresh{MemoryStore: NewMemoryStore(), release: make(chan struct{})}
		s.Set("known", mustHash(t, "pw"))
		v, err := New(s, &Options{Params: testParams, MaxFailDelay: -1, MaxWait: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		ctx := context.Background()
		if err := v.Verify(ctx, "known", "pw"); err != nil {
			t.Fatal(err)
		}
		if n := idleBuffers(v); n == 0 {
			t.Fatal("no idle buffers after a computation")
		}
		done := make(chan error, 1)
		go func() { done <- v.Ensure(ctx, "new", "pw") }()
		synctest.Wait()                      // the enrollment reads the store
		time.Sleep(bufferIdle + time.Second) // the quiet timer fires meanwhile
		close(s.release)
		if err := <-done; !errors.Is(err, errFreshRead) {
			t.Fatalf("enrollment: %v, want the read's error", err)
		}
		time.Sleep(10 * time.Minute)
		if n := idleBuffers(v); n != 0 {
			t.Fatalf("%d idle buffers kept 10 min after the last work", n)
		}
	})
}

// idleBuffers is how many idle scrypt buffers v keeps.
func idleBuffers(v *Verifier) int {
	n, _ := v.pool.Idle()
	return n
}

// TestHerdBuffersBound: a herd's scrypt buffers, in use and idle, stay
// within what MaxConcurrent batches of scrypt.Lanes() take, and the herd
// runs in batches.
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
	v.derive = func(keys []scrypt.Job, lanes int) {
		batches.Add(1)
		derive(keys, lanes)
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
	bound := 2 * batchBytes(p, scrypt.Lanes())
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

// pbkdf2Heavy is a hash a tampered secret may hold: scrypt's lanes take
// 256 bytes at logN 1 and r 1, and PBKDF2's output B, 128·r·p bytes,
// whatever p makes it.
func pbkdf2Heavy(t *testing.T, p int) string {
	t.Helper()
	h, err := GenerateFromPassword("pw", Params{LogN: 1, R: 1, P: p, KeyLen: 64, SaltLen: 8})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestScryptMemoryCountsEveryByte: what a verification's batch
// allocates (its buffers and the kernel's scratch, PBKDF2's output B, the
// keys) is within what the batch took from the budget, for shapes Limits
// admits and a scrypt lane's V (128·r·N) undercounts: a small N with a
// large r, where each lane's buffer is twice its V and the word-sliced
// kernel's scratch as large as eight of them, and a large p, where B
// outweighs the lanes. The first is issue 43's: logN 1, r 2^13, p 16 in
// a 48 MiB budget allocated 112 MiB.
func TestScryptMemoryCountsEveryByte(t *testing.T) {
	for _, c := range []struct {
		logN, r, p int
		budget     int64
		limits     Limits
	}{
		{1, 1 << 13, 16, 48 << 20, Limits{}},
		{1, 1 << 10, 1, 1 << 20, Limits{}},
		{4, 64, 4, 2 << 20, Limits{}},
		{1, 1, 1 << 14, 8 << 20, Limits{}},
		{1, 1, 1 << 16, 32 << 20, Limits{MaxWork: 1 << 24}}, // p at the work limit: 128·r·N·p = 2^24
	} {
		t.Run(fmt.Sprintf("logN=%d/r=%d/p=%d", c.logN, c.r, c.p), func(t *testing.T) {
			h, err := GenerateFromPassword("pw", Params{LogN: c.logN, R: c.r, P: c.p, KeyLen: 64, SaltLen: 8})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parseHash(h, c.limits.withDefaults()); err != nil {
				t.Fatalf("Limits refuse the shape: %v", err)
			}
			scrypt.ReleaseBuffers() // GenerateFromPassword's, which the GC may free during the batch
			s := NewMemoryStore()
			s.Set("n", h)
			s.Set("warm-up", h)
			v := newTestVerifier(t, s, &Options{MaxConcurrent: 1, ScryptMemory: c.budget, Limits: c.limits})
			// A first batch of the shape, its buffers then dropped: what
			// the runtime (and an emulator's code cache, under
			// qemu-user) grows by once per shape is not the batch's.
			if err := v.Verify(context.Background(), "warm-up", "pw"); err != nil {
				t.Fatal(err)
			}
			v.pool.Release()
			var reserved, allocated, grew int64
			derive := v.derive
			v.derive = func(keys []scrypt.Job, lanes int) {
				var before, after runtime.MemStats
				rss := rssAnon(t)
				runtime.ReadMemStats(&before)
				derive(keys, lanes)
				runtime.ReadMemStats(&after)
				grew = rssAnon(t) - rss
				reserved, allocated = v.mem().total-v.mem().free.Load(), int64(after.TotalAlloc-before.TotalAlloc)
			}
			if err := v.Verify(context.Background(), "n", "pw"); err != nil {
				t.Fatal(err)
			}
			// On the heap, and outside it: the process's anonymous memory
			// grows by what the batch touches, plus the runtime's own.
			if allocated > reserved || grew > reserved+1<<20 || reserved > c.budget {
				t.Fatalf("the batch allocated %d bytes on the heap, the process grew by %d, and the batch took %d from the budget of %d", allocated, grew, reserved, c.budget)
			}
		})
	}
}

// rssAnon is the process's anonymous memory in bytes (RssAnon), or 0
// where /proc does not tell it or the race detector's shadow memory
// would count in it.
func rssAnon(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil || raceEnabled {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			var kB int64
			if _, err := fmt.Sscanf(v, "%d kB", &kB); err != nil {
				t.Fatalf("RssAnon: %q: %v", v, err)
			}
			return kB << 10
		}
	}
	return 0
}

// TestScryptMemoryIdleMakesRoom: a batch that allocates more than its
// buffers (a large p's PBKDF2 output) after a herd left the budget's
// worth of buffers idle first drops enough of them: idle and allocated
// together stay within the budget.
func TestScryptMemoryIdleMakesRoom(t *testing.T) {
	p := Params{LogN: 10, R: 8, P: 1, KeyLen: 64, SaltLen: 8}
	budget := batchBytes(p, scrypt.Lanes())
	heavy := 1 // PBKDF2's output about half the budget: 128 bytes a block, 24 more listing it
	for 152*2*int64(heavy) <= budget {
		heavy *= 2
	}
	// The first node's batch waits at a gate until the others are queued:
	// then they make one full batch.
	n := scrypt.Lanes() + 1
	s := NewMemoryStore()
	for i := range n {
		h, err := GenerateFromPassword("pw", p)
		if err != nil {
			t.Fatal(err)
		}
		s.Set(fmt.Sprint("n", i), h)
	}
	s.Set("heavy", pbkdf2Heavy(t, heavy))
	v := newTestVerifier(t, s, &Options{Params: p, MaxConcurrent: 1, ScryptMemory: budget})
	g := newGate()
	g.install(t, v)
	go func() {
		waitFor(t, "the herd to queue", func() bool { st := v.Stats(); return st.InFlight+st.Queued == uint64(n) })
		g.open()
	}()
	verifyAll(t, v, n)
	if _, idle := v.pool.Idle(); idle < budget/2 {
		t.Fatalf("%d bytes idle after the herd, budget %d: the test tests nothing", idle, budget)
	}
	var allocated uint64
	derive := v.derive
	v.derive = func(keys []scrypt.Job, lanes int) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		derive(keys, lanes)
		runtime.ReadMemStats(&after)
		allocated = after.TotalAlloc - before.TotalAlloc
	}
	if err := v.Verify(context.Background(), "heavy", "pw"); err != nil {
		t.Fatal(err)
	}
	// Idle now: what the heavy batch left of the herd's buffers, and its own.
	if _, idle := v.pool.Idle(); int64(allocated)+idle > budget+16<<10 {
		t.Fatalf("the heavy batch allocated %d bytes beside %d bytes idle, budget %d", allocated, idle, budget)
	}
}

// TestScryptMemoryRefusesPBKDF2Heavy: a stored hash whose PBKDF2 output
// passes the budget, or Limits.MaxMemory, is ErrInvalidHash, refused
// before anything is allocated or computed; at the default limits the
// largest B is 256 MiB, not the 512 MiB of logN 1, r 1 and p 2^22 that
// the work limit lets through.
func TestScryptMemoryRefusesPBKDF2Heavy(t *testing.T) {
	heavy := pbkdf2Heavy(t, 1<<14) // 4 MiB counted: B and its blocks' slice
	for what, o := range map[string]Options{
		"a 1 MiB budget":    {ScryptMemory: 1 << 20},
		"a 1 MiB MaxMemory": {ScryptMemory: -1, Limits: Limits{MaxMemory: 1 << 20}},
	} {
		s := NewMemoryStore()
		s.Set("n", heavy)
		v := newTestVerifier(t, s, &o)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := v.Verify(context.Background(), "n", "pw")
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInvalidHash) {
			t.Errorf("%s: %v, want ErrInvalidHash", what, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 || v.Stats().ScryptRuns != 0 {
			t.Errorf("%s: allocated %d bytes and ran %d scrypt for a refused hash", what, got, v.Stats().ScryptRuns)
		}
	}
	f := strings.Split(heavy, ":")
	f[4] = fmt.Sprint(1 << 22)
	if _, err := parseHash(strings.Join(f, ":"), Limits{}.withDefaults()); !errors.Is(err, ErrInvalidHash) {
		t.Errorf("logN 1, r 1, p 2^22 at the default limits: %v, want ErrInvalidHash", err)
	}
	f[4] = fmt.Sprint(1 << 20)
	if _, err := parseHash(strings.Join(f, ":"), Limits{}.withDefaults()); err != nil {
		t.Errorf("logN 1, r 1, p 2^20 at the default limits: %v", err)
	}
}

// TestScryptMemoryHeldWithPBKDF2UnderHerd: with a budget that holds one
// PBKDF2-heavy job at one lane and no more, a herd of such hashes
// computes one job at a time, within the budget, and every node gets in.
func TestScryptMemoryHeldWithPBKDF2UnderHerd(t *testing.T) {
	const p, n = 1 << 10, 16
	budget := jobBytes(1, 1, p, 64)
	s := NewMemoryStore()
	for i := range n {
		s.Set(fmt.Sprint("n", i), pbkdf2Heavy(t, p))
	}
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 2, ScryptMemory: budget})
	if m := herdHeld(t, v, n); m > budget {
		t.Errorf("batches held %d bytes at once, budget %d", m, budget)
	}
	if st := v.Stats(); st.ScryptRuns != n {
		t.Errorf("stats %+v, want %d scrypt runs", st, n)
	}
}

// TestBudgetHoldsEverySlotsBatch: a budget that holds exactly slots
// full batches (the default's cap on 2 cores with 16 lanes, or on 4 with
// 8) lets every slot compute a full batch at once: a batch takes from it
// what reshape counted for it when it chose the shape, no more. Counted
// otherwise, the second slot's batch waited for the first's, and a cold
// herd took twice the kernel's time.
func TestBudgetHoldsEverySlotsBatch(t *testing.T) {
	p := Params{LogN: 10, R: 8, P: 1, KeyLen: 64, SaltLen: 8} // k3s's r and p
	const slots = 2
	budget := slots * batchBytes(p, scrypt.Lanes())
	v := newShapedTestVerifier(t, NewMemoryStore(), &Options{Params: p, MaxConcurrent: slots, ScryptMemory: budget},
		func() (int, int) { return slots, scrypt.Lanes() })
	v.mem()
	keys := make([]scrypt.Job, scrypt.Lanes())
	for i := range keys {
		keys[i] = scrypt.Job{Password: []byte("pw"), Salt: []byte("salt"), N: 1 << p.LogN, R: p.R, P: p.P, KeyLen: 64}
	}
	for slot := range slots {
		lanes, per, release := v.reserve(keys)
		defer release()
		if lanes != scrypt.Lanes() || per != len(keys) {
			t.Fatalf("slot %d: %d lanes, %d jobs at a time; want %d and %d", slot, lanes, per, scrypt.Lanes(), len(keys))
		}
		if slot+1 < slots {
			// The next slot's reserve would wait for this one's release:
			// look before calling it.
			if free, need := v.mem().free.Load(), scrypt.KeyBatchBytes(keys, lanes); free < need {
				t.Fatalf("after slot %d's batch, %d bytes free: the next slot's batch of %d lanes (%d bytes) would wait", slot, free, lanes, need)
			}
		}
	}
	if DefaultScryptMemory < 2*batchBytes(DefaultParams, 16) {
		t.Errorf("DefaultScryptMemory %d holds fewer than two batches of 16 at k3s's parameters, %d bytes each", DefaultScryptMemory, batchBytes(DefaultParams, 16))
	}
}

// TestDefaultScryptMemory: the default budget is a twelfth of the lower
// of the cgroup's limit and the machine's memory, at most
// DefaultScryptMemory, at least one hash of Options.Params; 2 GiB is
// assumed where neither is known.
func TestDefaultScryptMemory(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	least := jobBytes(15, 8, 1, 64) // k3s's parameters: 32 MiB and some
	for _, c := range []struct {
		name             string
		cgroup, physical int64
		want             int64
	}{
		{"a 2 GiB server", 0, 2 * GiB, 2 * GiB / 12},
		{"an 8 GiB server", 0, 8 * GiB, 8 * GiB / 12},
		{"a 23.5 GiB machine", 0, 47 * GiB / 2, DefaultScryptMemory},
		{"a 256 MiB cgroup on 64 GiB: one hash", 256 * MiB, 64 * GiB, least},
		{"a 1 GiB cgroup on 64 GiB", GiB, 64 * GiB, GiB / 12},
		{"a 4 GiB cgroup on 64 GiB", 4 * GiB, 64 * GiB, 4 * GiB / 12},
		{"a cgroup above the machine", 64 * GiB, 2 * GiB, 2 * GiB / 12},
		{"a cgroup, the machine unknown", 6 * GiB, 0, 6 * GiB / 12},
		{"nothing known", 0, 0, 2 * GiB / 12},
	} {
		if got := defaultScryptMemory(c.cgroup, c.physical, least); got != c.want {
			t.Errorf("%s: %d bytes (%.1f MiB), want %d (%.1f MiB)", c.name, got, float64(got)/MiB, c.want, float64(c.want)/MiB)
		}
	}
	if got := defaultScryptMemory(0, 8*GiB, 2*DefaultScryptMemory); got != 2*DefaultScryptMemory {
		t.Errorf("Params whose one hash passes the cap: %d, want that hash's %d", got, 2*DefaultScryptMemory)
	}
	// The figures the doc gives, and four lanes of k3s's on 2 GiB.
	if got := defaultScryptMemory(0, 2*GiB, least); (got+MiB/2)/MiB != 171 || got < batchBytes(DefaultParams, 4) {
		t.Errorf("2 GiB: %d bytes, want 171 MiB and four lanes at k3s's parameters, %d bytes", got, batchBytes(DefaultParams, 4))
	}
	if got := defaultScryptMemory(0, 8*GiB, least); (got+MiB/2)/MiB != 683 {
		t.Errorf("8 GiB: %d bytes, want 683 MiB", got)
	}
}
