package sched

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Config sizes a Scheduler. Every field must be positive.
type Config struct {
	Slots    int           // jobs running at once
	MaxQueue int           // jobs queued at most; past it Join refuses
	PerName  int           // jobs one name may have queued
	MaxWait  time.Duration // longest Wait holds a caller
}

// ErrClosed is the result of work the scheduler no longer takes or runs.
var ErrClosed = errors.New("scheduler closed")

// Overload tells a caller to come back later.
type Overload struct {
	After    time.Duration // when to come back; always positive
	Queued   bool          // the job stays queued; false: it was refused
	NameFull bool          // refused because its name had no room
	Reason   string        // what happened, for the error message
}

func (o *Overload) Error() string { return "overloaded (" + o.Reason + ")" }

// minAfter keeps every estimate positive.
const minAfter = time.Millisecond

// Scheduler runs at most Config.Slots jobs at once and queues the rest
// (see the package doc for the policy). It is safe for concurrent use.
type Scheduler struct {
	cfg Config

	mu      sync.Mutex // guards everything below; never held while calling out
	closed  bool
	jobs    map[Key]*Job      // every job not Done, by key
	running map[*Job]struct{} // jobs holding a slot
	queue   fairQueue
	asks    askLog
	est     estimator
}

// New returns an empty Scheduler.
func New(cfg Config) *Scheduler {
	return &Scheduler{
		cfg:     cfg,
		jobs:    make(map[Key]*Job),
		running: make(map[*Job]struct{}, cfg.Slots),
		queue:   newFairQueue(),
		asks:    newAskLog(),
		est:     newEstimator(),
	}
}

// Request describes the work a caller asks for.
type Request struct {
	Key  Key    // what is computed: callers with the same Key share one job
	Name string // the node name it is for, the unit of fairness
	Work int64  // its bytes of work, 128·r·N·p
	// Failing says whether Name has had mismatches and no verified
	// password (see the package doc's suspects).
	Failing bool
	// Later creates the job Pending: its runner does I/O before it needs
	// a slot, and asks for one with Acquire.
	Later bool
}

// Join returns the job for r.Key, or creates one when there is none;
// created says which. A created job is granted a slot at once when one is
// free and nothing is queued, and is queued otherwise (unless r.Later);
// the caller must then run it (Acquire, Release, Finish), detached from
// its own context. ctx is kept for the job (Job.Context): the context its
// runner derives its own from.
//
// Joining an existing job counts as asking for its password again. Join
// returns an *Overload when the queue, or the name's share of it, has no
// room, and ErrClosed after Close.
func (s *Scheduler) Join(ctx context.Context, r Request) (j *Job, created bool, err error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, ErrClosed
	}
	key, name, work := r.Key, r.Name, r.Work
	if j := s.jobs[key]; j != nil {
		j.asks, _ = s.asks.record(name, key)
		if j.state == Queued {
			s.queue.of(name).sort()
		}
		return j, false, nil
	}
	j = &Job{key: key, name: name, ctx: ctx, ready: make(chan struct{}), done: make(chan struct{}),
		work: work, wary: r.Failing || s.busyLocked(name), queuedAt: now}
	j.asks, j.arrived = s.asks.record(name, key)
	if r.Later {
		j.state = Pending
		s.jobs[key] = j
		return j, true, nil
	}
	if len(s.running) < s.cfg.Slots && s.queue.len == 0 {
		s.jobs[key] = j
		s.grantLocked(j, now)
		return j, true, nil
	}
	if s.queue.len >= s.cfg.MaxQueue {
		// Room for new work once the queue has drained.
		after := s.startLocked(s.queue.work, now, s.est.slowdown) + s.est.duration(work, s.est.slowdown)
		return nil, false, &Overload{After: max(after, minAfter), Reason: "queue full"}
	}
	if nq := s.queue.of(name); nq != nil && len(nq.jobs) >= s.cfg.PerName {
		last := nq.jobs[len(nq.jobs)-1]
		if !j.outranks(last) {
			// Room for this name once its first queued job has run.
			after := s.etaLocked(nq.jobs[0], now, s.est.slowdown)
			return nil, false, &Overload{After: max(after, minAfter), NameFull: true, Reason: "node's queue full"}
		}
		s.queue.remove(last)
		defer func() {
			// Come back when j, which took its place, is expected done.
			after := s.etaLocked(j, now, s.est.slowdown)
			s.finishLocked(last, &Overload{After: max(after, minAfter), Reason: "displaced by a password asked for more often"})
		}()
	}
	s.jobs[key] = j
	j.state = Queued
	s.queue.push(j)
	return j, true, nil
}

// Context returns the context j was created with.
func (j *Job) Context() context.Context { return j.ctx }

// busyLocked reports whether name has work queued or running.
func (s *Scheduler) busyLocked(name string) bool {
	if s.queue.of(name) != nil {
		return true
	}
	for r := range s.running {
		if r.name == name {
			return true
		}
	}
	return false
}

func (s *Scheduler) grantLocked(j *Job, now time.Time) {
	j.state, j.started = Running, now
	s.running[j] = struct{}{}
	close(j.ready)
}

// Acquire waits until j holds a slot and returns how long j was queued.
// A Pending job asks for its slot now: it is granted one at once when one
// is free and nothing is queued, and queued otherwise (whatever the room:
// Join checked it). When j ended first (displaced) Acquire returns j's
// result; when ctx ends first, j ends with ctx's cause, which is
// returned. On a nil error the caller must call Release or Finish.
func (s *Scheduler) Acquire(ctx context.Context, j *Job) (queued time.Duration, err error) {
	s.mu.Lock()
	if j.state == Pending {
		now := time.Now()
		j.queuedAt = now
		if len(s.running) < s.cfg.Slots && s.queue.len == 0 {
			s.grantLocked(j, now)
		} else {
			j.state = Queued
			s.queue.push(j)
		}
	}
	s.mu.Unlock()
	select {
	case <-j.ready:
		s.mu.Lock()
		defer s.mu.Unlock()
		if j.state == Done {
			return 0, j.err
		}
		return j.started.Sub(j.queuedAt), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.state == Done {
		return 0, j.err
	}
	err = context.Cause(ctx)
	s.finishLocked(j, err)
	return 0, err
}

// Release gives j's slot to the next job in turn; j is then Finishing.
// wall and cpu are how long its computation took on the wall clock and
// in CPU time (0 if unknown, or if it did not compute): they teach the
// estimate.
func (s *Scheduler) Release(j *Job, wall, cpu time.Duration) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.state != Running {
		return
	}
	s.est.observe(j.work, wall, cpu)
	j.state = Finishing
	s.releaseLocked(j, now)
}

// releaseLocked frees j's slot and grants free slots to the jobs in turn.
func (s *Scheduler) releaseLocked(j *Job, now time.Time) {
	delete(s.running, j)
	for len(s.running) < s.cfg.Slots && s.queue.len > 0 {
		s.grantLocked(s.queue.pop(), now)
	}
}

// Finish publishes err as j's result: j leaves the scheduler (giving back
// its slot or queue place if it still holds one) and every waiter gets
// err. Finishing a job twice keeps the first result.
func (s *Scheduler) Finish(j *Job, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked(j, err)
}

func (s *Scheduler) finishLocked(j *Job, err error) {
	switch j.state {
	case Done:
		return
	case Pending:
		close(j.ready)
	case Queued:
		s.queue.remove(j)
		close(j.ready)
	case Running:
		s.releaseLocked(j, time.Now())
	}
	j.state = Done
	if s.jobs[j.key] == j {
		delete(s.jobs, j.key)
	}
	j.err = err
	close(j.done)
}

// Cheapen marks name's queued jobs as costing no scrypt: its password was
// just verified, so they will be answered without it. Estimates stop
// counting them.
func (s *Scheduler) Cheapen(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue.cheapen(name)
}

// Load returns how many jobs hold a slot and how many are queued.
func (s *Scheduler) Load() (running, queued int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running), s.queue.len
}

// Jobs returns how many jobs are not Done.
func (s *Scheduler) Jobs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}

// Close makes Join refuse new work with ErrClosed. Jobs already queued
// end when their runners' contexts do.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// Calibrate makes the estimates assume that work bytes take d of CPU
// time, as if measured, for callers (and tests) that know it better than
// the initial guess of 100 ms per 32 MiB. Later measurements still move it.
func (s *Scheduler) Calibrate(d time.Duration, work int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.est.nsPerByte = float64(d) / float64(work)
}
