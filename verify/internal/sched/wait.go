package sched

import (
	"context"
	"time"
)

// Wait waits for j's result within ctx and Config.MaxWait from arrived,
// when the caller's request came (zero or in the future: now). It returns
// the result, ctx's cause, or an *Overload telling the caller to come
// back later, as "Holding or shedding" in the package doc says.
func (s *Scheduler) Wait(ctx context.Context, j *Job, arrived time.Time) error {
	select {
	case <-j.done:
		return j.err
	default:
	}
	w := s.arrive(j, arrived)
	if !w.leave {
		w.timer = time.NewTimer(min(w.every, w.deadline.Sub(w.now)))
		defer w.timer.Stop()
	}
	for !w.leave {
		select {
		case <-j.done:
			s.unwatch(j, false)
			return j.err
		case <-ctx.Done():
			s.unwatch(j, true)
			return context.Cause(ctx)
		case <-w.timer.C:
		case <-w.warm:
		}
		s.recheck(j, &w)
	}
	return s.leave(j, &w)
}

// waiter is a caller in Wait.
type waiter struct {
	now, deadline time.Time
	decided       bool            // held or shed on the estimates (see decideLocked)
	held, leave   bool            // held on an estimate; leaving now
	warm          <-chan struct{} // until decided: closed once the estimates are warm
	every         time.Duration   // how often the caller is looked at again (recheck)
	timer         *time.Timer
}

// arrive counts a caller of j and decides, if the estimates are warm,
// whether it is held or shed at once.
func (s *Scheduler) arrive(j *Job, arrived time.Time) waiter {
	w := waiter{now: time.Now(), every: recheckInterval(s.cfg.MaxWait)}
	w.deadline = w.now.Add(s.cfg.MaxWait)
	if !arrived.IsZero() && arrived.Before(w.now) {
		w.deadline = arrived.Add(s.cfg.MaxWait)
	}
	s.mu.Lock()
	defer s.unlock()
	s.watchLocked(j, 1)
	w.decided, w.leave = s.est.warm(), !w.now.Before(w.deadline)
	if w.decided && !w.leave {
		w.held, w.leave = s.decideLocked(j, w.now, w.deadline.Sub(w.now))
	}
	if !w.decided {
		w.warm = s.warm
	}
	return w
}

// unwatch stops counting a caller of j: one answered, or one whose
// context ended (gone), expected back as one shed.
func (s *Scheduler) unwatch(j *Job, gone bool) {
	s.mu.Lock()
	defer s.unlock()
	s.watchLocked(j, -1)
	if gone {
		back := time.Now().Add(s.cfg.ReturnAfter) // it retries as agents do
		s.changeLocked(j, func() { j.back = back })
	}
}

// recheck looks again at a caller of j still waiting: it leaves at its
// deadline, is decided on once the estimates are warm, or leaves early
// when j's result cannot come in time even at the best.
func (s *Scheduler) recheck(j *Job, w *waiter) {
	w.now = time.Now()
	left := w.deadline.Sub(w.now)
	s.mu.Lock()
	switch {
	case left <= 0:
		w.leave = true
	case !w.decided && s.est.warm():
		w.decided, w.warm = true, nil
		w.held, w.leave = s.decideLocked(j, w.now, left)
	case w.decided && !s.waitsOutLocked(j):
		w.leave = s.hopelessLocked(j, w.now, left)
	}
	s.mu.Unlock()
	w.timer.Reset(min(w.every, max(left, 0)))
}

// leave ends the wait of a caller leaving without its result: j is
// earned if it waited out its deadline, and the caller told when to come
// back, unless j was done meanwhile.
func (s *Scheduler) leave(j *Job, w *waiter) error {
	s.mu.Lock() // the estimate follows the unwatch: j may go behind wanted jobs now
	defer s.unlock()
	if !w.now.Before(w.deadline) {
		s.earnLocked(j)
	}
	s.watchLocked(j, -1)
	if j.state == done {
		return j.err
	}
	after := s.shedLocked(j, w.now)
	return &Overload{After: after, Queued: true, Held: w.held, Reason: "work queued"}
}

// decideLocked decides whether j's caller is held (for at most left) or
// shed at once; held on an estimate, j remembers the promise, for the
// margin.
func (s *Scheduler) decideLocked(j *Job, now time.Time, left time.Duration) (held, leave bool) {
	if s.waitsOutLocked(j) {
		return false, false
	}
	best := s.etaLocked(j, now, s.est.nsPerByte)
	if s.est.wait(best, now) > left {
		return false, true
	}
	if j.state == queued && j.heldAt.IsZero() {
		j.heldAt, j.promise = now, best
	}
	return true, false
}

// shedLocked records that j's caller is shed at now and returns when to
// tell it to come back: MaxWait/2 before j's estimated completion. j is
// then due back that late if callers honour it, else ReturnAfter later;
// its estimate counts it after the jobs due sooner, and, with
// HonourAfter, after every job already shed.
func (s *Scheduler) shedLocked(j *Job, now time.Time) time.Duration {
	back := now.Add(s.cfg.ReturnAfter)
	if s.cfg.HonourAfter {
		back = now.Add(farFuture)
	}
	s.changeLocked(j, func() { j.back = back })
	after := max(s.expectedWaitLocked(j, now)-s.cfg.MaxWait/2, minAfter)
	if s.cfg.HonourAfter {
		s.changeLocked(j, func() { j.back = now.Add(after) })
	}
	return after
}

// farFuture is later than any caller is expected back.
const farFuture = 100 * 365 * 24 * time.Hour

// hopelessLocked reports whether j's result cannot come within left even
// at the fastest recent CPU time per byte. Thousands of callers ask this,
// so the whole queue's work, known at once, is tried first.
func (s *Scheduler) hopelessLocked(j *Job, now time.Time, left time.Duration) bool {
	fastest := s.est.fastest()
	if j.state == queued && s.startLocked(s.queue.work, now, fastest)+duration(s.ownBatchWorkLocked(j), fastest) <= left {
		return false
	}
	return s.etaLocked(j, now, fastest) > left
}

// recheckInterval is how often a waiting caller's estimate is checked.
func recheckInterval(maxWait time.Duration) time.Duration {
	return min(max(maxWait/16, 10*time.Millisecond), time.Second)
}

// watchLocked counts a caller that starts (delta 1) or stops (-1)
// waiting for j. A parked job ends when its last caller leaves, so that a
// request not waited for holds nothing; a queued suspect left unwaited
// may give its place to its name's line.
func (s *Scheduler) watchLocked(j *Job, delta int) {
	s.changeLocked(j, func() {
		j.waited = true
		j.waiters += delta
	})
	switch {
	case j.state == parked && j.waiters == 0:
		after := s.expectedWaitLocked(j, time.Now())
		s.endLocked(j, &Overload{After: max(after, minAfter), Reason: "node's queue full; left before it had room"})
		s.forgetLocked(j.nq)
	case j.displaceable():
		s.admitLocked(j.nq, time.Now())
	}
}

// waitsOutLocked reports whether j's callers wait out MaxWait: a queued
// suspect, or a parked job.
func (s *Scheduler) waitsOutLocked(j *Job) bool {
	return j.state == parked || j.state == queued && j.suspect()
}

// etaLocked estimates how long until j's computation has finished, at
// perByte ns per byte of work on a slot.
func (s *Scheduler) etaLocked(j *Job, now time.Time, perByte float64) time.Duration {
	var eta time.Duration
	switch j.state {
	case running:
		eta = duration(j.batch.work, perByte) - now.Sub(j.started)
	case queued:
		eta = s.startLocked(s.queue.ahead(j.nq, j), now, perByte) + duration(s.ownBatchWorkLocked(j), perByte)
	case pending:
		eta = s.startLocked(s.queue.work, now, perByte) + duration(s.ownBatchWorkLocked(j), perByte)
	case parked:
		// It gets a place once its name's first queued job has run.
		if first := j.nq.first(); first != nil {
			eta = s.etaLocked(first, now, perByte) + duration(j.work, perByte)
		} else {
			eta = s.startLocked(s.queue.work, now, perByte) + duration(j.work, perByte)
		}
	}
	return max(eta, minAfter)
}

// ownBatchWorkLocked is the work of the batch j is expected to run in,
// whose results all come at its end.
func (s *Scheduler) ownBatchWorkLocked(j *Job) int64 {
	return j.work * int64(min(s.cfg.Lanes, max(s.queue.len, 1)))
}

// expectedWaitLocked is how long j's computation is expected to take to
// finish from now.
func (s *Scheduler) expectedWaitLocked(j *Job, now time.Time) time.Duration {
	return s.est.wait(s.etaLocked(j, now, s.est.nsPerByte), now)
}

// startLocked estimates when a job with ahead bytes of work before it
// gets a slot: the running batches' time left plus ahead, over the slots.
func (s *Scheduler) startLocked(ahead int64, now time.Time, perByte float64) time.Duration {
	if len(s.running) < s.cfg.Slots && ahead == 0 {
		return 0
	}
	var remaining time.Duration
	for b := range s.running {
		remaining += max(duration(b.work, perByte)-now.Sub(b.started), 0)
	}
	return (remaining + duration(ahead, perByte)) / time.Duration(s.cfg.Slots)
}
