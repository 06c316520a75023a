package sched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// TestFullNameLine: a password for a name with no room waits in its
// name's line, holding no place, while its caller waits; it ends when its
// last caller leaves, and takes the place of a suspect nobody waits for,
// oldest in line first.
func TestFullNameLine(t *testing.T) {
	run(t, 1, 100, 2, func(h *harness) {
		r := h.enqueue("x")
		q1, _ := h.join("a", "q1", false) // ordinary: the name's first
		q2, _ := h.join("a", "q2", false) // a suspect: the name was busy
		h.watch(q2, 1)                    // its caller waits: it keeps its place
		p1, _ := h.join("a", "p1", false)
		p2, _ := h.join("a", "p2", false)
		if p1.state != parked || p2.state != parked {
			t.Fatalf("states %v, %v, want both parked", p1.state, p2.state)
		}
		if _, queued := h.s.Load(); queued != 4 {
			t.Fatalf("%d waiting for a slot, want 4 (two queued, two parked)", queued)
		}
		h.watch(p1, 1)
		h.watch(p2, 1)
		h.watch(p2, -1) // p2's caller leaves before p2 had room
		var o *Overload
		if p2.state != done || !errors.As(p2.err, &o) || o.Queued || o.After <= 0 {
			t.Fatalf("parked job left by its caller: %v, %v; want it done, not queued", p2.state, p2.err)
		}
		h.watch(q2, -1) // q2's caller leaves: p1, still waited for, takes its place
		if q2.state != done || !errors.As(q2.err, &o) || p1.state != queued {
			t.Fatalf("suspect nobody waits for: %v (%v); parked: %v; want it displaced by the parked one", q2.state, q2.err, p1.state)
		}
		h.done(r)
		if !granted(q1) {
			t.Fatal("the ordinary job was not served first")
		}
		h.watch(p1, -1)
		h.done(q1)
		if !granted(p1) {
			t.Fatal("the job admitted from the line was not served")
		}
		h.done(p1)
		if r, q := h.s.Load(); r != 0 || q != 0 || jobs(h.s) != 0 {
			t.Fatalf("load %d %d, %d jobs", r, q, jobs(h.s))
		}
	})
}

// TestWaitedOutEarnsPlace: a caller that waits out MaxWait for a parked
// job gets it queued at once, over its name's cap; such an earned job is
// never displaced, while an unearned suspect nobody waits for is.
func TestWaitedOutEarnsPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Slots: 1, MaxQueue: 100, PerName: 1, MaxWait: 2 * time.Second})
		defer h.stop()
		h.join("running", "r", false)
		q, _ := h.join("a", "q", true)
		h.watch(q, 1) // its caller waits: it keeps its place
		p, _ := h.join("a", "p", true)
		if p.state != parked {
			t.Fatalf("state %v, want parked", p.state)
		}
		start := time.Now()
		err := h.s.Wait(context.Background(), p, time.Time{})
		var o *Overload
		if !errors.As(err, &o) || !o.Queued || time.Since(start) != 2*time.Second {
			t.Fatalf("Wait: %v after %v, want a queued Overload after MaxWait (2 s)", err, time.Since(start))
		}
		if p.state != queued || !p.earned || q.state != queued {
			t.Fatalf("after its caller waited out MaxWait: %v, earned %v; other %v; want both queued, it earned", p.state, p.earned, q.state)
		}
		h.watch(q, -1)
		n, _ := h.join("a", "new", true)
		if q.state != done || p.state != queued || n.state != queued {
			t.Fatalf("a newcomer: displaced %v, earned %v, newcomer %v; want only the unearned suspect displaced", q.state, p.state, n.state)
		}
	})
}

// TestLateArrivalEarnsPlace: a caller whose request reached Wait late (a slow
// TLS handshake) waits out MaxWait from its arrival, not from its call,
// and earns its job then: a k3s agent that gives up 10 s after it dials
// still earns its password, however late its request came, so waiting
// guessers cannot keep it out.
func TestLateArrivalEarnsPlace(t *testing.T) {
	for _, late := range []time.Duration{0, 500 * time.Millisecond, 3 * time.Second, 9 * time.Second} {
		t.Run(fmt.Sprint("late=", late), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const maxWait = 9500 * time.Millisecond
				h := newHarness(t, Config{Slots: 1, MaxQueue: 100, PerName: 2, MaxWait: maxWait})
				defer h.stop()
				h.join("running", "r", false)
				// Two guessers whose callers wait hold the name's places.
				for _, g := range []string{"g1", "g2"} {
					j, _ := h.join("node", g, true)
					h.watch(j, 1)
				}
				dialed := time.Now()
				time.Sleep(late) // the handshake
				right, _ := h.join("node", "right", true)
				if right.state != parked {
					t.Fatalf("state %v, want parked behind the guesses", right.state)
				}
				// The agent's client gives up 10 s after it dialled.
				ctx, cancel := context.WithDeadline(context.Background(), dialed.Add(10*time.Second))
				defer cancel()
				err := h.s.Wait(ctx, right, dialed)
				var o *Overload
				if !errors.As(err, &o) {
					t.Fatalf("Wait: %v, want an Overload before the client's timeout", err)
				}
				if waited := time.Since(dialed); waited != maxWait {
					t.Fatalf("answered %v after the dial, want MaxWait (%v)", waited, maxWait)
				}
				if !right.earned || right.state != queued {
					t.Fatalf("after waiting out MaxWait from its arrival: earned %v, %v; want earned and queued", right.earned, right.state)
				}
			})
		})
	}
}

// TestAdversaryCannotDisplaceOrPass: once the node's password is earned
// and asked again (its agent's first request waited out MaxWait; its
// second came), no sequence of other requests for its name can end its
// job or make more of the name's jobs run before it than were queued or
// in line before it arrived: fresh guesses, guesses asked again and
// again, callers that wait and leave, in any order, while the slot is
// given to the next in turn.
func TestAdversaryCannotDisplaceOrPass(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newTest(t, 1, 1000, 4)
				defer h.stop()
				adversaryRun(t, h, seed)
			})
		})
	}
}

func adversaryRun(t *testing.T, h *harness, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 13))
	const node = "node"
	var guesses []string // every password sent for node but the right one
	guess := func() *Job {
		pw := fmt.Sprint("guess-", len(guesses))
		guesses = append(guesses, pw)
		j, o := h.join(node, pw, true)
		if o != nil {
			t.Fatalf("guess refused: %v", o)
		}
		return j
	}
	step := func() {
		switch rng.IntN(6) {
		case 0, 1: // a fresh guess; its caller may wait
			if j := guess(); rng.IntN(2) == 0 {
				h.watch(j, 1)
			}
		case 2: // a guess asked again, up to five times
			if len(guesses) > 0 {
				pw := guesses[rng.IntN(len(guesses))]
				for range 1 + rng.IntN(5) {
					h.join(node, pw, true)
				}
			}
		case 3: // a guesser's caller leaves, or waits out MaxWait
			if len(guesses) > 0 {
				if g := h.s.jobs[keyOf(guesses[rng.IntN(len(guesses))])]; g != nil && g.waiters > 0 {
					if rng.IntN(2) == 0 {
						h.earn(g)
					}
					h.watch(g, -1)
				}
			}
		case 4: // other names' work
			h.enqueue(fmt.Sprint("other-", rng.IntN(8)))
		case 5: // the running job ends: the slot goes to the next in turn
			if r := h.anyRunning(); r != nil {
				h.done(r)
			}
		}
	}
	h.join("busy", "busy", false)
	for range rng.IntN(40) {
		step()
	}
	// The agent's first request: its job parks or is queued, its caller
	// waits out MaxWait, and its next request asks again.
	ahead := h.queued(node)
	if nq := h.s.names[node]; nq != nil {
		ahead += nq.line.Len()
	}
	right, _ := h.join(node, "right", true)
	h.watch(right, 1)
	h.earn(right)
	h.watch(right, -1)
	h.join(node, "right", true)
	passed := 0
	for i := 0; right.state != running; i++ {
		if right.state == done {
			t.Fatalf("step %d: the node's password ended without running: %v", i, right.err)
		}
		if i > 100000 {
			t.Fatal("the node's password never ran")
		}
		before := h.runningOf(node)
		step()
		if r := h.runningOf(node); r != nil && r != before && r != right {
			passed++
		}
	}
	if passed > ahead {
		t.Fatalf("%d of the name's jobs ran before its password, %d were there before it", passed, ahead)
	}
}

// TestEarnedDoNotFillQueue: jobs earned past their name's places do not
// count against MaxQueue: guessers that wait for one name cannot make the
// scheduler refuse other names' work.
func TestEarnedDoNotFillQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Slots: 1, MaxQueue: 2, PerName: 1, MaxWait: time.Second})
		defer h.stop()
		h.join("running", "r", false)
		q, _ := h.join("a", "q", true)
		h.watch(q, 1)
		for i := range 5 {
			p, o := h.join("a", fmt.Sprint("p", i), true)
			if o != nil {
				t.Fatalf("guess %d refused: %v", i, o)
			}
			go h.s.Wait(context.Background(), p, time.Time{})
			time.Sleep(time.Second) // its caller waits out MaxWait: earned
			synctest.Wait()
		}
		if n := h.queued("a"); n != 6 || h.s.queue.over != 5 {
			t.Fatalf("name a: %d queued, %d over its place; want 6 and 5", n, h.s.queue.over)
		}
		if _, o := h.join("b", "b", false); o != nil {
			t.Fatalf("another name refused: %v", o)
		}
		if _, o := h.join("c", "c", false); o == nil || o.Queued {
			t.Fatalf("past MaxQueue: %v, want queue full", o)
		}
	})
}

// TestRefusalCountsWaitingWork: when one name's queued and parked jobs
// fill MaxQueue, a Join refused is told to come back after that work, the
// parked jobs' included, not in a millisecond.
func TestRefusalCountsWaitingWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxQueue = 8
		h := newHarness(t, Config{Slots: 1, MaxQueue: maxQueue, PerName: 1, MaxWait: time.Hour})
		defer h.stop()
		calibrate(h.s, time.Second, 1<<20) // a job of join's 1 MiB takes 1 s
		h.join("busy", "pw", false)
		for i := range maxQueue {
			if _, o := h.join("flooded", fmt.Sprint("guess-", i), false); o != nil {
				t.Fatalf("guess %d refused: %v", i, o)
			}
		}
		_, o := h.join("other", "other-pw", false)
		if o == nil || o.Queued || o.After < maxQueue*time.Second {
			t.Fatalf("refused with a full queue: %v; want After counting the %d waiting (1 s each)", o, maxQueue)
		}
	})
}
