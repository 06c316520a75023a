package verify

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/nodepass/nodepass/cache"
)

// keyOf makes a distinct cache key for a test password.
func keyOf(s string) cache.Key { return cache.Key(sha256.Sum256([]byte(s))) }

// granted reports whether t holds a slot.
func granted(t *ticket) bool {
	select {
	case <-t.ready:
		return true
	default:
		return false
	}
}

func mustEnqueue(t *testing.T, a *admission, name string) *ticket {
	t.Helper()
	tk, oe, _ := a.enqueue(name, keyOf(name+fmt.Sprint(len(a.names), a.seq)), 1<<20, false)
	if oe != nil {
		t.Fatalf("enqueue %s: %v", name, oe)
	}
	return tk
}

// TestAdmissionServesNamesInTurn: a name with queued work gets one turn per
// round, so other names are not starved behind it.
func TestAdmissionServesNamesInTurn(t *testing.T) {
	a := newAdmission(1, 100, 2)
	run := mustEnqueue(t, a, "x")
	if !granted(run) {
		t.Fatal("first ticket not granted with a free slot")
	}
	a1 := mustEnqueue(t, a, "a")
	a2 := mustEnqueue(t, a, "a")
	if _, oe, perName := a.enqueue("a", keyOf("a3"), 1<<20, false); oe == nil || !perName || oe.Queued || oe.RetryAfter() <= 0 {
		t.Fatalf("third ticket for one name: %v, want a refusal with RetryAfter", oe)
	}
	b := mustEnqueue(t, a, "b")
	c := mustEnqueue(t, a, "c")
	if a.eta(b) >= a.eta(a2) || a.eta(c) >= a.eta(a2) || a.eta(a1) >= a.eta(b) {
		t.Fatalf("estimates do not follow the service order a1 %v, b %v, c %v, a2 %v", a.eta(a1), a.eta(b), a.eta(c), a.eta(a2))
	}
	want := []*ticket{a1, b, c, a2}
	names := map[*ticket]string{a1: "a1", a2: "a2", b: "b", c: "c"}
	prev := run
	for i, w := range want {
		a.release(prev, 0)
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
	a.release(prev, 0)
	if r, q := a.load(); r != 0 || q != 0 {
		t.Fatalf("load %d running, %d queued after all released", r, q)
	}
}

// TestAdmissionFloodDoesNotStarve: a name whose queue is refilled as soon
// as it has room still gets only its turns.
func TestAdmissionFloodDoesNotStarve(t *testing.T) {
	a := newAdmission(1, 100, 2)
	held := mustEnqueue(t, a, "x")
	flood := []*ticket{mustEnqueue(t, a, "victim"), mustEnqueue(t, a, "victim")}
	honest := mustEnqueue(t, a, "honest")
	for served := 0; !granted(honest); served++ {
		if served > 1 {
			t.Fatalf("honest name waited %d flood computations", served)
		}
		a.release(held, 0)
		for i, f := range flood {
			if granted(f) {
				held = f
				flood[i] = mustEnqueue(t, a, "victim") // refilled at once
			}
		}
	}
}

func TestAdmissionCancelWhileQueued(t *testing.T) {
	a := newAdmission(1, 100, 2)
	run := mustEnqueue(t, a, "x")
	q := mustEnqueue(t, a, "a")
	next := mustEnqueue(t, a, "b")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.wait(ctx, q); err == nil {
		t.Fatal("wait with a cancelled context succeeded")
	}
	if _, queued := a.load(); queued != 1 {
		t.Fatalf("%d queued after cancel, want 1", queued)
	}
	a.release(run, 0)
	if !granted(next) || granted(q) {
		t.Fatal("slot not passed to the next live ticket")
	}
	a.release(next, 0)
	a.release(next, 0) // twice is harmless
	if r, qd := a.load(); r != 0 || qd != 0 {
		t.Fatalf("load %d %d", r, qd)
	}
}

func TestAdmissionQueueFull(t *testing.T) {
	a := newAdmission(1, 2, 2)
	mustEnqueue(t, a, "x")
	mustEnqueue(t, a, "a")
	mustEnqueue(t, a, "b")
	_, oe, perName := a.enqueue("c", keyOf("c"), 1<<20, false)
	if oe == nil || perName || oe.Queued || oe.RetryAfter() <= 0 {
		t.Fatalf("full queue: %v", oe)
	}
}

// TestAdmissionEstimateLearns: the estimate follows measured durations.
func TestAdmissionEstimateLearns(t *testing.T) {
	a := newAdmission(1, 10, 2)
	before := a.nsPerByte
	for range 20 {
		tk := mustEnqueue(t, a, "x")
		a.release(tk, 1<<20) // 1 ns per byte of its 1 MiB of work
	}
	if a.nsPerByte >= before || a.nsPerByte < 0.99 || a.nsPerByte > 1.01 {
		t.Fatalf("nsPerByte %v (from %v), want it to approach 1", a.nsPerByte, before)
	}
}

// TestAdmissionAskedAgainGoesFirst: a password asked for again goes before
// a name's other queued passwords and may take the place of a less-asked
// one when the name has no room; one asked as often may not.
func TestAdmissionAskedAgainGoesFirst(t *testing.T) {
	a := newAdmission(1, 100, 2)
	run := mustEnqueue(t, a, "x")
	g1, _, _ := a.enqueue("a", keyOf("guess-1"), 1<<20, false)
	g2, _, _ := a.enqueue("a", keyOf("guess-2"), 1<<20, false)
	if _, oe, perName := a.enqueue("a", keyOf("guess-3"), 1<<20, false); oe == nil || !perName {
		t.Fatal("a third guess took a place")
	}
	if _, oe, perName := a.enqueue("a", keyOf("right"), 1<<20, false); oe == nil || !perName {
		t.Fatal("a first ask displaced an equally asked guess")
	}
	h, oe, _ := a.enqueue("a", keyOf("right"), 1<<20, false) // the agent's retry
	if oe != nil {
		t.Fatalf("asked again: %v", oe)
	}
	if !granted(g2) || g2.displaced == nil || g2.displaced.RetryAfter() <= 0 {
		t.Fatal("the newest least-asked guess was not displaced with a RetryAfter")
	}
	if err := a.wait(context.Background(), g2); err != g2.displaced {
		t.Fatalf("displaced wait: %v", err)
	}
	if a.eta(h) >= a.eta(g1) {
		t.Fatalf("asked-again password expected after a guess: %v >= %v", a.eta(h), a.eta(g1))
	}
	a.release(run, 0)
	if !granted(h) || granted(g1) {
		t.Fatal("the guess was served before the password asked for twice")
	}
	a.release(h, 0)
	if !granted(g1) {
		t.Fatal("the remaining guess was not served")
	}
	a.release(g1, 0)
	if r, q := a.load(); r != 0 || q != 0 {
		t.Fatalf("load %d %d", r, q)
	}
}

// TestAdmissionAskMovesQueuedTicket: asking again for a queued password
// moves it ahead of its name's earlier ones.
func TestAdmissionAskMovesQueuedTicket(t *testing.T) {
	a := newAdmission(1, 100, 2)
	run := mustEnqueue(t, a, "x")
	g, _, _ := a.enqueue("a", keyOf("guess"), 1<<20, false)
	h, _, _ := a.enqueue("a", keyOf("right"), 1<<20, false)
	a.ask(h)
	a.release(run, 0)
	if !granted(h) || granted(g) {
		t.Fatal("the password asked for again was not served first")
	}
}

// TestAdmissionSuspectsWaitForSpareCapacity: a first ask for a failing name
// is served after every other queued computation, and stops being a
// suspect when asked for again.
func TestAdmissionSuspectsWaitForSpareCapacity(t *testing.T) {
	a := newAdmission(1, 100, 2)
	run := mustEnqueue(t, a, "x")
	guess, _, _ := a.enqueue("attacked", keyOf("guess"), 1<<20, true)
	b := mustEnqueue(t, a, "b")
	c := mustEnqueue(t, a, "c")
	if !guess.suspect() || a.eta(guess) <= a.eta(c) {
		t.Fatalf("suspect expected before later names: %v <= %v", a.eta(guess), a.eta(c))
	}
	a.release(run, 0)
	if !granted(b) || granted(guess) {
		t.Fatal("suspect served before a later name")
	}
	a.release(b, 0)
	if !granted(c) || granted(guess) {
		t.Fatal("suspect served before a later name")
	}
	a.release(c, 0)
	if !granted(guess) {
		t.Fatal("suspect not served with nothing else queued")
	}
	a.release(guess, 0)

	// Asked for again: an ordinary ticket.
	run = mustEnqueue(t, a, "x")
	own, _, _ := a.enqueue("attacked", keyOf("own"), 1<<20, true)
	d := mustEnqueue(t, a, "d")
	a.ask(own)
	if own.suspect() {
		t.Fatal("a password asked for twice is still a suspect")
	}
	a.release(run, 0)
	if !granted(own) || granted(d) {
		t.Fatal("the password asked for again lost its turn")
	}
	a.release(own, 0)
	a.release(d, 0)
}

// TestAdmissionCheapen: once a name is verified its queued computations no
// longer count in the estimates of those behind them.
func TestAdmissionCheapen(t *testing.T) {
	a := newAdmission(1, 100, 2)
	mustEnqueue(t, a, "x")
	mustEnqueue(t, a, "verified")
	mustEnqueue(t, a, "verified")
	later := mustEnqueue(t, a, "later")
	before := a.eta(later)
	a.cheapen("verified")
	if after := a.eta(later); after >= before || a.queuedWork != later.work {
		t.Fatalf("eta %v -> %v, queued work %d", before, after, a.queuedWork)
	}
}

// TestAdmissionSlowdown: CPU time per byte settles fast; contention (wall
// over CPU time) is learnt slowly, so a short burst barely moves the
// estimate and a lasting one is learnt.
func TestAdmissionSlowdown(t *testing.T) {
	a := newAdmission(1, 10, 2)
	measure := func(n int, wall, cpu time.Duration) {
		for range n {
			tk := mustEnqueue(t, a, "x")
			a.releaseMeasured(tk, wall, cpu)
		}
	}
	measure(10, 1<<20, 1<<20) // 1 ns per byte, no contention
	base := a.duration(1<<20, a.slowdown)
	measure(3, 8<<20, 1<<20) // a burst: 8 times longer on the wall clock
	if burst := a.duration(1<<20, a.slowdown); burst > 2*base {
		t.Fatalf("a 3-computation burst raised the estimate from %v to %v", base, burst)
	}
	measure(200, 4<<20, 1<<20) // lasting contention: 4 times
	if got := a.duration(1<<20, a.slowdown); got < 3*base || got > 5*base {
		t.Fatalf("lasting 4x contention: estimate %v, base %v", got, base)
	}
	// At best, the contention is gone: queued work costs its CPU time.
	held := mustEnqueue(t, a, "x")
	queued := mustEnqueue(t, a, "y")
	full, best := a.eta(queued), a.etaAtBest(queued)
	if best >= full/2 || best < base {
		t.Fatalf("with 4x contention, estimate at best %v, estimate %v (one computation's CPU time %v)", best, full, base)
	}
	a.release(held, 0)
	a.release(queued, 0)
}

// TestAdmissionWaitedFirst: a computation a caller waits for goes before
// those whose callers were told to come back, and the estimates say so;
// the others still run when nobody waits.
func TestAdmissionWaitedFirst(t *testing.T) {
	a := newAdmission(1, 100, 2)
	run := mustEnqueue(t, a, "x")
	early := mustEnqueue(t, a, "early") // its caller was told to come back
	late := mustEnqueue(t, a, "late")
	if a.eta(early) >= a.eta(late) {
		t.Fatalf("nobody waits: estimates %v, %v do not follow arrival order", a.eta(early), a.eta(late))
	}
	a.watch(late, 1)
	if a.eta(late) >= a.eta(early) {
		t.Fatalf("estimate of the waited computation %v not before the other's %v", a.eta(late), a.eta(early))
	}
	a.release(run, 0)
	if !granted(late) || granted(early) {
		t.Fatalf("granted waited=%v, not waited=%v; want only the waited one", granted(late), granted(early))
	}
	a.watch(late, -1)
	a.release(late, 0)
	if !granted(early) {
		t.Fatal("computation nobody waits for not granted with a free slot")
	}
	a.release(early, 0)
}

// TestAdmissionWaitedInOrderOfWaiting: callers waiting for queued
// computations are served in the order they came to wait, not in the
// order the computations were queued: one that came back early is not
// overtaken by later ones its estimate did not count.
func TestAdmissionWaitedInOrderOfWaiting(t *testing.T) {
	a := newAdmission(1, 100, 2)
	run := mustEnqueue(t, a, "x")
	first := mustEnqueue(t, a, "first") // queued first, waited for last
	second := mustEnqueue(t, a, "second")
	a.watch(second, 1)
	before := a.eta(second)
	a.watch(first, 1)
	if got := a.eta(second); got > before {
		t.Fatalf("estimate grew from %v to %v when a later caller came to wait", before, got)
	}
	a.release(run, 0)
	if !granted(second) || granted(first) {
		t.Fatalf("granted first-waited=%v, later-waited=%v; want the first-waited only", granted(second), granted(first))
	}
	a.release(second, 0)
	if !granted(first) {
		t.Fatal("later-waited computation not granted next")
	}
	a.release(first, 0)
}
