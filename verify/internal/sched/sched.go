package sched

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Config sizes a Scheduler. Slots, MaxQueue, PerName, MaxWait and Lanes
// must be positive; Run is required, and Prepare for Request.Later.
type Config struct {
	Slots    int           // batches running at once
	Lanes    int           // jobs of one Class a batch takes at most
	MaxQueue int           // jobs pending, queued or parked at most, earned ones past their name's places apart; past it Join refuses
	PerName  int           // places one name has: its jobs pending or queued, earned ones apart
	MaxWait  time.Duration // longest Wait holds a caller, from its arrival
	// MaxBatchWork bounds a batch's work (the sum of Request.Work), as a
	// batch holds its jobs' memory at once; a job alone may pass it. 0: none.
	MaxBatchWork int64
	// WorkTimeout ends a job not running by then with
	// context.DeadlineExceeded, and its context. 0: none.
	WorkTimeout time.Duration
	// ReturnAfter is how soon a shed caller is expected back, unless
	// HonourAfter says it comes when Overload.After tells it (k3s agents
	// retry 5-10 s after a failure, whatever they are told).
	ReturnAfter time.Duration
	HonourAfter bool

	// Run computes a batch, 1 to Lanes running jobs of one Class, on its
	// slot's goroutine. It ends each job with Finish, or Hold when its
	// work goes on off the slot, and returns how many it computed and
	// their wall and CPU time (0 if unknown), for the estimates.
	Run func(jobs []*Job) (computed int, wall, cpu time.Duration)
	// Prepare runs a job created Later once it holds a place, on a
	// goroutine of its own; it ends with Submit or Finish.
	Prepare func(j *Job)
}

// ErrClosed is the result of work after Close, and the cause that ends
// the contexts of the jobs it cut short.
var ErrClosed = errors.New("scheduler closed")

// ErrPanic is wrapped by the result of the jobs a panicking Run left.
var ErrPanic = errors.New("panic in a batch's work")

// Overload tells a caller to come back later.
type Overload struct {
	After  time.Duration // when to come back; always positive
	Queued bool          // the job stays queued; false: it was dropped or refused
	Held   bool          // the caller was held on an estimate before it was shed
	Reason string        // what happened, for the error message
}

func (o *Overload) Error() string { return "overloaded (" + o.Reason + ")" }

// minAfter keeps every estimate positive.
const minAfter = time.Millisecond

// Scheduler runs at most Config.Slots batches at once and queues the
// rest, as the package doc says. It is safe for concurrent use.
type Scheduler struct {
	cfg Config

	mu       sync.Mutex // guards everything below; never held while calling out
	closed   bool
	jobs     map[Key]*Job          // every job not done, by key
	names    map[string]*nameQueue // names with jobs pending, queued, parked or running
	running  map[*batch]struct{}   // batches holding a slot
	inSlots  int                   // jobs in them still running (not held or finished)
	queue    fairQueue
	parked   int   // jobs in lines
	pending  int   // jobs pending
	idleWork int64 // the work of the parked and pending jobs
	asks     askLog
	est      estimator
	warm     chan struct{} // closed once est is warm (see estimator.warm)
	toStart  []*batch      // batches to start once the lock is released
	toPrep   []*Job        // jobs to prepare once the lock is released
	fill     fillWait      // a free slot's wait for a full batch
	lastKey  Key           // the key of the job created last
	lastAt   time.Time     // when it was created
	routines sync.WaitGroup
}

// New returns an empty Scheduler.
func New(cfg Config) *Scheduler {
	return &Scheduler{
		cfg:     cfg,
		jobs:    make(map[Key]*Job),
		names:   make(map[string]*nameQueue),
		running: make(map[*batch]struct{}, cfg.Slots),
		queue:   fairQueue{perName: cfg.PerName},
		asks:    newAskLog(),
		est:     newEstimator(cfg.Slots),
		warm:    make(chan struct{}),
	}
}

// Reshape sets Config.Slots, Lanes and MaxBatchWork: running batches keep
// their jobs, free slots take the next by the new values.
func (s *Scheduler) Reshape(slots, lanes int, maxBatchWork int64) {
	now := time.Now()
	s.mu.Lock()
	defer s.unlock()
	s.cfg.Slots, s.cfg.Lanes, s.cfg.MaxBatchWork, s.est.slots = slots, lanes, maxBatchWork, slots
	s.est.slow = s.est.slowdown() // kept for the slots there were
	s.dispatchLocked(now)
}

// Request describes the work a caller asks for.
type Request struct {
	Key   Key    // what is computed: callers with the same Key share one job
	Name  string // the node name it is for, the unit of fairness
	Work  int64  // its bytes of work, 128·r·N·p
	Class Class  // jobs of one Class may share a batch
	Task  any    // for Run and Prepare (Job.Task)
	// Doubted: Name is failing, or the password does not give the digest
	// remembered for it. Such a first ask is a suspect.
	Doubted bool
	Later   bool // the job is pending: Config.Prepare runs before it is queued
}

// unlock releases s.mu and starts the batches and preparations the
// locked section scheduled.
func (s *Scheduler) unlock() {
	bs, ps := s.toStart, s.toPrep
	s.toStart, s.toPrep = nil, nil
	s.mu.Unlock()
	for _, b := range bs {
		go s.runSlot(b)
	}
	for _, j := range ps {
		go func() {
			defer s.routines.Done()
			s.cfg.Prepare(j)
		}()
	}
}

// Join returns the job for r.Key, or creates one (created): queued,
// pending with r.Later, or parked in its name's line (see "Admission" in
// the package doc). It runs detached from ctx, whose values it keeps.
// Joining a job counts as asking for its password again. Join returns an
// *Overload when the whole queue has no room, and ErrClosed after Close.
func (s *Scheduler) Join(ctx context.Context, r Request) (j *Job, created bool, err error) {
	now := time.Now()
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return nil, false, ErrClosed
	}
	if j := s.jobs[r.Key]; j != nil {
		n, _ := s.asks.record(r.Name, r.Key) // the log may have forgotten j's asks
		s.changeLocked(j, func() { j.asks = max(j.asks+1, n) })
		return j, false, nil
	}
	nq := s.nameLocked(r.Name)
	if s.roomLocked() <= 0 {
		v, _ := s.queue.disp.last()
		if v == nil { // room once the queue has drained
			b := s.est.nsPerByte
			after := s.est.wait(s.startLocked(s.waitingWorkLocked(), now, b)+duration(r.Work, b), now)
			s.forgetLocked(nq)
			return nil, false, &Overload{After: max(after, minAfter), Reason: "queue full"}
		}
		s.displaceLocked(v, now)
	}
	j = s.newJobLocked(ctx, r, nq, now)
	if nq.places() >= s.cfg.PerName {
		if v := nq.displaceable(); v != nil {
			s.displaceLocked(v, now)
		} else {
			j.state = parked
			j.line = nq.line.PushBack(j)
			s.parked++
			s.idleWork += j.work
			return j, true, nil
		}
	}
	s.placeLocked(nq, j, now)
	return j, true, nil
}

// newJobLocked makes the job r asks for and enters it in the map.
func (s *Scheduler) newJobLocked(ctx context.Context, r Request, nq *nameQueue, now time.Time) *Job {
	jctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopTimeout := context.CancelFunc(func() {})
	if s.cfg.WorkTimeout > 0 {
		jctx, stopTimeout = context.WithTimeout(jctx, s.cfg.WorkTimeout)
	}
	j := &Job{key: r.Key, name: r.Name, nq: nq, class: r.Class, task: r.Task, ctx: jctx, cancel: cancel,
		stopTimeout: stopTimeout, done: make(chan struct{}), work: r.Work, created: now, later: r.Later,
		doubtedOrBusy: r.Doubted || nq.places() > 0 || nq.running > 0}
	j.stopExpire = context.AfterFunc(jctx, func() { s.expire(j) })
	j.asks, j.arrived = s.asks.record(r.Name, r.Key)
	j.burst = s.burstLocked(j, now)
	s.lastKey, s.lastAt = r.Key, now
	s.jobs[r.Key] = j
	return j
}

// nameLocked returns name's queue, making it when it has none.
func (s *Scheduler) nameLocked(name string) *nameQueue {
	nq := s.names[name]
	if nq == nil {
		s.queue.seq++
		nq = &nameQueue{name: name, ring: s.queue.seq}
		s.names[name] = nq
	}
	return nq
}

// forgetLocked drops nq once nothing of it is left.
func (s *Scheduler) forgetLocked(nq *nameQueue) {
	if nq.idle() && s.names[nq.name] == nq {
		delete(s.names, nq.name)
	}
}

// roomLocked is how many more jobs the queue takes (earned jobs past
// their places do not count: guessers that wait must not fill it).
func (s *Scheduler) roomLocked() int {
	return s.cfg.MaxQueue - (s.queue.len + s.pending - s.queue.over + s.parked)
}

// waitingWorkLocked is the work of the jobs queued, pending and parked.
func (s *Scheduler) waitingWorkLocked() int64 { return s.queue.work + s.idleWork }

// placeLocked gives j a place: queued, or pending if created Later.
func (s *Scheduler) placeLocked(nq *nameQueue, j *Job, now time.Time) {
	if j.later {
		j.state = pending
		nq.pending++
		s.pending++
		s.idleWork += j.work
		s.queue.settle(nq, false)
		s.routines.Add(1)
		s.toPrep = append(s.toPrep, j)
		return
	}
	s.queueLocked(j, now)
}

// queueLocked queues j for a slot.
func (s *Scheduler) queueLocked(j *Job, now time.Time) {
	j.state, j.queuedAt = queued, now
	s.queue.push(j.nq, j)
	s.dispatchLocked(now)
}

// Submit queues pending j, its preparation done, unless j ended meanwhile.
func (s *Scheduler) Submit(j *Job) {
	now := time.Now()
	s.mu.Lock()
	defer s.unlock()
	if j.state == pending {
		j.nq.pending--
		s.pending--
		s.idleWork -= j.work
		s.queueLocked(j, now)
	}
}

// dispatchLocked gives each free slot the batch it takes now, if any.
func (s *Scheduler) dispatchLocked(now time.Time) {
	for b := s.nextBatchLocked(now); b != nil; b = s.nextBatchLocked(now) {
		s.routines.Add(1)
		s.toStart = append(s.toStart, b)
	}
}

// nextBatchLocked takes a slot and its batch when a slot is free and the
// job in turn starts now (fillWait), or returns nil.
func (s *Scheduler) nextBatchLocked(now time.Time) *batch {
	if s.closed || len(s.running) >= s.cfg.Slots || s.queue.len == 0 {
		s.fill.disarm()
		return nil
	}
	if at := s.fillEndLocked(s.queue.next(), now); now.Before(at) {
		s.fill.arm(at, now, s.filled)
		return nil
	}
	return s.batchLocked(now)
}

// batchLocked takes a slot for the job whose turn it is and the jobs
// after it in turn that may join it (joinsLocked), up to Config.Lanes.
func (s *Scheduler) batchLocked(now time.Time) *batch {
	b := &batch{started: now}
	s.running[b] = struct{}{}
	for len(b.jobs) < s.cfg.Lanes {
		j := s.queue.next()
		if j == nil || !s.joinsLocked(b, j) {
			break
		}
		s.queue.pop()
		j.state, j.started, j.batch = running, now, b
		b.jobs = append(b.jobs, j)
		b.work += j.work
		s.inSlots++
		nq := j.nq
		nq.running++
		s.queue.settle(nq, false)
		s.admitLocked(nq, now)
	}
	return b
}

// joinsLocked reports whether j, next in turn, joins b ("Order" in the
// package doc).
func (s *Scheduler) joinsLocked(b *batch, j *Job) bool {
	if len(b.jobs) == 0 {
		return true
	}
	inBatch := slices.ContainsFunc(b.jobs, func(o *Job) bool { return o.name == j.name })
	return j.class == b.jobs[0].class && !inBatch &&
		(s.cfg.MaxBatchWork <= 0 || b.work+j.work <= s.cfg.MaxBatchWork)
}

// runSlot runs b and the batches its slot takes next.
func (s *Scheduler) runSlot(b *batch) {
	defer s.routines.Done()
	for b != nil {
		computed, wall, cpu, err := s.run(b)
		b = s.endBatch(b, computed, wall, cpu, err)
	}
}

// run calls Config.Run, a panic included.
func (s *Scheduler) run(b *batch) (computed int, wall, cpu time.Duration, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, p)
		}
	}()
	computed, wall, cpu = s.cfg.Run(b.jobs)
	return computed, wall, cpu, nil
}

// errUnfinished ends a job its batch's Run returned without finishing.
var errUnfinished = errors.New("batch ended without a result for the job")

// endBatch gives b's slot back, teaches the estimates, ends the jobs Run
// left running with err (or errUnfinished), and returns the slot's next
// batch, if any.
func (s *Scheduler) endBatch(b *batch, computed int, wall, cpu time.Duration, err error) *batch {
	now := time.Now()
	s.mu.Lock()
	defer s.unlock()
	if computed > 0 && s.est.firstOfKind(b.jobs[0].class, computed) {
		wall, cpu = 0, 0 // see "Estimates" in the package doc
	}
	s.est.observe(b.work, len(b.jobs), wall, cpu, now, s.queue.len > 0)
	s.warmedLocked()
	if err == nil {
		err = errUnfinished
	}
	for _, j := range b.jobs {
		if !j.heldAt.IsZero() && j.promise >= s.cfg.MaxWait/minPromise {
			s.est.promised(j.promise, now.Sub(j.heldAt))
		}
		if j.state == running {
			s.endLocked(j, err)
		}
		j.batch = nil
		nq := j.nq
		nq.running--
		s.forgetLocked(nq)
	}
	delete(s.running, b)
	next := s.nextBatchLocked(now)
	s.dispatchLocked(now)
	return next
}

// Hold makes running j finishing: its work goes on off the slot, and its
// runner calls Finish.
func (s *Scheduler) Hold(j *Job) {
	s.mu.Lock()
	defer s.unlock()
	if j.state == running {
		j.state = finishing
		s.inSlots--
	}
}

// admitLocked gives nq's free places, and those of its displaceable
// jobs, to its line, oldest first.
func (s *Scheduler) admitLocked(nq *nameQueue, now time.Time) {
	for nq.line.Len() > 0 {
		if nq.places() >= s.cfg.PerName {
			v := nq.displaceable()
			if v == nil {
				return
			}
			s.displaceLocked(v, now)
		}
		j := nq.line.Front().Value.(*Job)
		s.unparkLocked(nq, j)
		s.placeLocked(nq, j, now)
	}
}

// displaceLocked ends queued v, whose place a parked or new job takes.
func (s *Scheduler) displaceLocked(v *Job, now time.Time) {
	after := s.expectedWaitLocked(v, now) // for a caller coming back
	s.endLocked(v, &Overload{After: max(after, minAfter), Reason: "displaced by a password whose caller waits"})
	s.forgetLocked(v.nq)
}

// unparkLocked takes parked j out of its name's line.
func (s *Scheduler) unparkLocked(nq *nameQueue, j *Job) {
	nq.line.Remove(j.line)
	j.line = nil
	s.parked--
	s.idleWork -= j.work
}

// earnLocked marks j as waited out: never displaced, and queued at once
// if parked.
func (s *Scheduler) earnLocked(j *Job) {
	switch j.state {
	case parked:
		nq := j.nq
		s.unparkLocked(nq, j)
		j.earned = true
		s.placeLocked(nq, j, time.Now())
	case queued, pending:
		s.changeLocked(j, func() { j.earned = true })
	}
}

// changeLocked applies f to j, whose queue order f may change.
func (s *Scheduler) changeLocked(j *Job, f func()) {
	if j.state != queued {
		f()
		return
	}
	s.queue.change(j.nq, j, f)
}

// Finish publishes err as j's result, to every waiter: j leaves the
// scheduler, its place given back. A second Finish changes nothing.
func (s *Scheduler) Finish(j *Job, err error) {
	s.mu.Lock()
	defer s.unlock()
	s.finishLocked(j, err)
}

// finishLocked ends j and gives a queue place it held to its name's line.
func (s *Scheduler) finishLocked(j *Job, err error) {
	if s.endLocked(j, err) {
		nq := j.nq
		s.admitLocked(nq, time.Now())
		s.forgetLocked(nq)
	}
}

// endLocked ends j with err and reports whether it gave back a place in
// its name's queue.
func (s *Scheduler) endLocked(j *Job, err error) (freed bool) {
	nq := j.nq
	switch j.state {
	case done:
		return false
	case pending:
		nq.pending--
		s.pending--
		s.idleWork -= j.work
		s.queue.settle(nq, false)
		freed = true
	case parked:
		s.unparkLocked(nq, j)
	case queued:
		s.queue.remove(nq, j)
		freed = true
	case running:
		s.inSlots--
	}
	j.state = done
	if s.jobs[j.key] == j {
		delete(s.jobs, j.key)
	}
	j.stopExpire()
	j.stopTimeout()
	j.err = err
	close(j.done)
	return freed
}

// expire ends j, whose context ended, with the cause, unless it is
// running or finishing: its runner ends it.
func (s *Scheduler) expire(j *Job) {
	s.mu.Lock()
	defer s.unlock()
	if j.waiting() {
		s.finishLocked(j, context.Cause(j.ctx))
	}
}

// Cheapen marks name's waiting jobs as costing no scrypt: its password
// was just verified, so they will be answered without it.
func (s *Scheduler) Cheapen(name string) {
	s.mu.Lock()
	defer s.unlock()
	nq := s.names[name]
	if nq == nil {
		return
	}
	s.queue.cheapen(nq)
	for e := nq.line.Front(); e != nil; e = e.Next() {
		j := e.Value.(*Job)
		s.idleWork -= j.work
		j.work = 0
	}
}

// Load returns how many jobs are running, and how many wait for a slot
// (queued, pending or parked).
func (s *Scheduler) Load() (running, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inSlots, s.queue.len + s.pending + s.parked
}

// Close refuses new work, ends every job not running or finishing and
// every job's context with ErrClosed, and waits for the running batches
// and preparations.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	for _, j := range s.jobs {
		if j.waiting() {
			s.endLocked(j, ErrClosed)
		}
		j.cancel(ErrClosed)
	}
	for _, nq := range s.names {
		s.forgetLocked(nq)
	}
	s.fill.disarm()
	s.unlock()
	s.routines.Wait()
}

// warmedLocked wakes the callers waiting for warm estimates.
func (s *Scheduler) warmedLocked() {
	select {
	case <-s.warm:
	default:
		if s.est.warm() {
			close(s.warm)
		}
	}
}
