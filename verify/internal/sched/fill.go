package sched

import "time"

// fillWait is a free slot's wait for a full batch: a burst's jobs come one
// by one, and a batch of one costs up to Lanes times more per hash. The
// rule (fillEndLocked): a free slot takes the batch of j, the job in
// turn, at once when
//
//   - no burst is under way: no other job could join j's batch now, and
//     the job created just before j could not join one later: it is
//     done, computed (finishing), of another Class, or was created a full
//     batch's estimated time or more before j;
//   - or the batch it would take now is full: Config.Lanes jobs, or as
//     many as Config.MaxBatchWork holds. Jobs of another Class, or of a
//     name already in it, do not count;
//   - or j has been queued for its fill time (Scheduler.fillTime).
//
// Otherwise the timer, armed only while a free slot waits, applies the
// rule again when j's fill time ends. Scheduler.mu guards it.
type fillWait struct {
	timer *time.Timer
	at    time.Time // when timer fires; zero while disarmed
	armed uint64    // counts the armings; a firing names its own
}

// arm makes the timer call fire at at with the arming's number, unless
// it is armed for at already.
func (f *fillWait) arm(at, now time.Time, fire func(armed uint64)) {
	if f.at.Equal(at) {
		return
	}
	f.disarm()
	f.armed++
	armed := f.armed
	f.at = at
	f.timer = time.AfterFunc(at.Sub(now), func() { fire(armed) })
}

// disarm stops the timer.
func (f *fillWait) disarm() {
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	f.at = time.Time{}
}

// filled is s.fill's firing for its arming armed: unless it was armed
// again or disarmed since, the free slots look at the queue again.
func (s *Scheduler) filled(armed uint64) {
	now := time.Now()
	s.mu.Lock()
	defer s.unlock()
	if f := &s.fill; armed == f.armed && !f.at.IsZero() {
		f.timer, f.at = nil, time.Time{}
		s.dispatchLocked(now)
	}
}

// fillEndLocked returns when a free slot takes the batch of j, the job
// in turn, by fillWait's rule: now, or the end of j's fill time.
func (s *Scheduler) fillEndLocked(j *Job, now time.Time) time.Time {
	full := s.fullLocked(j)
	if n := s.batchLenLocked(full); n >= full || n == 1 && !j.burst {
		return now
	}
	return j.queuedAt.Add(s.fillTime(j))
}

// burstLocked reports whether j, created at now, comes in a burst (see
// fillWait).
func (s *Scheduler) burstLocked(j *Job, now time.Time) bool {
	if last := s.jobs[s.lastKey]; last == nil || last.class != j.class || last.state == finishing {
		return false
	}
	batch := duration(j.work*int64(s.fullLocked(j)), s.est.nsPerByte)
	return now.Sub(s.lastAt) < batch
}

// fullLocked is how many jobs like j a batch holds: Config.Lanes, or
// fewer when Config.MaxBatchWork bounds it (at least one).
func (s *Scheduler) fullLocked(j *Job) int {
	full := s.cfg.Lanes
	if s.cfg.MaxBatchWork > 0 && j.work > 0 {
		full = int(min(int64(full), max(s.cfg.MaxBatchWork/j.work, 1)))
	}
	return full
}

// batchLenLocked returns how many jobs batchLocked would take now, up to
// full, at least: it walks the queue in turn with batchLocked's rule
// (joinsLocked) and, once it took a name with more jobs queued, stops
// past the wanted names, where that name may come back in turn.
func (s *Scheduler) batchLenLocked(full int) int {
	var b batch
	again := false // a name taken has more jobs queued
	s.queue.walk(func(j *Job) bool {
		if again && j.nq.order != &s.queue.wanted || len(b.jobs) == full || !s.joinsLocked(&b, j) {
			return false
		}
		b.jobs = append(b.jobs, j)
		b.work += j.work
		n, _ := j.nq.jobs.len()
		again = again || n > 1
		return true
	})
	return len(b.jobs)
}

// fillTime is how long j, first in turn, waits for a full batch at most:
// a quarter of its estimated time in one, at most maxFill, none below
// minFill.
func (s *Scheduler) fillTime(j *Job) time.Duration {
	d := min(duration(j.work, s.est.nsPerByte)/4, maxFill)
	if d < minFill {
		return 0
	}
	return d
}

// maxFill bounds fillTime: a fifth of a hash alone at k3s's parameters.
// A wait below minFill is not worth a timer: a loaded machine wakes a
// goroutine that late.
const (
	maxFill = 10 * time.Millisecond
	minFill = time.Millisecond
)
