package sched

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Config sizes a Scheduler. Every field but HonourAfter must be positive.
type Config struct {
	Slots    int           // jobs running at once
	MaxQueue int           // jobs queued or parked at most, pinned ones past their name's places apart; past it Join refuses
	PerName  int           // jobs one name may have queued, pinned ones apart
	MaxWait  time.Duration // longest Wait holds a caller
	// ReturnAfter is how long after being sent away a caller is expected
	// back at the soonest, when callers do not honour Overload.After
	// (k3s agents retry 5-10 s after a failed request). Jobs nobody waits
	// for run in the order their callers are expected back.
	ReturnAfter time.Duration
	// HonourAfter says that callers come back when Overload.After tells
	// them to, instead of ReturnAfter later.
	HonourAfter bool
}

// ErrClosed is the result of work the scheduler no longer takes or runs.
var ErrClosed = errors.New("scheduler closed")

// Overload tells a caller to come back later.
type Overload struct {
	After    time.Duration // when to come back; always positive
	Queued   bool          // the job stays queued; false: it was dropped or refused
	NameFull bool          // dropped: its name had no room and its caller left first
	Held     bool          // the caller was held on an estimate before it was sent away
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
	lines   map[string][]*Job // Parked jobs by name, oldest first
	parked  int               // Parked jobs in lines
	asks    askLog
	est     estimator
	warm    chan struct{} // closed once est is warm (warmSamples computations measured, or Calibrate)
}

// New returns an empty Scheduler.
func New(cfg Config) *Scheduler {
	return &Scheduler{
		cfg:     cfg,
		jobs:    make(map[Key]*Job),
		running: make(map[*Job]struct{}, cfg.Slots),
		queue:   newFairQueue(cfg.PerName),
		lines:   make(map[string][]*Job),
		asks:    newAskLog(),
		est:     newEstimator(cfg.Slots),
		warm:    make(chan struct{}),
	}
}

// Request describes the work a caller asks for.
type Request struct {
	Key  Key    // what is computed: callers with the same Key share one job
	Name string // the node name it is for, the unit of fairness
	Work int64  // its bytes of work, 128·r·N·p
	// Failing says whether the request is in doubt: Name has had
	// mismatches and no verified password, or the password does not give
	// the digest remembered for it. Such a first ask is a suspect (see the
	// package doc).
	Failing bool
	// Later creates the job Pending: its runner does I/O before it needs
	// a slot, and asks for one with Acquire.
	Later bool
}

// Join returns the job for r.Key, or creates one when there is none;
// created says which. A created job is granted a slot at once when one is
// free and nothing is queued, and is queued otherwise (unless r.Later);
// when its name's queue is full it is Parked instead: it waits in its
// name's line while a caller waits for it (see the package doc). The
// caller must then run it (Acquire, Release, Finish), detached from its
// own context. ctx is kept for the job (Job.Context): the context its
// runner derives its own from.
//
// Joining an existing job counts as asking for its password again. Join
// returns an *Overload when the queue as a whole has no room
// (Config.MaxQueue: queued jobs within their names' places and parked
// ones), and ErrClosed after Close.
func (s *Scheduler) Join(ctx context.Context, r Request) (j *Job, created bool, err error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, ErrClosed
	}
	key, name, work := r.Key, r.Name, r.Work
	if j := s.jobs[key]; j != nil {
		// The job remembers its own asks: the log may have forgotten them.
		n, _ := s.asks.record(name, key)
		j.asks = max(j.asks+1, n)
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
	// Jobs pinned over their names' places do not count: each cost a
	// caller a whole MaxWait, and guessers that wait must not fill the
	// queue for everyone.
	if s.queue.len-s.queue.over+s.parked >= s.cfg.MaxQueue {
		// Room for new work once the queue has drained.
		b := s.est.best()
		after := s.est.wait(s.startLocked(s.queue.work, now, b)+duration(work, b), now)
		return nil, false, &Overload{After: max(after, minAfter), Reason: "queue full"}
	}
	s.jobs[key] = j
	if nq := s.queue.of(name); nq != nil && len(nq.jobs) >= s.cfg.PerName {
		// The line is empty whenever the name has a displaceable job (see
		// admitLocked), so j takes that job's place or waits in line.
		if v := nq.displaceable(); v != nil {
			s.displaceLocked(v, now)
		} else {
			j.state = Parked
			s.lines[name] = append(s.lines[name], j)
			s.parked++
			return j, true, nil
		}
	}
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
	s.est.observe(j.work, wall, cpu, now, s.queue.len > 0)
	s.warmedLocked()
	if !j.heldAt.IsZero() && j.promise >= s.cfg.MaxWait/minPromise {
		s.est.promised(j.promise, now.Sub(j.heldAt))
	}
	j.state = Finishing
	s.releaseLocked(j, now)
}

// releaseLocked frees j's slot and grants free slots to the jobs in turn;
// each granted job leaves a place in its name's queue to that name's line.
func (s *Scheduler) releaseLocked(j *Job, now time.Time) {
	delete(s.running, j)
	for len(s.running) < s.cfg.Slots && s.queue.len > 0 {
		next := s.queue.pop()
		s.grantLocked(next, now)
		s.admitLocked(next.name, now)
	}
}

// admitLocked gives name's places to its line, oldest first: a free
// place, or the place of a suspect nobody waits for (displaced).
func (s *Scheduler) admitLocked(name string, now time.Time) {
	for len(s.lines[name]) > 0 {
		if nq := s.queue.of(name); nq != nil && len(nq.jobs) >= s.cfg.PerName {
			v := nq.displaceable()
			if v == nil {
				return
			}
			s.displaceLocked(v, now)
		}
		j := s.lines[name][0]
		s.unparkLocked(j)
		j.state = Queued
		s.queue.push(j)
	}
}

// displaceLocked ends queued v, whose place a parked or new job takes.
func (s *Scheduler) displaceLocked(v *Job, now time.Time) {
	// Nobody waits for v: the result is for its runner, and says when v
	// would have run.
	after := s.expectLocked(v, now)
	s.endLocked(v, &Overload{After: max(after, minAfter), Reason: "displaced by a password whose caller waits"})
}

// unparkLocked takes parked j out of its name's line.
func (s *Scheduler) unparkLocked(j *Job) {
	line := s.lines[j.name]
	if i := slices.Index(line, j); i >= 0 {
		line = slices.Delete(line, i, i+1)
		s.parked--
	}
	if len(line) == 0 {
		delete(s.lines, j.name)
	} else {
		s.lines[j.name] = line
	}
}

// pinLocked marks j as waited for a whole MaxWait: it is never displaced,
// and when parked it is queued at once, over its name's cap.
func (s *Scheduler) pinLocked(j *Job) {
	switch j.state {
	case Parked:
		s.unparkLocked(j)
		j.state = Queued
		s.queue.push(j)
		fallthrough
	case Queued:
		j.pinned = true
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

// finishLocked ends j and gives a queue place it held to its name's line.
func (s *Scheduler) finishLocked(j *Job, err error) {
	if s.endLocked(j, err) {
		s.admitLocked(j.name, time.Now())
	}
}

// endLocked ends j with err and reports whether it gave back a place in
// its name's queue.
func (s *Scheduler) endLocked(j *Job, err error) (freed bool) {
	switch j.state {
	case Done:
		return false
	case Pending:
		close(j.ready)
	case Parked:
		s.unparkLocked(j)
		close(j.ready)
	case Queued:
		s.queue.remove(j)
		close(j.ready)
		freed = true
	case Running:
		s.releaseLocked(j, time.Now())
	}
	j.state = Done
	if s.jobs[j.key] == j {
		delete(s.jobs, j.key)
	}
	j.err = err
	close(j.done)
	return freed
}

// Cheapen marks name's queued and parked jobs as costing no scrypt: its
// password was just verified, so they will be answered without it.
// Estimates stop counting them.
func (s *Scheduler) Cheapen(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue.cheapen(name)
	for _, j := range s.lines[name] {
		j.work = 0 // parked: not counted in queue.work yet
	}
}

// Load returns how many jobs hold a slot and how many wait for one
// (queued, or parked in their name's line).
func (s *Scheduler) Load() (running, queued int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running), s.queue.len + s.parked
}

// Jobs returns how many jobs are not Done.
func (s *Scheduler) Jobs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}

// Close makes Join refuse new work with ErrClosed. Jobs already queued or
// parked end when their runners' contexts do.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// Calibrate makes the estimates assume that work bytes take d of CPU
// time, as if measured, for callers (and tests) that know it better than
// the initial guess of 100 ms per 32 MiB. Later measurements still move it,
// and callers are held or sent away at once, as after a measurement.
func (s *Scheduler) Calibrate(d time.Duration, work int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.est.calibrate(float64(d) / float64(work))
	s.warmedLocked()
}

// warmedLocked wakes the callers waiting for the first measurement once
// there is one.
func (s *Scheduler) warmedLocked() {
	select {
	case <-s.warm:
	default:
		if s.est.warm() {
			close(s.warm)
		}
	}
}
