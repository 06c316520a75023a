package sched

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestServesNamesInTurn: a name with queued work gets one turn per
// round, so other names are not starved behind it.
func TestServesNamesInTurn(t *testing.T) {
	run(t, 1, 100, 2, func(h *harness) {
		r := h.enqueue("x")
		if !granted(r) {
			t.Fatal("first job not granted with a free slot")
		}
		a1 := h.enqueue("a")
		a2 := h.enqueue("a")
		// The name has no room: a third password waits in its line, holding
		// no place, until a1's place frees.
		a3, oe := h.join("a", "a3", false)
		if oe != nil || a3.state != parked {
			t.Fatalf("third job for one name: %v, state %v, want it parked", oe, a3.state)
		}
		b := h.enqueue("b")
		c := h.enqueue("c")
		if h.eta(b) >= h.eta(a2) || h.eta(c) >= h.eta(a2) || h.eta(a1) >= h.eta(b) {
			t.Fatalf("estimates do not follow the service order a1 %v, b %v, c %v, a2 %v", h.eta(a1), h.eta(b), h.eta(c), h.eta(a2))
		}
		want := []*Job{a1, b, c, a2}
		names := map[*Job]string{a1: "a1", a2: "a2", b: "b", c: "c"}
		prev := r
		for i, w := range want {
			h.done(prev)
			if !granted(w) {
				t.Fatalf("step %d: %s not granted", i, names[w])
			}
			for _, o := range want[i+1:] {
				if granted(o) {
					t.Fatalf("step %d: %s granted before its turn", i, names[o])
				}
			}
			prev = w
		}
		if a3.state != queued {
			t.Fatalf("parked job %v once its name had room, want queued", a3.state)
		}
		h.done(prev)
		if !granted(a3) {
			t.Fatal("the job that waited for room was not granted last")
		}
		h.done(a3)
		if r, q := h.s.Load(); r != 0 || q != 0 || jobs(h.s) != 0 || len(h.s.names) != 0 {
			t.Fatalf("load %d running, %d queued, %d jobs, %d names after all ended", r, q, jobs(h.s), len(h.s.names))
		}
	})
}

// TestFloodDoesNotStarve: a name whose queue is refilled as soon
// as it has room still gets only its turns.
func TestFloodDoesNotStarve(t *testing.T) {
	run(t, 1, 100, 2, func(h *harness) {
		held := h.enqueue("x")
		flood := []*Job{h.enqueue("victim"), h.enqueue("victim")}
		honest := h.enqueue("honest")
		for served := 0; !granted(honest); served++ {
			if served > 1 {
				t.Fatalf("honest name waited %d flood computations", served)
			}
			h.done(held)
			for i, f := range flood {
				if granted(f) {
					held = f
					flood[i] = h.enqueue("victim") // refilled at once
				}
			}
		}
	})
}

// TestCancelWhileQueued: a queued job that ends (its work timeout, say)
// gives its place back and the slot goes to the next.
func TestCancelWhileQueued(t *testing.T) {
	run(t, 1, 100, 2, func(h *harness) {
		r := h.enqueue("x")
		q := h.enqueue("a")
		next := h.enqueue("b")
		q.cancel(context.DeadlineExceeded) // as its work timeout would
		h.settle()
		if q.state != done || !errors.Is(q.err, context.DeadlineExceeded) || !errors.Is(context.Cause(q.Context()), context.DeadlineExceeded) {
			t.Fatalf("expired job: %v, %v; context %v", q.state, q.err, context.Cause(q.Context()))
		}
		if _, queued := h.s.Load(); queued != 1 {
			t.Fatalf("%d queued after the expiry, want 1", queued)
		}
		h.done(r)
		if !granted(next) || granted(q) {
			t.Fatal("slot not passed to the next live job")
		}
		h.done(next)
		h.done(next) // twice is harmless
		if r, qd := h.s.Load(); r != 0 || qd != 0 {
			t.Fatalf("load %d %d", r, qd)
		}
	})
}

// TestWorkTimeout: a job still queued WorkTimeout after it was created
// ends with context.DeadlineExceeded; one running then is left to its
// runner, whose context ends.
func TestWorkTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Slots: 1, MaxQueue: 10, PerName: 2, MaxWait: time.Hour, WorkTimeout: time.Minute})
		defer h.stop()
		r := h.enqueue("x")
		q := h.enqueue("a")
		time.Sleep(time.Minute)
		h.settle()
		if q.state != done || !errors.Is(q.err, context.DeadlineExceeded) {
			t.Fatalf("queued past the timeout: %v, %v", q.state, q.err)
		}
		if r.state != running || !errors.Is(context.Cause(r.Context()), context.DeadlineExceeded) {
			t.Fatalf("running past the timeout: %v, context %v", r.state, context.Cause(r.Context()))
		}
		h.done(r)
		if jobs(h.s) != 0 {
			t.Fatalf("%d jobs left", jobs(h.s))
		}
	})
}

func TestQueueFull(t *testing.T) {
	run(t, 1, 2, 2, func(h *harness) {
		h.enqueue("x")
		h.enqueue("a")
		h.enqueue("b")
		_, oe := h.join("c", "c", false)
		if oe == nil || oe.Queued || oe.After <= 0 {
			t.Fatalf("full queue: %v", oe)
		}
	})
}

// TestEstimateLearns: the estimates learn from measured batches, each
// job of a batch counting as the batch's CPU time per byte, but not from
// the first Slots batches of each kind (class and jobs computed).
func TestEstimateLearns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Slots: 1, Lanes: 4, MaxQueue: 100, PerName: 2, MaxWait: time.Hour})
		defer h.stop()
		before := h.s.est.nsPerByte
		blocker := h.enqueue("blocker")
		var js []*Job
		for i := range 12 {
			js = append(js, h.enqueue(string(rune('a'+i))))
		}
		h.end(blocker, 1<<20, 1<<20, nil) // the first batch of one job
		for _, j := range js[:4] {
			if !granted(j) {
				t.Fatalf("%s not in the first batch of four", j.name)
			}
		}
		h.end(js[0], 4<<20, 1<<20, nil) // the first batch of four jobs
		if h.s.est.samples != 0 || h.s.est.nsPerByte != before {
			t.Fatalf("%d samples, nsPerByte %v: learnt from a first batch of its kind", h.s.est.samples, h.s.est.nsPerByte)
		}
		h.end(js[4], 4<<20, 2<<20, nil) // 4 MiB in 2 ms of CPU
		h.end(js[8], 4<<20, 2<<20, nil)
		if got := h.s.est.nsPerByte; got < 0.49 || got > 0.51 {
			t.Fatalf("nsPerByte %v (from %v), want 0.5", got, before)
		}
		if h.s.est.samples != 8 {
			t.Fatalf("%d samples, want 8: one per job", h.s.est.samples)
		}
	})
}

// TestAskedAgainGoesFirst: a password asked for again goes before a
// name's passwords asked once, but not before one asked again that
// arrived earlier: asking more often gains nothing.
func TestAskedAgainGoesFirst(t *testing.T) {
	run(t, 1, 100, 4, func(h *harness) {
		r := h.enqueue("x")
		g1, _ := h.join("a", "guess-1", false)
		right, _ := h.join("a", "right", false)
		g2, _ := h.join("a", "guess-2", false)
		h.join("a", "right", false) // the agent's retry
		for range 10 {
			h.join("a", "guess-2", false) // a guesser asking again and again
		}
		if h.eta(right) >= h.eta(g2) || h.eta(g2) >= h.eta(g1) {
			t.Fatalf("estimates right %v, guess-2 %v, guess-1 %v do not follow the service order", h.eta(right), h.eta(g2), h.eta(g1))
		}
		prev := r
		for i, w := range []*Job{right, g2, g1} {
			h.done(prev)
			if !granted(w) {
				t.Fatalf("step %d: %s not granted", i, []string{"right", "guess-2", "guess-1"}[i])
			}
			prev = w
		}
		h.done(prev)
		if r, q := h.s.Load(); r != 0 || q != 0 {
			t.Fatalf("load %d %d", r, q)
		}
	})
}

// TestAskMovesQueuedJob: asking again for a queued password moves it
// ahead of its name's earlier ones.
func TestAskMovesQueuedJob(t *testing.T) {
	run(t, 1, 100, 2, func(h *harness) {
		r := h.enqueue("x")
		g, _ := h.join("a", "guess", false)
		right, _ := h.join("a", "right", false)
		h.join("a", "right", false) // asked again
		h.done(r)
		if !granted(right) || granted(g) {
			t.Fatal("the password asked for again was not served first")
		}
	})
}

// TestSuspectsWaitForSpareCapacity: a first ask for a failing name
// is served after every other queued computation, and stops being a
// suspect when asked for again.
func TestSuspectsWaitForSpareCapacity(t *testing.T) {
	run(t, 1, 100, 2, func(h *harness) {
		r := h.enqueue("x")
		guess, _ := h.join("attacked", "guess", true)
		b := h.enqueue("b")
		c := h.enqueue("c")
		if !guess.suspect() || h.eta(guess) <= h.eta(c) {
			t.Fatalf("suspect expected before later names: %v <= %v", h.eta(guess), h.eta(c))
		}
		h.done(r)
		if !granted(b) || granted(guess) {
			t.Fatal("suspect served before a later name")
		}
		h.done(b)
		if !granted(c) || granted(guess) {
			t.Fatal("suspect served before a later name")
		}
		h.done(c)
		if !granted(guess) {
			t.Fatal("suspect not served with nothing else queued")
		}
		h.done(guess)

		// Asked for again: an ordinary job.
		r = h.enqueue("x")
		own, _ := h.join("attacked", "own", true)
		d := h.enqueue("d")
		h.join("attacked", "own", true) // asked again
		if own.suspect() {
			t.Fatal("a password asked for twice is still a suspect")
		}
		h.done(r)
		if !granted(own) || granted(d) {
			t.Fatal("the password asked for again lost its turn")
		}
		h.done(own)
		h.done(d)
	})
}

// TestCheapen: once a name is verified its queued computations no
// longer count in the estimates of those behind them.
func TestCheapen(t *testing.T) {
	run(t, 1, 100, 2, func(h *harness) {
		h.enqueue("x")
		h.enqueue("verified")
		h.enqueue("verified")
		later := h.enqueue("later")
		before := h.eta(later)
		h.s.Cheapen("verified")
		if after := h.eta(later); after >= before || h.s.queue.work != later.work {
			t.Fatalf("eta %v -> %v, queued work %d", before, after, h.s.queue.work)
		}
	})
}

// TestMargin: the margin is what recent promised waits were off by, at
// least 1 and at most maxMargin, and a guess before there are enough.
func TestMargin(t *testing.T) {
	e := newEstimator(1)
	if got := e.margin(); got != defaultMargin {
		t.Fatalf("no promises yet: margin %v, want %v", got, defaultMargin)
	}
	for i := range window {
		e.promised(time.Second, time.Second+time.Duration(i)*time.Second/window)
	}
	if got := e.margin(); got < 1.89 || got > 1.91 {
		t.Fatalf("waits up to 2x promised: margin %v, want 1.9 (the 90th percentile)", got)
	}
	for range window {
		e.promised(time.Second, 900*time.Millisecond)
	}
	if got := e.margin(); got != 1 {
		t.Fatalf("waits shorter than promised: margin %v, want 1", got)
	}
	for range window {
		e.promised(time.Second, 1200*time.Millisecond)
	}
	if got := e.margin(); got < 1.19 || got > 1.21 {
		t.Fatalf("waits 1.2x promised: margin %v, want 1.2", got)
	}
	for range window {
		e.promised(time.Second, 10*time.Second)
	}
	if got := e.margin(); got != maxMargin {
		t.Fatalf("waits 10x promised: margin %v, want the most, %v", got, maxMargin)
	}
}

// TestWaitCountsSlowdown: computations ending with every slot busy more
// slowly than their CPU time allows lengthen the expected wait by their
// slowdown (at most maxMargin) for as long again as it has lasted, so a
// burst of a fraction of a second adds about that fraction while one of
// seconds counts over the whole wait; a slot left idle resets it.
func TestWaitCountsSlowdown(t *testing.T) {
	e := newEstimator(2)
	now := time.Unix(0, 0)
	// ends makes n computations of work bytes, 1 ns per byte of CPU each,
	// end at a throughput slow times below what 2 slots could do.
	ends := func(n int, work int64, slow float64, busy bool) {
		for range n {
			now = now.Add(time.Duration(slow * float64(work) / 2))
			e.observe(work, 1, time.Duration(slow*float64(work)), time.Duration(work), now, busy)
		}
	}
	within := func(what string, best time.Duration, lo, hi time.Duration) {
		t.Helper()
		if got := e.wait(best, now); got < lo || got > hi {
			t.Fatalf("%s: wait at the best %v expected as %v, want %v to %v", what, best, got, lo, hi)
		}
	}
	margin := func(d time.Duration) time.Duration { return time.Duration(float64(d) * defaultMargin) }

	// A burst: 32 computations of 1 MiB 10x slower, over 0.16 s.
	ends(throughputWindow, 1<<20, 10, true)
	lasted := now.Sub(e.busySince)
	within("short burst, short wait", 20*time.Millisecond, 80*time.Millisecond, 80*time.Millisecond)
	burst := lasted + margin(10*time.Second-lasted/maxMargin)
	within("short burst, long wait", 10*time.Second, burst-time.Millisecond, burst+time.Millisecond)

	ends(1, 1<<20, 1, false)
	within("after a slot was idle", 10*time.Second, margin(10*time.Second), margin(10*time.Second))

	// Lasting: 32 computations of 1 GiB 1.5x slower, over 26 s.
	ends(throughputWindow, 1<<30, 1.5, true)
	within("lasting slowdown", 10*time.Second, 15*time.Second-time.Millisecond, 15*time.Second+time.Millisecond)

	ends(1, 1<<20, 1, false)
	ends(throughputWindow, 1<<30, 1, true)
	within("no slowdown", 10*time.Second, margin(10*time.Second), margin(10*time.Second))
}

// TestWaitedFirst: a computation a caller waits for goes before
// those whose callers were told to come back, and the estimates say so;
// the others still run when nobody waits.
func TestWaitedFirst(t *testing.T) {
	run(t, 1, 100, 2, func(h *harness) {
		r := h.enqueue("x")
		early := h.enqueue("early") // its caller was told to come back
		late := h.enqueue("late")
		if h.eta(early) >= h.eta(late) {
			t.Fatalf("nobody waits: estimates %v, %v do not follow arrival order", h.eta(early), h.eta(late))
		}
		h.watch(late, 1)
		if h.eta(late) >= h.eta(early) {
			t.Fatalf("estimate of the waited computation %v not before the other's %v", h.eta(late), h.eta(early))
		}
		h.done(r)
		if !granted(late) || granted(early) {
			t.Fatalf("granted waited=%v, not waited=%v; want only the waited one", granted(late), granted(early))
		}
		h.watch(late, -1)
		h.done(late)
		if !granted(early) {
			t.Fatal("computation nobody waits for not granted with a free slot")
		}
		h.done(early)
	})
}

// TestWaitedInOrderOfWaiting: callers waiting for queued
// computations are served in the order they came to wait, not in the
// order the computations were queued: one that came back early is not
// overtaken by later ones its estimate did not count.
func TestWaitedInOrderOfWaiting(t *testing.T) {
	run(t, 1, 100, 2, func(h *harness) {
		r := h.enqueue("x")
		first := h.enqueue("first") // queued first, waited for last
		second := h.enqueue("second")
		h.watch(second, 1)
		before := h.eta(second)
		h.watch(first, 1)
		if got := h.eta(second); got > before {
			t.Fatalf("estimate grew from %v to %v when a later caller came to wait", before, got)
		}
		h.done(r)
		if !granted(second) || granted(first) {
			t.Fatalf("granted first-waited=%v, later-waited=%v; want the first-waited only", granted(second), granted(first))
		}
		h.done(second)
		if !granted(first) {
			t.Fatal("later-waited computation not granted next")
		}
		h.done(first)
	})
}

// TestReshape: a Scheduler reshaped takes its next batches by the new
// slots and lanes; the batches running keep theirs.
func TestReshape(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Slots: 1, Lanes: 1, MaxQueue: 100, PerName: 1, MaxWait: time.Hour})
		defer h.stop()
		first := h.enqueue("first")
		for i := range 6 {
			h.enqueue(fmt.Sprint("n", i))
		}
		h.s.Reshape(2, 3, 3<<20)
		h.settle()
		h.mu.Lock()
		var sizes []int
		for _, b := range h.ran {
			sizes = append(sizes, len(b))
		}
		h.mu.Unlock()
		if !slices.Equal(sizes, []int{1, 3}) || !granted(first) {
			t.Fatalf("reshaped to 2 slots of 3 lanes with one batch of 1 running: batches of %v", sizes)
		}
		h.done(first)
		h.mu.Lock()
		defer h.mu.Unlock()
		if n := len(h.ran); n != 3 || len(h.ran[2]) != 3 {
			t.Fatalf("after the first batch: %d batches, the last of %d jobs; want a third of 3", n, len(h.ran[n-1]))
		}
	})
}
