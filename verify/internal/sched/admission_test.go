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
	s := newTest(1, 100, 2)
	run := mustEnqueue(t, s, "x")
	q1, _ := join(s, "a", "q1", false) // ordinary: the name's first
	q2, _ := join(s, "a", "q2", false) // a suspect: the name was busy
	s.watch(q2, 1)                     // its caller waits: it keeps its place
	p1, _ := join(s, "a", "p1", false)
	p2, _ := join(s, "a", "p2", false)
	if p1.state != Parked || p2.state != Parked {
		t.Fatalf("states %v, %v, want both parked", p1.state, p2.state)
	}
	if _, queued := s.Load(); queued != 4 {
		t.Fatalf("%d waiting for a slot, want 4 (two queued, two parked)", queued)
	}
	s.watch(p1, 1)
	s.watch(p2, 1)
	s.watch(p2, -1) // p2's caller leaves before p2 had room
	var o *Overload
	if p2.state != Done || !errors.As(p2.err, &o) || !o.NameFull || o.Queued || o.After <= 0 {
		t.Fatalf("parked job left by its caller: %v, %v; want it done, NameFull", p2.state, p2.err)
	}
	s.watch(q2, -1) // q2's caller leaves: p1, still waited for, takes its place
	if q2.state != Done || !errors.As(q2.err, &o) || p1.state != Queued {
		t.Fatalf("suspect nobody waits for: %v (%v); parked: %v; want it displaced by the parked one", q2.state, q2.err, p1.state)
	}
	if _, err := s.Acquire(context.Background(), q2); err != q2.err {
		t.Fatalf("displaced job's Acquire: %v", err)
	}
	done(s, run)
	if !granted(q1) {
		t.Fatal("the ordinary job was not served first")
	}
	s.watch(p1, -1)
	done(s, q1)
	if !granted(p1) {
		t.Fatal("the job admitted from the line was not served")
	}
	done(s, p1)
	if r, q := s.Load(); r != 0 || q != 0 || s.Jobs() != 0 {
		t.Fatalf("load %d %d, %d jobs", r, q, s.Jobs())
	}
}

// TestWaitedOutPins: a caller that waits out MaxWait for a parked job gets
// it queued at once, over its name's cap; such a pinned job is never
// displaced, while an unpinned suspect nobody waits for is.
func TestWaitedOutPins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Slots: 1, MaxQueue: 100, PerName: 1, MaxWait: 2 * time.Second})
		join(s, "running", "r", false)
		q, _ := join(s, "a", "q", true)
		s.watch(q, 1) // its caller waits: it keeps its place
		p, _ := join(s, "a", "p", true)
		if p.state != Parked {
			t.Fatalf("state %v, want parked", p.state)
		}
		start := time.Now()
		err := s.Wait(context.Background(), p)
		var o *Overload
		if !errors.As(err, &o) || !o.Queued || time.Since(start) != 2*time.Second {
			t.Fatalf("Wait: %v after %v, want a queued Overload after MaxWait (2 s)", err, time.Since(start))
		}
		if p.state != Queued || !p.pinned || q.state != Queued {
			t.Fatalf("after its caller waited out MaxWait: %v, pinned %v; other %v; want both queued, it pinned", p.state, p.pinned, q.state)
		}
		s.watch(q, -1)
		n, _ := join(s, "a", "new", true)
		if q.state != Done || p.state != Queued || n.state != Queued {
			t.Fatalf("a newcomer: displaced %v, pinned %v, newcomer %v; want only the unpinned suspect displaced", q.state, p.state, n.state)
		}
	})
}

// TestAdversaryCannotDisplaceOrPass: once the node's password is pinned
// and asked again (its agent's first request waited out MaxWait; its
// second came), no sequence of other requests for its name can end its
// job or make more of the name's jobs run before it than were queued or
// in line before it arrived: fresh guesses, guesses asked again and
// again, callers that wait and leave, in any order, while the slot is
// given to the next in turn.
func TestAdversaryCannotDisplaceOrPass(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) { adversaryRun(t, seed) })
	}
}

func adversaryRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 13))
	s := newTest(1, 1000, 4)
	const node = "node"
	var guesses []string // every password sent for node but the right one
	guess := func() *Job {
		pw := fmt.Sprint("guess-", len(guesses))
		guesses = append(guesses, pw)
		j, o := join(s, node, pw, true)
		if o != nil {
			t.Fatalf("guess refused: %v", o)
		}
		return j
	}
	step := func() {
		switch rng.IntN(6) {
		case 0, 1: // a fresh guess; its caller may wait
			if j := guess(); rng.IntN(2) == 0 {
				s.watch(j, 1)
			}
		case 2: // a guess asked again, up to five times
			if len(guesses) > 0 {
				pw := guesses[rng.IntN(len(guesses))]
				for range 1 + rng.IntN(5) {
					join(s, node, pw, true)
				}
			}
		case 3: // a guesser's caller leaves, or waits out MaxWait
			if len(guesses) > 0 {
				if g := s.jobs[keyOf(guesses[rng.IntN(len(guesses))])]; g != nil && g.waiters > 0 {
					if rng.IntN(2) == 0 {
						s.pinLocked(g)
					}
					s.watch(g, -1)
				}
			}
		case 4: // other names' work
			mustEnqueue(t, s, fmt.Sprint("other-", rng.IntN(8)))
		case 5: // the running job ends: the slot goes to the next in turn
			for r := range s.running {
				done(s, r)
				break
			}
		}
	}
	s.Join(context.Background(), Request{Key: keyOf("busy"), Name: "busy", Work: 1 << 20})
	for range rng.IntN(40) {
		step()
	}
	// The agent's first request: its job parks or is queued, its caller
	// waits out MaxWait, and its next request asks again.
	ahead := 0
	if nq := s.queue.of(node); nq != nil {
		ahead = len(nq.jobs)
	}
	ahead += len(s.lines[node])
	right, _ := join(s, node, "right", true)
	s.watch(right, 1)
	s.pinLocked(right)
	s.watch(right, -1)
	join(s, node, "right", true)
	passed := 0
	for i := 0; right.state != Running; i++ {
		if right.state == Done {
			t.Fatalf("step %d: the node's password ended without running: %v", i, right.err)
		}
		if i > 100000 {
			t.Fatal("the node's password never ran")
		}
		before := runningOf(s, node)
		step()
		if r := runningOf(s, node); r != nil && r != before && r != right {
			passed++
		}
	}
	if passed > ahead {
		t.Fatalf("%d of the name's jobs ran before its password, %d were there before it", passed, ahead)
	}
}

// runningOf returns name's running job, if any.
func runningOf(s *Scheduler, name string) *Job {
	for r := range s.running {
		if r.name == name {
			return r
		}
	}
	return nil
}

// TestPinnedDoNotFillQueue: jobs pinned past their name's places do not
// count against MaxQueue: guessers that wait for one name cannot make the
// scheduler refuse other names' work.
func TestPinnedDoNotFillQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Slots: 1, MaxQueue: 2, PerName: 1, MaxWait: time.Second})
		join(s, "running", "r", false)
		q, _ := join(s, "a", "q", true)
		s.watch(q, 1)
		for i := range 5 {
			p, o := join(s, "a", fmt.Sprint("p", i), true)
			if o != nil {
				t.Fatalf("guess %d refused: %v", i, o)
			}
			go s.Wait(context.Background(), p)
			time.Sleep(time.Second) // its caller waits out MaxWait: pinned
			synctest.Wait()
		}
		if nq := s.queue.of("a"); len(nq.jobs) != 6 || s.queue.over != 5 {
			t.Fatalf("name a: %d queued, %d over its place; want 6 and 5", len(s.queue.of("a").jobs), s.queue.over)
		}
		if _, o := join(s, "b", "b", false); o != nil {
			t.Fatalf("another name refused: %v", o)
		}
		if _, o := join(s, "c", "c", false); o == nil || o.NameFull {
			t.Fatalf("past MaxQueue: %v, want queue full", o)
		}
	})
}
