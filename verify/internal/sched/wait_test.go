package sched

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// oneSlot returns a one-slot harness holding callers up to maxWait.
func oneSlot(t *testing.T, maxWait time.Duration) *harness {
	return newHarness(t, Config{Slots: 1, MaxQueue: 100, PerName: 4, MaxWait: maxWait})
}

// runningAndNext joins a job that takes h's slot and one queued behind it.
func runningAndNext(h *harness) (running, next *Job) {
	running, _ = h.join("running", "a", false)
	next, _ = h.join("next", "b", false)
	return running, next
}

// waiting starts a caller's Wait for j, arrived now, and returns its
// result's channel.
func (h *harness) waiting(j *Job) <-chan error {
	got := make(chan error, 1)
	go func() { got <- h.s.Wait(context.Background(), j, time.Time{}) }()
	return got
}

// oneSecondJobs returns oneSlot's harness, its estimates taking a job of
// 1 MiB (what join makes) to cost 1 s.
func oneSecondJobs(t *testing.T, maxWait time.Duration) *harness {
	h := oneSlot(t, maxWait)
	calibrate(h.s, time.Second, 1<<20)
	return h
}

// TestWaitSendsAwayAtArrival: a caller whose result is not expected
// within MaxWait is told so at once, with the job still queued and a
// come-back time MaxWait/2 before its expected completion.
func TestWaitSendsAwayAtArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := oneSecondJobs(t, 1500*time.Millisecond)
		defer h.stop()
		h.join("running", "a", false)
		q, _ := h.join("late", "b", false)
		start := time.Now()
		err := h.s.Wait(context.Background(), q, time.Time{})
		var o *Overload
		if !errors.As(err, &o) || !o.Queued {
			t.Fatalf("Wait: %v, want a queued Overload", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("sent away after %v, want at once", waited)
		}
		// Done in 2 s at the best (1 s running, 1 s its own), 2.2 s with
		// the margin of an estimator with no errors measured yet (1.1);
		// asked back 0.75 s earlier.
		if o.After != 1450*time.Millisecond {
			t.Fatalf("After %v, want 1.45 s", o.After)
		}
		if q.state != queued || q.waiters != 0 {
			t.Fatalf("job %v with %d waiters after its caller left, want queued with none", q.state, q.waiters)
		}
	})
}

// TestWaitHoldsWhatFits: a caller whose result is expected within MaxWait
// is held until it comes, however slowly the work goes.
func TestWaitHoldsWhatFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := oneSecondJobs(t, 8*time.Second)
		defer h.stop()
		running, next := runningAndNext(h)
		got := h.waiting(next)
		time.Sleep(time.Second)
		h.done(running)
		time.Sleep(time.Second)
		h.end(next, time.Second, time.Second, nil)
		if err := <-got; err != nil {
			t.Fatalf("Wait: %v, want the job's result", err)
		}
	})
}

// TestWaitSuspectWaitsOutMaxWait: a suspect is not sent away early: it is
// held for MaxWait in case spare capacity comes, then told to come back.
func TestWaitSuspectWaitsOutMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := oneSecondJobs(t, 2*time.Second)
		defer h.stop()
		h.join("running", "a", false)
		h.join("other", "b", false)
		h.join("third", "c", false)
		guess, _ := h.join("attacked", "guess", true)
		if !guess.suspect() {
			t.Fatal("a first ask for a failing name is not a suspect")
		}
		start := time.Now()
		err := h.s.Wait(context.Background(), guess, time.Time{})
		var o *Overload
		if !errors.As(err, &o) || !o.Queued {
			t.Fatalf("Wait: %v, want a queued Overload", err)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Fatalf("suspect held %v, want MaxWait (2 s)", waited)
		}
	})
}

// TestLastWaiterLeavesWhileRunning: a job whose only caller leaves goes
// on; its result is published to later callers and it leaves the
// scheduler only when its runner finishes it.
func TestLastWaiterLeavesWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := oneSecondJobs(t, 8*time.Second)
		defer h.stop()
		j, created, err := h.s.Join(context.Background(), Request{Key: keyOf("pw"), Name: "n", Work: 1 << 20})
		h.settle()
		if err != nil || !created || j.state != running {
			t.Fatalf("Join: %v, created %v, state %v", err, created, j.state)
		}
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() { got <- h.s.Wait(ctx, j, time.Time{}) }()
		synctest.Wait()
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait after its context ended: %v", err)
		}
		if j.waiters != 0 || jobs(h.s) != 1 || j.state != running {
			t.Fatalf("after the caller left: %d waiters, %d jobs, state %v; want 0, 1, running", j.waiters, jobs(h.s), j.state)
		}
		again, created, _ := h.s.Join(context.Background(), Request{Key: keyOf("pw"), Name: "n", Work: 1 << 20})
		if created || again != j {
			t.Fatal("a later caller did not join the running job")
		}
		time.Sleep(time.Second)
		h.end(j, time.Second, time.Second, errors.New("the result"))
		if err := h.s.Wait(context.Background(), again, time.Time{}); err == nil || err.Error() != "the result" {
			t.Fatalf("later caller got %v", err)
		}
		if jobs(h.s) != 0 {
			t.Fatalf("%d jobs after the only one finished", jobs(h.s))
		}
	})
}

// TestJoinAfterClose: Join takes no new work after Close.
func TestJoinAfterClose(t *testing.T) {
	run(t, 1, 10, 2, func(h *harness) {
		h.s.Close()
		if _, _, err := h.s.Join(context.Background(), Request{Key: keyOf("new"), Name: "z", Work: 1}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Join after Close: %v", err)
		}
	})
}

// TestPendingHoldsNoSlot: a job created Later holds a place but no slot
// while Prepare runs, and is queued by Submit.
func TestPendingHoldsNoSlot(t *testing.T) {
	run(t, 1, 10, 2, func(h *harness) {
		var prepared []*Job
		h.prepared = func(j *Job) { prepared = append(prepared, j) }
		p, created, err := h.s.Join(context.Background(), Request{Key: keyOf("enroll"), Name: "new", Work: 1 << 20, Later: true})
		h.settle()
		if err != nil || !created || p.state != pending || len(prepared) != 1 || prepared[0] != p {
			t.Fatalf("Join Later: %v, created %v, state %v, prepared %d", err, created, p.state, len(prepared))
		}
		other := h.enqueue("other")
		if !granted(other) {
			t.Fatal("a pending job kept the free slot")
		}
		h.s.Submit(p)
		h.settle()
		if p.state != queued {
			t.Fatalf("submitted with the slot busy: %v, want queued", p.state)
		}
		h.done(other)
		if !granted(p) {
			t.Fatalf("state %v, want running", p.state)
		}
		h.done(p)
		if r, q := h.s.Load(); r != 0 || q != 0 || jobs(h.s) != 0 {
			t.Fatalf("load %d running, %d queued, %d jobs", r, q, jobs(h.s))
		}
	})
}

// TestWaitCountsFromArrival: a caller whose client started waiting
// earlier (Wait's arrived) is held at most MaxWait from then: sent away at
// once when its result is not expected in the time left, and, when the
// estimate was wrong, sent away as the time left can no longer do, not
// MaxWait after its call. A suspect waits out MaxWait from its arrival
// too: its request was in progress all that time.
func TestWaitCountsFromArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := oneSecondJobs(t, 8*time.Second)
		defer h.stop()
		running, _ := h.join("running", "a", false)
		next, _ := h.join("next", "b", false) // expected in 2 s, 2.2 with the margin
		early := time.Now().Add(-6500 * time.Millisecond)
		var o *Overload
		if err := h.s.Wait(context.Background(), next, early); !errors.As(err, &o) || o.Held {
			t.Fatalf("1.5 s left of 8: %v, want sent away at once", err)
		}
		later := time.Now().Add(-5 * time.Second)
		start := time.Now()
		err := h.s.Wait(context.Background(), next, later) // 3 s left: held, but a runs for ever
		// At the recheck at 2.5 s, b's own second no longer fits in the
		// 0.5 s left, long before MaxWait from the call.
		if !errors.As(err, &o) || !o.Held || time.Since(start) != 2500*time.Millisecond {
			t.Fatalf("3 s left of 8: %v after %v, want sent away at 2.5 s", err, time.Since(start))
		}
		guess, _ := h.join("attacked", "guess", true)
		early = time.Now().Add(-6500 * time.Millisecond)
		start = time.Now()
		if err := h.s.Wait(context.Background(), guess, early); !errors.As(err, &o) || time.Since(start) != 1500*time.Millisecond || !guess.earned {
			t.Fatalf("suspect: %v after %v, earned %v; want sent away and earned after MaxWait from its arrival, 1.5 s", err, time.Since(start), guess.earned)
		}
		h.done(running)
	})
}

// TestWaitDecidedWhenWarm: a caller that comes before the estimates are
// warm is held, and decided on as they warm: sent away then, not held,
// if its result is not expected within MaxWait.
func TestWaitDecidedWhenWarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := oneSlot(t, 8*time.Second)
		defer h.stop()
		_, next := runningAndNext(h)
		start := time.Now()
		got := h.waiting(next)
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("answered %v before the estimates were warm", err)
		default:
		}
		calibrate(h.s, 20*time.Second, 1<<20) // warm: 20 s per job
		var o *Overload
		if err := <-got; !errors.As(err, &o) || !o.Queued || o.Held {
			t.Fatalf("Wait: %v, want a queued Overload, not after a hold", err)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Fatalf("sent away after %v, want as the estimates warmed (1 s)", waited)
		}
		if o.After < 16*time.Second {
			t.Fatalf("After %v, want the new estimate (over 20 s) less MaxWait/2", o.After)
		}
	})
}

// TestWaitHeldUntilHopeless: a caller held on an estimate stays held
// while its result can still come within MaxWait at the best; once it
// cannot, it is sent away at the next recheck (MaxWait/16) rather than
// at MaxWait, and the Overload says it was held.
func TestWaitHeldUntilHopeless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := oneSecondJobs(t, 8*time.Second)
		defer h.stop()
		_, next := runningAndNext(h) // next expected in 2 s
		start := time.Now()
		got := h.waiting(next)
		time.Sleep(3 * time.Second) // a runs late: b's 2 s are over, 5 s are left
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("answered %v while its result could still come in time", err)
		default:
		}
		calibrate(h.s, 20*time.Second, 1<<20) // now it cannot
		var o *Overload
		if err := <-got; !errors.As(err, &o) || !o.Queued || !o.Held {
			t.Fatalf("Wait: %v, want a queued Overload after a hold", err)
		}
		if waited := time.Since(start); waited != 3500*time.Millisecond {
			t.Fatalf("sent away after %v, want at the first recheck after 3 s (3.5 s)", waited)
		}
	})
}
