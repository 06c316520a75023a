package sched

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"
)

// keyOf makes a distinct key for a test password.
func keyOf(s string) Key { return Key(sha256.Sum256([]byte(s))) }

// newTest returns a Scheduler with slots slots, a queue of maxQueue and
// perName places per name, holding callers up to an hour.
func newTest(slots, maxQueue, perName int) *Scheduler {
	return New(Config{Slots: slots, MaxQueue: maxQueue, PerName: perName, MaxWait: time.Hour})
}

// granted reports whether j holds a slot.
func granted(j *Job) bool { return j.state == Running }

// join joins the job for password under name, of 1 MiB of work.
func join(s *Scheduler, name, password string, failing bool) (*Job, *Overload) {
	j, _, err := s.Join(context.Background(), Request{Key: keyOf(password), Name: name, Work: 1 << 20, Failing: failing})
	var o *Overload
	if err != nil && !errors.As(err, &o) {
		panic(err)
	}
	return j, o
}

func mustEnqueue(t *testing.T, s *Scheduler, name string) *Job {
	t.Helper()
	j, o := join(s, name, name+fmt.Sprint(s.asks.seq), false)
	if o != nil {
		t.Fatalf("enqueue %s: %v", name, o)
	}
	return j
}

// eta is the estimate a waiting caller of j is given.
func (s *Scheduler) eta(j *Job) time.Duration {
	return s.expectLocked(j, time.Now())
}

// done ends j, as its runner does.
func done(s *Scheduler, j *Job) { s.Finish(j, nil) }

func (s *Scheduler) watch(j *Job, delta int) { s.watchLocked(j, delta) }

// TestServesNamesInTurn: a name with queued work gets one turn per
// round, so other names are not starved behind it.
func TestServesNamesInTurn(t *testing.T) {
	s := newTest(1, 100, 2)
	run := mustEnqueue(t, s, "x")
	if !granted(run) {
		t.Fatal("first ticket not granted with a free slot")
	}
	a1 := mustEnqueue(t, s, "a")
	a2 := mustEnqueue(t, s, "a")
	// The name has no room: a third password waits in its line, holding
	// no place, until a1's place frees.
	a3, oe := join(s, "a", "a3", false)
	if oe != nil || a3.state != Parked {
		t.Fatalf("third ticket for one name: %v, state %v, want it parked", oe, a3.state)
	}
	b := mustEnqueue(t, s, "b")
	c := mustEnqueue(t, s, "c")
	if s.eta(b) >= s.eta(a2) || s.eta(c) >= s.eta(a2) || s.eta(a1) >= s.eta(b) {
		t.Fatalf("estimates do not follow the service order a1 %v, b %v, c %v, a2 %v", s.eta(a1), s.eta(b), s.eta(c), s.eta(a2))
	}
	want := []*Job{a1, b, c, a2}
	names := map[*Job]string{a1: "a1", a2: "a2", b: "b", c: "c"}
	prev := run
	for i, w := range want {
		done(s, prev)
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
	if a3.state != Queued {
		t.Fatalf("parked ticket %v once its name had room, want queued", a3.state)
	}
	done(s, prev)
	if !granted(a3) {
		t.Fatal("the ticket that waited for room was not granted last")
	}
	done(s, a3)
	if r, q := s.Load(); r != 0 || q != 0 {
		t.Fatalf("load %d running, %d queued after all released", r, q)
	}
}

// TestFloodDoesNotStarve: a name whose queue is refilled as soon
// as it has room still gets only its turns.
func TestFloodDoesNotStarve(t *testing.T) {
	s := newTest(1, 100, 2)
	held := mustEnqueue(t, s, "x")
	flood := []*Job{mustEnqueue(t, s, "victim"), mustEnqueue(t, s, "victim")}
	honest := mustEnqueue(t, s, "honest")
	for served := 0; !granted(honest); served++ {
		if served > 1 {
			t.Fatalf("honest name waited %d flood computations", served)
		}
		done(s, held)
		for i, f := range flood {
			if granted(f) {
				held = f
				flood[i] = mustEnqueue(t, s, "victim") // refilled at once
			}
		}
	}
}

func TestCancelWhileQueued(t *testing.T) {
	s := newTest(1, 100, 2)
	run := mustEnqueue(t, s, "x")
	q := mustEnqueue(t, s, "a")
	next := mustEnqueue(t, s, "b")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Acquire(ctx, q); err == nil || q.state != Done {
		t.Fatal("wait with a cancelled context succeeded")
	}
	if _, queued := s.Load(); queued != 1 {
		t.Fatalf("%d queued after cancel, want 1", queued)
	}
	done(s, run)
	if !granted(next) || granted(q) {
		t.Fatal("slot not passed to the next live ticket")
	}
	done(s, next)
	done(s, next) // twice is harmless
	if r, qd := s.Load(); r != 0 || qd != 0 {
		t.Fatalf("load %d %d", r, qd)
	}
}

func TestQueueFull(t *testing.T) {
	s := newTest(1, 2, 2)
	mustEnqueue(t, s, "x")
	mustEnqueue(t, s, "a")
	mustEnqueue(t, s, "b")
	_, oe := join(s, "c", "c", false)
	if oe == nil || oe.NameFull || oe.Queued || oe.After <= 0 {
		t.Fatalf("full queue: %v", oe)
	}
}

// TestEstimateLearns: the estimate follows measured durations.
func TestEstimateLearns(t *testing.T) {
	s := newTest(1, 10, 2)
	before := s.est.nsPerByte
	for range 20 {
		tk := mustEnqueue(t, s, "x")
		s.Release(tk, 1<<20, 0) // 1 ns per byte of its 1 MiB of work
		done(s, tk)
	}
	if got := s.est.nsPerByte; got >= before || got < 0.99 || got > 1.01 {
		t.Fatalf("nsPerByte %v (from %v), want it to approach 1", got, before)
	}
}

// TestAskedAgainGoesFirst: a password asked for again goes before a
// name's passwords asked once, but not before one asked again that
// arrived earlier: asking more often gains nothing.
func TestAskedAgainGoesFirst(t *testing.T) {
	s := newTest(1, 100, 4)
	run := mustEnqueue(t, s, "x")
	g1, _ := join(s, "a", "guess-1", false)
	right, _ := join(s, "a", "right", false)
	g2, _ := join(s, "a", "guess-2", false)
	join(s, "a", "right", false) // the agent's retry
	for range 10 {
		join(s, "a", "guess-2", false) // a guesser asking again and again
	}
	if s.eta(right) >= s.eta(g2) || s.eta(g2) >= s.eta(g1) {
		t.Fatalf("estimates right %v, guess-2 %v, guess-1 %v do not follow the service order", s.eta(right), s.eta(g2), s.eta(g1))
	}
	prev := run
	for i, w := range []*Job{right, g2, g1} {
		done(s, prev)
		if !granted(w) {
			t.Fatalf("step %d: %s not granted", i, []string{"right", "guess-2", "guess-1"}[i])
		}
		prev = w
	}
	done(s, prev)
	if r, q := s.Load(); r != 0 || q != 0 {
		t.Fatalf("load %d %d", r, q)
	}
}

// TestAskMovesQueuedTicket: asking again for a queued password
// moves it ahead of its name's earlier ones.
func TestAskMovesQueuedTicket(t *testing.T) {
	s := newTest(1, 100, 2)
	run := mustEnqueue(t, s, "x")
	g, _ := join(s, "a", "guess", false)
	h, _ := join(s, "a", "right", false)
	join(s, "a", "right", false) // asked again
	done(s, run)
	if !granted(h) || granted(g) {
		t.Fatal("the password asked for again was not served first")
	}
}

// TestSuspectsWaitForSpareCapacity: a first ask for a failing name
// is served after every other queued computation, and stops being a
// suspect when asked for again.
func TestSuspectsWaitForSpareCapacity(t *testing.T) {
	s := newTest(1, 100, 2)
	run := mustEnqueue(t, s, "x")
	guess, _ := join(s, "attacked", "guess", true)
	b := mustEnqueue(t, s, "b")
	c := mustEnqueue(t, s, "c")
	if !guess.suspect() || s.eta(guess) <= s.eta(c) {
		t.Fatalf("suspect expected before later names: %v <= %v", s.eta(guess), s.eta(c))
	}
	done(s, run)
	if !granted(b) || granted(guess) {
		t.Fatal("suspect served before a later name")
	}
	done(s, b)
	if !granted(c) || granted(guess) {
		t.Fatal("suspect served before a later name")
	}
	done(s, c)
	if !granted(guess) {
		t.Fatal("suspect not served with nothing else queued")
	}
	done(s, guess)

	// Asked for again: an ordinary job.
	run = mustEnqueue(t, s, "x")
	own, _ := join(s, "attacked", "own", true)
	d := mustEnqueue(t, s, "d")
	join(s, "attacked", "own", true) // asked again
	if own.suspect() {
		t.Fatal("a password asked for twice is still a suspect")
	}
	done(s, run)
	if !granted(own) || granted(d) {
		t.Fatal("the password asked for again lost its turn")
	}
	done(s, own)
	done(s, d)
}

// TestCheapen: once a name is verified its queued computations no
// longer count in the estimates of those behind them.
func TestCheapen(t *testing.T) {
	s := newTest(1, 100, 2)
	mustEnqueue(t, s, "x")
	mustEnqueue(t, s, "verified")
	mustEnqueue(t, s, "verified")
	later := mustEnqueue(t, s, "later")
	before := s.eta(later)
	s.Cheapen("verified")
	if after := s.eta(later); after >= before || s.queue.work != later.work {
		t.Fatalf("eta %v -> %v, queued work %d", before, after, s.queue.work)
	}
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
			e.observe(work, time.Duration(slow*float64(work)), time.Duration(work), now, busy)
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
	s := newTest(1, 100, 2)
	run := mustEnqueue(t, s, "x")
	early := mustEnqueue(t, s, "early") // its caller was told to come back
	late := mustEnqueue(t, s, "late")
	if s.eta(early) >= s.eta(late) {
		t.Fatalf("nobody waits: estimates %v, %v do not follow arrival order", s.eta(early), s.eta(late))
	}
	s.watch(late, 1)
	if s.eta(late) >= s.eta(early) {
		t.Fatalf("estimate of the waited computation %v not before the other's %v", s.eta(late), s.eta(early))
	}
	done(s, run)
	if !granted(late) || granted(early) {
		t.Fatalf("granted waited=%v, not waited=%v; want only the waited one", granted(late), granted(early))
	}
	s.watch(late, -1)
	done(s, late)
	if !granted(early) {
		t.Fatal("computation nobody waits for not granted with a free slot")
	}
	done(s, early)
}

// TestWaitedInOrderOfWaiting: callers waiting for queued
// computations are served in the order they came to wait, not in the
// order the computations were queued: one that came back early is not
// overtaken by later ones its estimate did not count.
func TestWaitedInOrderOfWaiting(t *testing.T) {
	s := newTest(1, 100, 2)
	run := mustEnqueue(t, s, "x")
	first := mustEnqueue(t, s, "first") // queued first, waited for last
	second := mustEnqueue(t, s, "second")
	s.watch(second, 1)
	before := s.eta(second)
	s.watch(first, 1)
	if got := s.eta(second); got > before {
		t.Fatalf("estimate grew from %v to %v when a later caller came to wait", before, got)
	}
	done(s, run)
	if !granted(second) || granted(first) {
		t.Fatalf("granted first-waited=%v, later-waited=%v; want the first-waited only", granted(second), granted(first))
	}
	done(s, second)
	if !granted(first) {
		t.Fatal("later-waited computation not granted next")
	}
	done(s, first)
}
