package sched

import (
	"context"
	"time"
)

// Wait waits for j's result within ctx and Config.MaxWait and returns it,
// or ctx's cause when ctx ends first, or an *Overload telling the caller
// to come back later: Queued when j stays queued, NameFull when j was
// parked and its last caller left before it got a place (j then ends).
// While it waits, j goes before the jobs nobody waits for.
//
// A caller is told at once to come back only when its result cannot come
// within MaxWait even at the best, with no contention: a caller sent away
// wrongly loses a whole retry delay (k3s agents: 5-10 s), one held wrongly
// is told at the next recheck (every MaxWait/16, 10-500 ms), which counts
// the contention measured meanwhile. A suspect or a parked job's caller is
// never told early: it waits out MaxWait in case spare capacity or room
// comes, which also slows a guesser down; a caller that waits out MaxWait
// pins j (see the package doc). The come-back time asks the caller back
// MaxWait/2 before the estimated completion, so that the retry waits for
// the result rather than arriving after it and an estimate off by up to
// MaxWait/2 either way costs no extra round.
func (s *Scheduler) Wait(ctx context.Context, j *Job) error {
	select {
	case <-j.done:
		return j.err
	default:
	}
	maxWait := s.cfg.MaxWait
	now := time.Now()
	deadline := now.Add(maxWait)
	s.mu.Lock()
	s.watchLocked(j, 1)
	leave := s.etaLocked(j, now, 1) > maxWait && !s.waitsOutLocked(j)
	s.mu.Unlock()

	every := recheckInterval(maxWait)
	var timer *time.Timer
	for !leave {
		if timer == nil {
			timer = time.NewTimer(min(every, maxWait))
			defer timer.Stop()
		}
		select {
		case <-j.done:
			s.unwatch(j)
			return j.err
		case <-ctx.Done():
			s.unwatch(j)
			return context.Cause(ctx)
		case <-timer.C:
		}
		now = time.Now()
		left := deadline.Sub(now)
		s.mu.Lock()
		leave = left <= 0 || s.etaLocked(j, now, s.est.slowdown) > left && !s.waitsOutLocked(j)
		s.mu.Unlock()
		timer.Reset(min(every, left))
	}
	// The estimate is made once the caller no longer counts as waiting,
	// as j may then be served after the jobs callers wait for.
	s.mu.Lock()
	defer s.mu.Unlock()
	if !now.Before(deadline) {
		s.pinLocked(j)
	}
	s.watchLocked(j, -1)
	if j.state == Done {
		return j.err
	}
	after := s.etaLocked(j, now, s.est.slowdown) - maxWait/2
	return &Overload{After: max(after, minAfter), Queued: true, Reason: "work queued"}
}

// recheckInterval is how often a waiting caller's estimate is checked.
func recheckInterval(maxWait time.Duration) time.Duration {
	return min(max(maxWait/16, 10*time.Millisecond), 500*time.Millisecond)
}

func (s *Scheduler) unwatch(j *Job) {
	s.mu.Lock()
	s.watchLocked(j, -1)
	s.mu.Unlock()
}

// watchLocked counts a caller that starts (delta 1) or stops (delta -1)
// waiting for j. A parked job's line place lasts only while a caller
// waits for it: when the last one leaves, j ends, so that a request that
// is not waited for holds nothing. A queued suspect left unwaited may
// give its place to its name's line.
func (s *Scheduler) watchLocked(j *Job, delta int) {
	j.waited = true
	nq := s.queue.of(j.name)
	if j.state != Queued || nq == nil {
		j.waiters += delta
		if j.state == Parked && j.waiters == 0 {
			after := s.etaLocked(j, time.Now(), s.est.slowdown)
			s.endLocked(j, &Overload{After: max(after, minAfter), NameFull: true,
				Reason: "node's queue full; left before it had room"})
		}
		return
	}
	was := nq.wanted()
	j.waiters += delta
	s.queue.waitedFor(j, was)
	if j.displaceable() {
		s.admitLocked(j.name, time.Now())
	}
}

// waitsOutLocked reports whether j's callers wait out MaxWait rather than
// being told early to come back: a queued suspect, or a parked job.
func (s *Scheduler) waitsOutLocked(j *Job) bool {
	return j.state == Parked || j.state == Queued && j.suspect()
}

// etaLocked estimates how long until j's computation has finished, with
// computations taking slow times their CPU time.
func (s *Scheduler) etaLocked(j *Job, now time.Time, slow float64) time.Duration {
	var eta time.Duration
	switch j.state {
	case Running:
		eta = s.est.duration(j.work, slow) - now.Sub(j.started)
	case Queued:
		eta = s.startLocked(s.queue.ahead(j), now, slow) + s.est.duration(j.work, slow)
	case Parked:
		// It gets a place once its name's first queued job has run.
		if nq := s.queue.of(j.name); nq != nil {
			eta = s.etaLocked(nq.jobs[0], now, slow) + s.est.duration(j.work, slow)
		}
	}
	return max(eta, minAfter)
}

// startLocked estimates when a job with ahead bytes of queued work before
// it gets a slot: the running jobs' remaining time plus the work ahead,
// spread over all slots.
func (s *Scheduler) startLocked(ahead int64, now time.Time, slow float64) time.Duration {
	if len(s.running) < s.cfg.Slots && ahead == 0 {
		return 0
	}
	var remaining time.Duration
	for r := range s.running {
		remaining += max(s.est.duration(r.work, slow)-now.Sub(r.started), 0)
	}
	return (remaining + s.est.duration(ahead, slow)) / time.Duration(s.cfg.Slots)
}
