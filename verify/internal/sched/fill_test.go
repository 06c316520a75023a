package sched

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// fillWork is k3s's work per hash: a fill time of maxFill before
// estimates.
const fillWork = 32 << 20

// fillHarness is a harness whose test moves the fake time itself, so
// that it sees the slots while they wait for a full batch (settle lets
// the wait pass).
type fillHarness struct{ *harness }

// join joins a job of work and class for name, and waits until the
// bubble's goroutines are blocked, not until the slots stop waiting.
func (h fillHarness) join(name string, class int, work int64) *Job {
	h.t.Helper()
	j, _, err := h.s.Join(context.Background(), Request{Key: keyOf(name), Name: name, Work: work, Class: Class{N: class}})
	if err != nil {
		h.t.Fatal(err)
	}
	synctest.Wait()
	return j
}

// running reports whether j holds a slot, under the lock: the fill
// timer's goroutine may write its state next.
func (h fillHarness) running(j *Job) bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return j.state == running
}

// sleep lets d of fake time pass.
func (h fillHarness) sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// runFill runs f in a bubble with a fresh fillHarness over cfg (a queue
// of 100, 2 places a name, callers held an hour), and stops it at the
// end.
func runFill(t *testing.T, cfg Config, f func(h fillHarness)) {
	synctest.Test(t, func(t *testing.T) {
		cfg.MaxQueue, cfg.PerName, cfg.MaxWait = 100, 2, time.Hour
		h := fillHarness{newHarness(t, cfg)}
		defer h.stop()
		f(h)
	})
}

// TestLoneJobStartsAtOnce: a job that comes alone to an idle scheduler
// starts at once, whatever its fill time: nobody is coming to share its
// batch. So does one that comes after the job before it is done (a
// node's token, then its password), and one that finds the others
// running in a batch that started long before.
func TestLoneJobStartsAtOnce(t *testing.T) {
	runFill(t, Config{Slots: 2, Lanes: 8}, func(h fillHarness) {
		a := h.join("a", 1, fillWork)
		if !h.running(a) {
			h.t.Fatalf("a lone job on an idle scheduler: %v, want it running at once", a.state)
		}
		h.sleep(time.Second)
		h.done(a)
		b := h.join("b", 1, fillWork)
		if !h.running(b) {
			h.t.Fatalf("a job after the one before it was done: %v, want it running at once", b.state)
		}
		h.sleep(10 * time.Second) // past a full batch's estimate: 8 lanes × 100 ms before estimates
		c := h.join("c", 1, fillWork)
		if !h.running(c) {
			h.t.Fatalf("a job 10 s after the running one: %v, want it running at once", c.state)
		}
	})
}

// TestBurstFillsBatches: a burst that comes at once runs its first job
// alone (nothing told it a burst was coming), and every batch after it
// full but the last, whose jobs wait for their fill time: 64 jobs on 2
// slots of 8 lanes.
func TestBurstFillsBatches(t *testing.T) {
	runFill(t, Config{Slots: 2, Lanes: 8}, func(h fillHarness) {
		for i := range 64 {
			h.s.Join(context.Background(), Request{Key: keyOf(fmt.Sprint(i)), Name: fmt.Sprint("n", i), Work: fillWork})
		}
		h.settle()
		var sizes []int
		for i := 0; ; i++ {
			h.mu.Lock()
			if i == len(h.ran) {
				h.mu.Unlock()
				break
			}
			b := h.ran[i]
			h.mu.Unlock()
			sizes = append(sizes, len(b))
			h.done(b[0])
		}
		// The first two batches start on two goroutines, in either order.
		slices.Sort(sizes)
		if want := append([]int{1, 7}, slices.Repeat([]int{8}, 7)...); !slices.Equal(sizes, want) {
			h.t.Fatalf("a burst of 64 on 2 slots of 8 lanes ran in batches of %v, want %v", sizes, want)
		}
	})
}

// TestTrickleFills: jobs that come 3 ms apart, each while the one before
// is queued or running, are a burst: after the first, which starts
// alone, the next waits its fill time (maxFill) for the others, which
// share its batch.
func TestTrickleFills(t *testing.T) {
	runFill(t, Config{Slots: 2, Lanes: 8}, func(h fillHarness) {
		first := h.join("n0", 1, fillWork)
		var js []*Job
		for i := 1; i <= 3; i++ {
			h.sleep(3 * time.Millisecond)
			js = append(js, h.join(fmt.Sprint("n", i), 1, fillWork))
			if h.running(js[0]) {
				h.t.Fatalf("the second job started %v after it was queued, before its fill time", time.Duration(i-1)*3*time.Millisecond)
			}
		}
		if !h.running(first) {
			h.t.Fatal("the first job waits")
		}
		h.sleep(maxFill - 6*time.Millisecond)
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		for i, j := range js {
			if j.state != running || j.batch != js[0].batch {
				h.t.Fatalf("%v after the second job: job %d %v, want the three in one batch", maxFill, i+1, j.state)
			}
		}
	})
}

// TestFullBatchStartsAtOnce: in a burst, a batch that is full starts at
// once: at Lanes jobs, or at MaxBatchWork; so does a job too cheap to
// wait for.
func TestFullBatchStartsAtOnce(t *testing.T) {
	t.Run("MaxBatchWork", func(t *testing.T) {
		runFill(t, Config{Slots: 2, Lanes: 8, MaxBatchWork: 2 * fillWork}, func(h fillHarness) {
			h.join("running", 1, fillWork)
			a, b := h.join("a", 1, fillWork), h.join("b", 1, fillWork)
			if !h.running(a) || !h.running(b) {
				h.t.Fatalf("two jobs at MaxBatchWork: %v, %v, want one batch at once", a.state, b.state)
			}
		})
	})
	t.Run("cheap", func(t *testing.T) {
		runFill(t, Config{Slots: 2, Lanes: 8}, func(h fillHarness) {
			h.join("running", 1, 1<<20)
			if j := h.join("a", 1, 1<<20); !h.running(j) { // about 0.8 ms in a batch
				h.t.Fatalf("a job of 1 MiB: %v, want it started at once", j.state)
			}
		})
	})
}

// TestFillTimerOfJobGone: the fill timer armed for a job that then left
// in a full batch starts nothing when it fires: the next job in turn,
// queued later, still waits its own fill time.
func TestFillTimerOfJobGone(t *testing.T) {
	runFill(t, Config{Slots: 3, Lanes: 4}, func(h fillHarness) {
		h.join("running", 1, fillWork)
		a := h.join("a", 1, fillWork) // a burst: waits until maxFill
		h.sleep(maxFill / 2)
		for _, name := range []string{"b", "c", "d"} {
			h.join(name, 1, fillWork)
		}
		if !h.running(a) {
			h.t.Fatalf("a full batch: a %v, want it running", a.state)
		}
		h.sleep(time.Millisecond)
		e := h.join("e", 1, fillWork) // a burst too: waits until its own fill time
		h.sleep(maxFill/2 - time.Millisecond)
		// a's fill time is over.
		if h.running(e) {
			h.t.Fatalf("e started %v after it was queued, at the end of a's fill time, not its own", maxFill/2-time.Millisecond)
		}
		h.sleep(maxFill/2 + time.Millisecond)
		if !h.running(e) {
			h.t.Fatalf("e %v at the end of its fill time, want it running", e.state)
		}
	})
}

// TestFillCountsItsClass: jobs of another class queued behind the job in
// turn do not fill its batch, which stops at them: it waits its fill
// time for jobs of its own class, and starts with those that came.
func TestFillCountsItsClass(t *testing.T) {
	runFill(t, Config{Slots: 2, Lanes: 4}, func(h fillHarness) {
		h.join("running", 1, fillWork)
		x := h.join("x", 1, fillWork)
		h.sleep(time.Millisecond)
		for _, name := range []string{"y1", "y2", "y3"} {
			h.join(name, 2, fillWork)
		}
		if h.running(x) {
			h.t.Fatal("x started with 3 jobs of another class queued behind it, as if they filled its batch")
		}
		h.sleep(maxFill - time.Millisecond)
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		if x.state != running || len(x.batch.jobs) != 1 {
			h.t.Fatalf("x at the end of its fill time: %v, want it running alone", x.state)
		}
	})
}

// TestBatchLenBoundsTheBatch: the batch a free slot would take, as the
// fill wait counts it, is never larger than the one it takes, and is
// the same when each name has one job queued, across random queues of
// wanted, unwanted and suspect jobs of two classes.
func TestBatchLenBoundsTheBatch(t *testing.T) {
	for seed := range uint64(200) {
		for _, oneEach := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Slots: 1, Lanes: 4, MaxQueue: 1000, PerName: 3, MaxWait: time.Hour})
				defer h.stop()
				first := randomQueue(h, rand.New(rand.NewPCG(seed, 11)), 2, oneEach)
				h.s.mu.Lock()
				counted := h.s.batchLenLocked(h.s.cfg.Lanes)
				h.s.mu.Unlock()
				h.done(first)
				h.mu.Lock()
				taken := len(h.ran[len(h.ran)-1])
				h.mu.Unlock()
				if counted > taken || oneEach && counted != taken {
					t.Fatalf("seed %d, one job a name %v: counted %d, the batch took %d", seed, oneEach, counted, taken)
				}
			})
		}
	}
}

// TestLoneJobBesideWorkItCannotJoin: a job that comes alone starts at
// once beside a job created just before it that can never share its
// batch: one computed already whose runner writes the store (finishing,
// an enrollment's Create), or one of another class, running or reading
// the store before its slot (pending). Counted as a burst, each made it
// wait its fill time with slots free (issue 49 A).
func TestLoneJobBesideWorkItCannotJoin(t *testing.T) {
	for _, c := range []struct {
		name  string
		class int
		start func(h fillHarness, j *Job) // puts the job created first in its state
	}{
		{"finishing", 1, func(h fillHarness, j *Job) {
			h.s.Hold(j)
			h.mu.Lock()
			b := h.batches[j]
			h.mu.Unlock()
			b.end <- [2]time.Duration{} // its slot given back, its Create under way
			synctest.Wait()
		}},
		{"another class running", 2, func(fillHarness, *Job) {}},
		{"another class pending", 2, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			runFill(t, Config{Slots: 2, Lanes: 8}, func(h fillHarness) {
				var first *Job
				if c.start == nil {
					h.prepared = func(*Job) {} // its store read never ends
					j, _, err := h.s.Join(context.Background(), Request{Key: keyOf("first"), Name: "first", Work: fillWork, Class: Class{N: c.class}, Later: true})
					if err != nil {
						h.t.Fatal(err)
					}
					synctest.Wait()
					first = j
				} else {
					first = h.join("first", c.class, fillWork)
					c.start(h, first)
				}
				j := h.join("lone", 1, fillWork)
				if !h.running(j) {
					h.t.Fatalf("a lone job, the job before it %s: state %d, want it running at once", c.name, j.state)
				}
				if first.state == finishing {
					h.s.Finish(first, nil)
				}
			})
		})
	}
}
