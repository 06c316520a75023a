package sched

import (
	"context"
	"time"
)

// Wait waits for j's result within ctx and Config.MaxWait (counted from
// the caller's arrival, see WithArrival) and returns it,
// or ctx's cause when ctx ends first, or an *Overload telling the caller
// to come back later: Queued when j stays queued, NameFull when j was
// parked and its last caller left before it got a place (j then ends).
// While it waits, j goes before the jobs nobody waits for.
//
// Whether the caller is held or sent away is decided once, when it comes,
// with the whole queue in view: it is held when its expected wait (the
// estimate at the best times the margin the estimates' recent errors call
// for) is within MaxWait, and sent away at once otherwise. A caller sent
// away loses a whole retry delay (k3s agents: 5-10 s), and one held and
// then sent away loses that delay and the time it was held, so a held
// caller stays held unless its result cannot come before MaxWait ends even
// at the best (every computation taking the least CPU time of the last
// ones); that is checked every MaxWait/16 (10 ms to 1 s). Before
// computations have been measured every estimate is a guess, so a caller
// that comes then is held and decided on as the first measurements come.
//
// A suspect or a parked job's caller is never sent away early: it waits
// out MaxWait in case spare capacity or room comes, which also slows a
// guesser down; a caller that waits out MaxWait pins j (see the package
// doc). The come-back time asks the caller back MaxWait/2 before the
// estimated completion, so that the retry waits for the result rather than
// arriving after it and an estimate off by up to MaxWait/2 either way
// costs no extra round. The caller is then expected back after that time
// (Config.HonourAfter) or after Config.ReturnAfter, and j waits in that
// order among the jobs nobody waits for.
func (s *Scheduler) Wait(ctx context.Context, j *Job) error {
	select {
	case <-j.done:
		return j.err
	default:
	}
	maxWait := s.cfg.MaxWait
	start := time.Now()
	now, deadline := start, start.Add(maxWait)
	s.mu.Lock()
	s.watchLocked(j, 1)
	if !s.waitsOutLocked(j) {
		// Its client's timeout started when it came (see WithArrival).
		if t, ok := Arrival(ctx); ok && t.Before(now) {
			deadline = t.Add(maxWait)
		}
	}
	decided := s.est.warm()
	held, leave := false, !now.Before(deadline)
	if decided && !leave {
		held, leave = s.decideLocked(j, now, deadline.Sub(now))
	}
	warm := s.warm
	s.mu.Unlock()

	every := recheckInterval(maxWait)
	var timer *time.Timer
	for !leave {
		if timer == nil {
			timer = time.NewTimer(min(every, maxWait))
			defer timer.Stop()
		}
		if decided {
			warm = nil
		}
		select {
		case <-j.done:
			s.unwatch(j)
			return j.err
		case <-ctx.Done():
			s.unwatch(j)
			return context.Cause(ctx)
		case <-timer.C:
		case <-warm:
		}
		now = time.Now()
		left := deadline.Sub(now)
		s.mu.Lock()
		switch {
		case left <= 0:
			leave = true
		case !decided && s.est.warm():
			decided = true
			held, leave = s.decideLocked(j, now, left)
		case decided && !s.waitsOutLocked(j):
			// Only what cannot be: at the best, j's result comes too late.
			leave = s.hopelessLocked(j, now, left)
		}
		s.mu.Unlock()
		timer.Reset(min(every, max(left, 0)))
	}
	// The estimate is made once the caller no longer counts as waiting,
	// as j may then be served after the jobs callers wait for.
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(start) >= maxWait {
		s.pinLocked(j)
	}
	s.watchLocked(j, -1)
	if j.state == Done {
		return j.err
	}
	after := s.sendAwayLocked(j, now)
	return &Overload{After: after, Queued: true, Held: held, Reason: "work queued"}
}

// decideLocked decides whether the caller of j that came at now is held
// (for at most left) or sent away at once; held says it is held on an
// estimate, and then j remembers the wait promised, so that the
// estimate's error can be measured when j's computation ends.
func (s *Scheduler) decideLocked(j *Job, now time.Time, left time.Duration) (held, leave bool) {
	if s.waitsOutLocked(j) {
		return false, false
	}
	best := s.etaLocked(j, now, s.est.best())
	if s.est.wait(best, now) > left {
		return false, true
	}
	if j.state == Queued && j.heldAt.IsZero() {
		j.heldAt, j.promise = now, best
	}
	return true, false
}

// sendAwayLocked records that j's caller is sent away at now and returns
// when to tell it to come back: MaxWait/2 before j's estimated
// completion. j's caller is then expected back (see Job.back) that much
// later when callers honour it, else Config.ReturnAfter later; j's
// estimate counts it after the jobs whose callers are expected back
// sooner, and, when callers honour it, after every job already sent away.
func (s *Scheduler) sendAwayLocked(j *Job, now time.Time) time.Duration {
	if s.cfg.HonourAfter {
		j.back = now.Add(farFuture)
	} else {
		j.back = now.Add(s.cfg.ReturnAfter)
	}
	after := max(s.expectLocked(j, now)-s.cfg.MaxWait/2, minAfter)
	if s.cfg.HonourAfter {
		j.back = now.Add(after)
	}
	return after
}

// farFuture is later than any caller is expected back.
const farFuture = 100 * 365 * 24 * time.Hour

type arrivalKey struct{}

// WithArrival returns a copy of ctx saying that its request came at t:
// its client started waiting then (when the connection was accepted, say,
// before a TLS handshake), so that Wait holds its caller at most MaxWait
// from t. Callers that wait out MaxWait (suspects, parked jobs) wait it
// out from their call, whatever t says: only a whole MaxWait spent waiting
// pins a job.
func WithArrival(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, arrivalKey{}, t)
}

// hopelessLocked reports whether j's result cannot come within left even
// at the best: every computation taking the least CPU time per byte of the
// last ones. Thousands of callers check this every recheckInterval, so
// the whole queue's work, known at once, is tried first: when even that
// comes in time, so does j's.
func (s *Scheduler) hopelessLocked(j *Job, now time.Time, left time.Duration) bool {
	fastest := s.est.fastest()
	if j.state == Queued && s.startLocked(s.queue.work, now, fastest)+duration(j.work, fastest) <= left {
		return false
	}
	return s.etaLocked(j, now, fastest) > left
}

// Arrival returns the time WithArrival recorded in ctx, if any.
func Arrival(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(arrivalKey{}).(time.Time)
	return t, ok
}

// recheckInterval is how often a waiting caller's estimate is checked.
func recheckInterval(maxWait time.Duration) time.Duration {
	return min(max(maxWait/16, 10*time.Millisecond), time.Second)
}

// unwatch stops counting a caller that left without an answer (its
// context ended): it is expected back as one sent away.
func (s *Scheduler) unwatch(j *Job) {
	s.mu.Lock()
	s.watchLocked(j, -1)
	// Its caller gave up (a client timeout, say) and retries as agents do.
	j.back = time.Now().Add(s.cfg.ReturnAfter)
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
			after := s.expectLocked(j, time.Now())
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
// computations taking perByte ns per byte of work on a slot.
func (s *Scheduler) etaLocked(j *Job, now time.Time, perByte float64) time.Duration {
	var eta time.Duration
	switch j.state {
	case Running:
		eta = duration(j.work, perByte) - now.Sub(j.started)
	case Queued:
		eta = s.startLocked(s.queue.ahead(j), now, perByte) + duration(j.work, perByte)
	case Parked:
		// It gets a place once its name's first queued job has run.
		if nq := s.queue.of(j.name); nq != nil {
			eta = s.etaLocked(nq.jobs[0], now, perByte) + duration(j.work, perByte)
		}
	}
	return max(eta, minAfter)
}

// expectLocked is how long j's computation is expected to take to
// finish from now: its estimate at the best, as the estimator expects it
// to go.
func (s *Scheduler) expectLocked(j *Job, now time.Time) time.Duration {
	return s.est.wait(s.etaLocked(j, now, s.est.best()), now)
}

// startLocked estimates when a job with ahead bytes of queued work before
// it gets a slot: the running jobs' remaining time plus the work ahead,
// spread over all slots.
func (s *Scheduler) startLocked(ahead int64, now time.Time, perByte float64) time.Duration {
	if len(s.running) < s.cfg.Slots && ahead == 0 {
		return 0
	}
	var remaining time.Duration
	for r := range s.running {
		remaining += max(duration(r.work, perByte)-now.Sub(r.started), 0)
	}
	return (remaining + duration(ahead, perByte)) / time.Duration(s.cfg.Slots)
}
