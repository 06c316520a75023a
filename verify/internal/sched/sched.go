package sched

import (
	"context"
	"errors"
	"fmt"
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
	// batch holds all of its jobs' memory at once; a job alone may pass
	// it. 0: no bound.
	MaxBatchWork int64
	// WorkTimeout bounds a job's life: one not running when it passes
	// ends with context.DeadlineExceeded, and its context ends. 0: none.
	WorkTimeout time.Duration
	// ReturnAfter is how long after being shed a caller is expected
	// back at the soonest, when callers do not honour Overload.After
	// (k3s agents retry 5-10 s after a failed request). Jobs nobody waits
	// for run in the order their callers are expected back.
	ReturnAfter time.Duration
	// HonourAfter says that callers come back when Overload.After tells
	// them to, instead of ReturnAfter later.
	HonourAfter bool

	// Run computes a batch: 1 to Lanes running jobs of one Class, in
	// service order, on the slot's own goroutine, without the lock.
	// Before it returns it must end each job with Finish, or with Hold
	// when the job's work goes on without the slot (its runner then
	// calls Finish). It returns how many of the jobs it computed (the
	// others it answered without computing) and how long that took on
	// the wall clock and in CPU time (0 if unknown), which teach the
	// estimates (see "Warm-up" in the package doc). The slot is given
	// back when Run returns.
	Run func(jobs []*Job) (computed int, wall, cpu time.Duration)
	// Prepare runs, on a goroutine of its own, a job created with
	// Request.Later once it holds a place; it must end with Submit or
	// Finish.
	Prepare func(j *Job)
}

// ErrClosed is the result of work the scheduler no longer takes or runs,
// and the cause that ends the contexts of the jobs Close cut short.
var ErrClosed = errors.New("scheduler closed")

// ErrPanic is wrapped by the result of the jobs a batch's Run left
// unanswered when it panicked.
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
// rest (see the package doc for the policy). It is safe for concurrent
// use.
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
		queue:   newFairQueue(cfg.PerName),
		asks:    newAskLog(),
		est:     newEstimator(cfg.Slots),
		warm:    make(chan struct{}),
	}
}

// Reshape sets Config.Slots, Lanes and MaxBatchWork, for a caller that
// learns them from its first batches: running batches keep their jobs,
// and free slots take the next ones by the new values.
func (s *Scheduler) Reshape(slots, lanes int, maxBatchWork int64) {
	now := time.Now()
	s.mu.Lock()
	defer s.unlock()
	s.cfg.Slots, s.cfg.Lanes, s.cfg.MaxBatchWork, s.est.slots = slots, lanes, maxBatchWork, slots
	s.dispatchLocked(now)
}

// Request describes the work a caller asks for.
type Request struct {
	Key   Key    // what is computed: callers with the same Key share one job
	Name  string // the node name it is for, the unit of fairness
	Work  int64  // its bytes of work, 128·r·N·p
	Class Class  // jobs of one Class may share a batch
	Task  any    // for Run and Prepare (Job.Task)
	// Doubted says whether the request is in doubt: Name has had
	// mismatches and no verified password, or the password does not give
	// the digest remembered for it. Such a first ask is a suspect (see the
	// package doc).
	Doubted bool
	// Later creates the job pending: Config.Prepare runs it (I/O) before
	// it is queued for a slot, with Submit.
	Later bool
}

// unlock releases s.mu and starts what the locked section scheduled:
// batches on their slots, preparations.
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

// Join returns the job for r.Key, or creates one when there is none;
// created says which. A created job is queued (pending with r.Later), or
// parked in its name's line when its name has no room and none of its
// jobs can be displaced; it runs when its turn comes, detached from ctx,
// whose values it keeps (Job.Context). Joining an existing job counts as
// asking for its password again.
//
// Join returns an *Overload when the queue as a whole has no room
// (Config.MaxQueue) and no job nobody waits for can give its place, and
// ErrClosed after Close.
func (s *Scheduler) Join(ctx context.Context, r Request) (j *Job, created bool, err error) {
	now := time.Now()
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return nil, false, ErrClosed
	}
	if j := s.jobs[r.Key]; j != nil {
		// The job remembers its own asks: the log may have forgotten them.
		n, _ := s.asks.record(r.Name, r.Key)
		s.changeLocked(j, func() { j.asks = max(j.asks+1, n) })
		return j, false, nil
	}
	nq := s.nameLocked(r.Name)
	if s.roomLocked() <= 0 {
		v, _ := s.queue.disp.last()
		if v == nil {
			// Room for new work once the queue has drained.
			b := s.est.median()
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

// roomLocked is how many more jobs the queue takes: jobs pending, queued
// within their names' places, or parked count against MaxQueue. Jobs
// earned over their names' places do not: each cost a caller a whole
// MaxWait, and guessers that wait must not fill the queue for everyone.
func (s *Scheduler) roomLocked() int {
	return s.cfg.MaxQueue - (s.queue.len + s.pending - s.queue.over + s.parked)
}

// waitingWorkLocked is the work of every job waiting for a slot: queued,
// pending and parked.
func (s *Scheduler) waitingWorkLocked() int64 { return s.queue.work + s.idleWork }

// placeLocked gives j a place in its name's queue: queued, or pending
// (and prepared) when it was created Later.
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
	j.state, j.queuedAt = queued, now
	s.queue.push(nq, j)
	s.dispatchLocked(now)
}

// Submit queues pending j for a slot, its preparation done. It does
// nothing when j ended meanwhile (its timeout, Close).
func (s *Scheduler) Submit(j *Job) {
	now := time.Now()
	s.mu.Lock()
	defer s.unlock()
	if j.state != pending {
		return
	}
	nq := j.nq
	nq.pending--
	s.pending--
	s.idleWork -= j.work
	j.state, j.queuedAt = queued, now
	s.queue.push(nq, j)
	s.dispatchLocked(now)
}

// dispatchLocked gives each free slot the batch it takes now, if any
// (nextBatchLocked).
func (s *Scheduler) dispatchLocked(now time.Time) {
	for b := s.nextBatchLocked(now); b != nil; b = s.nextBatchLocked(now) {
		s.routines.Add(1)
		s.toStart = append(s.toStart, b)
	}
}

// nextBatchLocked takes a slot and its batch when a slot is free and the
// job in turn starts now (see fillWait); it returns nil otherwise. It
// arms s.fill while a free slot waits for a full batch, and disarms it
// when none does.
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

// joinsLocked reports whether j, next in turn, joins b, a batch being
// taken: the first job always does; another when it shares the first
// one's Class, so that a batch never delays a job the policy ranks ahead
// of one it takes; when its name is not in b yet (a name verified by its
// batch's first job answers the others without scrypt); and within
// Config.MaxBatchWork.
func (s *Scheduler) joinsLocked(b *batch, j *Job) bool {
	if len(b.jobs) == 0 {
		return true
	}
	return j.class == b.jobs[0].class && !inBatch(b, j.name) &&
		(s.cfg.MaxBatchWork <= 0 || b.work+j.work <= s.cfg.MaxBatchWork)
}

func inBatch(b *batch, name string) bool {
	for _, j := range b.jobs {
		if j.name == name {
			return true
		}
	}
	return false
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

// endBatch gives b's slot back, with what Run measured for the
// estimates, and returns the batch that takes the slot next, if any. Jobs
// Run left running end with err, or errUnfinished.
func (s *Scheduler) endBatch(b *batch, computed int, wall, cpu time.Duration, err error) *batch {
	now := time.Now()
	s.mu.Lock()
	defer s.unlock()
	if computed > 0 && s.est.firstOfKind(b.jobs[0].class, computed) {
		wall, cpu = 0, 0 // see "Warm-up" in the package doc
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

// Hold says that running j's computation is over and its work goes on
// without the slot: it is finishing, and its runner calls Finish.
func (s *Scheduler) Hold(j *Job) {
	s.mu.Lock()
	defer s.unlock()
	if j.state == running {
		j.state = finishing
		s.inSlots--
	}
}

// admitLocked gives nq's places to its line, oldest first: a free
// place, or the place of a suspect nobody waits for (displaced).
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
	// Nobody waits for v: the result is for a caller coming back, and
	// says when v would have run.
	after := s.expectedWaitLocked(v, now)
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

// earnLocked marks j as waited for a whole MaxWait: it is never displaced,
// and when parked it gets a place at once, over its name's cap.
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

// Finish publishes err as j's result: j leaves the scheduler (giving back
// its queue place if it still holds one) and every waiter gets err.
// Finishing a job twice keeps the first result. A running job's slot is
// given back when its batch's Run returns.
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

// expire ends j, whose context ended (its work timeout, or Close), with
// the context's cause, unless it is running or finishing: its runner
// ends it.
func (s *Scheduler) expire(j *Job) {
	s.mu.Lock()
	defer s.unlock()
	if j.state == pending || j.state == parked || j.state == queued {
		s.finishLocked(j, context.Cause(j.ctx))
	}
}

// Cheapen marks name's queued and parked jobs as costing no scrypt: its
// password was just verified, so they will be answered without it.
// Estimates stop counting them.
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

// Load returns how many jobs are running (in a batch, not yet finished)
// and how many wait for a slot (queued, pending, or parked in their name's
// line).
func (s *Scheduler) Load() (running, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inSlots, s.queue.len + s.pending + s.parked
}

// Close makes Join refuse new work with ErrClosed, ends every job not
// running or finishing with ErrClosed, ends every job's context with
// ErrClosed as its cause, and waits for the running batches and the
// preparations to return.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	for _, j := range s.jobs {
		if j.state == pending || j.state == parked || j.state == queued {
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
