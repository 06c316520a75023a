package sched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// randomQueue fills h's queue, behind one running job, with random work:
// fresh and repeated passwords for a few names (with oneEach, one fresh
// password for each of 30 names), some failing (suspects), some waited
// for, some sent away, of classes classes; it returns the running job.
func randomQueue(h *harness, rng *rand.Rand, classes int, oneEach bool) *Job {
	first, _, _ := h.s.Join(context.Background(), Request{Key: keyOf("blocker"), Name: "blocker", Work: 1 << 20})
	h.settle()
	for i := range 30 {
		name := fmt.Sprint("n", rng.IntN(6))
		pw := fmt.Sprint("pw", rng.IntN(40))
		if oneEach {
			name = fmt.Sprint("n", i)
		}
		if oneEach || rng.IntN(3) == 0 && i > 0 {
			pw = fmt.Sprint("pw", i) // fresh
		}
		j, _, err := h.s.Join(context.Background(), Request{Key: keyOf(name + pw), Name: name, Work: 1 << 20,
			Class: Class{N: 1 + rng.IntN(classes)}, Doubted: rng.IntN(4) == 0})
		h.settle()
		if err != nil || j.state == done {
			continue
		}
		switch rng.IntN(4) {
		case 0:
			h.watch(j, 1)
		case 1:
			h.s.mu.Lock()
			h.s.shedLocked(j, time.Now().Add(time.Duration(rng.IntN(1000))*time.Millisecond))
			h.s.unlock()
		}
	}
	return first
}

// TestBatchFollowsPolicyOrder: a batch takes the jobs the policy would
// grant one after the other, in that order, stopping at the first of
// another class or of a name already in the batch: the same random queue
// behind a scheduler with one lane grants, job by job, exactly the
// batch's jobs first.
func TestBatchFollowsPolicyOrder(t *testing.T) {
	for seed := range uint64(100) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var order [][]string
				for _, lanes := range []int{1, 4} {
					h := newHarness(t, Config{Slots: 1, Lanes: lanes, MaxQueue: 1000, PerName: 3, MaxWait: time.Hour})
					first := randomQueue(h, rand.New(rand.NewPCG(seed, 7)), 2, false)
					var got []string
					prev := first
					for len(got) < 8 {
						h.done(prev)
						h.mu.Lock()
						last := h.ran[len(h.ran)-1]
						h.mu.Unlock()
						if last[0] == prev {
							break // nothing left
						}
						var names []string
						for _, j := range last {
							names = append(names, j.name+"/"+fmt.Sprint(j.class.N))
						}
						got = append(got, fmt.Sprint(names))
						if lanes > 1 {
							got = names
							break
						}
						prev = last[0]
					}
					if lanes == 1 {
						got = flatten(got)
					}
					order = append(order, got)
					h.stop()
				}
				one, batch := order[0], order[1]
				if len(batch) == 0 || len(one) < len(batch) || !slices.Equal(one[:len(batch)], batch) {
					t.Fatalf("batch %v, want the first %d of the one-lane order %v", batch, len(batch), one)
				}
				seen := map[string]bool{}
				for _, b := range batch {
					name, class := split2(b)
					if seen[name] || class != batchClass(batch) {
						t.Fatalf("batch %v: a name twice or two classes", batch)
					}
					seen[name] = true
				}
				if len(batch) < 4 && len(one) > len(batch) {
					// Stopped early: the next in turn is of another class
					// or a name already in.
					name, class := split2(one[len(batch)])
					if !seen[name] && class == batchClass(batch) {
						t.Fatalf("batch %v stopped before %s, of its class and a new name", batch, one[len(batch)])
					}
				}
			})
		})
	}
}

func flatten(rows []string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[1:len(r)-1])
	}
	return out
}

func split2(s string) (name, class string) {
	i := len(s) - 1
	for s[i] != '/' {
		i--
	}
	return s[:i], s[i+1:]
}

func batchClass(batch []string) string {
	_, c := split2(batch[0])
	return c
}

// TestBatchOneClass: jobs of different classes never share a batch,
// whatever their order; jobs of one class fill batches of Lanes.
func TestBatchOneClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Slots: 1, Lanes: 4, MaxQueue: 100, PerName: 2, MaxWait: time.Hour})
		defer h.stop()
		blocker := h.enqueue("blocker")
		for i := range 12 {
			class := Class{N: 1 << 10, R: 8, P: 1}
			if i%5 == 4 {
				class.N = 1 << 12
			}
			h.s.Join(context.Background(), Request{Key: keyOf(fmt.Sprint(i)), Name: fmt.Sprint("n", i), Work: 1 << 20, Class: class})
		}
		h.settle()
		prev := blocker
		var sizes []int
		for {
			h.done(prev)
			h.mu.Lock()
			last := h.ran[len(h.ran)-1]
			h.mu.Unlock()
			if last[0] == prev {
				break
			}
			for _, j := range last {
				if j.class != last[0].class {
					t.Fatalf("a batch of classes %v and %v", last[0].class, j.class)
				}
			}
			sizes = append(sizes, len(last))
			prev = last[0]
		}
		// 0-3 | 4 | 5-8 | 9 | 10-11: every fifth job is of another class.
		if want := []int{4, 1, 4, 1, 2}; !slices.Equal(sizes, want) {
			t.Fatalf("batch sizes %v, want %v", sizes, want)
		}
	})
}

// TestBatchCut: Close while a batch runs ends the queued jobs with
// ErrClosed at once, ends the batch's jobs' contexts with ErrClosed, and
// returns once the batch's Run has; the results Run gave stand. A work
// timeout during a batch ends its jobs' contexts but leaves them to Run.
func TestBatchCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Slots: 1, Lanes: 2, MaxQueue: 100, PerName: 2, MaxWait: time.Hour, WorkTimeout: time.Minute})
		a := h.enqueue("a")
		b := h.enqueue("b")
		c := h.enqueue("c")
		if !granted(a) || granted(b) {
			t.Fatal("a alone should hold the slot")
		}
		h.done(a)
		if !granted(b) || !granted(c) {
			t.Fatalf("b, c: %v, %v; want one batch", b.state, c.state)
		}
		q := h.enqueue("q")
		time.Sleep(time.Minute)
		h.settle()
		if !errors.Is(context.Cause(b.Context()), context.DeadlineExceeded) || b.state != running {
			t.Fatalf("after the work timeout: %v, context %v; want running, its context ended", b.state, context.Cause(b.Context()))
		}
		if q.state != done || !errors.Is(q.err, context.DeadlineExceeded) {
			t.Fatalf("queued past the timeout: %v, %v", q.state, q.err)
		}
		q2 := h.enqueue("q2")
		closed := make(chan struct{})
		go func() { h.s.Close(); close(closed) }()
		h.settle()
		select {
		case <-q2.done:
			if !errors.Is(q2.err, ErrClosed) {
				t.Fatalf("queued at Close: %v", q2.err)
			}
		default:
			t.Fatal("a job queued at Close did not end at once")
		}
		select {
		case <-closed:
			t.Fatal("Close returned before the running batch")
		default:
		}
		if !errors.Is(context.Cause(c.Context()), context.DeadlineExceeded) {
			t.Fatalf("c's context: %v", context.Cause(c.Context()))
		}
		h.s.Finish(b, nil)
		h.end(c, 0, 0, errors.New("c's result")) // ends the batch
		<-closed
		if b.err != nil || c.err == nil || c.err.Error() != "c's result" {
			t.Fatalf("results after Close: %v, %v", b.err, c.err)
		}
		if jobs(h.s) != 0 || len(h.s.names) != 0 {
			t.Fatalf("%d jobs, %d names left", jobs(h.s), len(h.s.names))
		}
	})
}

// TestNoGoroutinePerJob: queued jobs hold no goroutine: only a running
// batch (its slot) and a preparation have one.
func TestNoGoroutinePerJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Slots: 1, MaxQueue: 5000, PerName: 2, MaxWait: time.Hour, WorkTimeout: time.Hour})
		defer h.stop()
		h.enqueue("running")
		before := runtime.NumGoroutine()
		for i := range 2000 {
			h.s.Join(context.Background(), Request{Key: keyOf(fmt.Sprint(i)), Name: fmt.Sprint("n", i), Work: 1 << 20})
		}
		h.settle()
		if _, q := h.s.Load(); q != 2000 {
			t.Fatalf("%d queued, want 2000", q)
		}
		if after := runtime.NumGoroutine(); after > before+2 {
			t.Fatalf("%d goroutines for 2000 queued jobs (from %d)", after, before)
		}
	})
}
