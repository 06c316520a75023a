package sched

import (
	"container/list"
	"context"
	"time"
)

// Key identifies the computation a job does: the verifier's HMAC of
// (node, stored hash, password).
type Key [32]byte

// Class groups jobs that one slot may compute together, in one batch:
// jobs whose computations have the same parameters.
type Class struct{ N, R, P int }

// state is where a job is in its life ("A job's life" in the package
// doc), changed under Scheduler.mu.
type state uint8

const (
	pending   state = iota // holds a place in its name's queue; Config.Prepare runs
	parked                 // its name had no room: waits in the name's line, holds no place
	queued                 // holds a place, waits for a slot
	running                // in a batch on a slot
	finishing              // computed, slot given back; its runner finishes it (I/O)
	done                   // result published, left the scheduler
)

// Job is one computation, shared by every caller with its key, and its
// place in the scheduler.
type Job struct {
	// Set by Join, then read-only.
	key         Key
	name        string
	nq          *nameQueue // its name's, while it is not done
	class       Class
	task        any
	ctx         context.Context // the job's own: see Context
	cancel      context.CancelCauseFunc
	stopTimeout context.CancelFunc // releases the work timeout's timer
	stopExpire  func() bool        // stops ctx's callback, expire
	later       bool               // created with Request.Later
	done        chan struct{}      // closed when it is done, after err is set

	// Written before done is closed, read after.
	err error

	// Guarded by Scheduler.mu.
	state         state
	work          int64  // bytes mixed (128·r·N·p); 0 once known to need no scrypt
	arrived       uint64 // order of its first ask among all asks
	asks          uint32 // how often its password was asked for (see asks)
	waiters       int    // callers waiting in Wait now
	waited        bool   // some caller has waited in Wait
	doubtedOrBusy bool   // doubted (see the package doc), or its name was busy, when it arrived
	earned        bool   // a caller waited out MaxWait for it: never displaced
	burst         bool   // it came in a burst (see fillWait)
	created       time.Time
	queuedAt      time.Time // when it was last queued
	started       time.Time // when its batch got its slot
	batch         *batch    // while running
	back          time.Time // when a shed caller is expected back; zero while none was
	// heldAt is when a caller was first held on an estimate, and promise
	// the wait it was promised then (before the margin); zero if none was.
	heldAt  time.Time
	promise time.Duration

	// Its places in the queue's structures (see queue.go), while queued.
	qkey     treeKey       // in its name's jobs
	suspectQ bool          // in fairQueue.suspects
	dispQ    bool          // in its name's disp
	line     *list.Element // in its name's line, while parked
}

// waiting reports whether j waits for a slot: pending, parked or queued.
func (j *Job) waiting() bool { return j.state == pending || j.state == parked || j.state == queued }

// Context returns j's own context: it carries the values (and pprof
// labels) of the request that created j, and ends with the work timeout
// (context.DeadlineExceeded) or Close (ErrClosed), not with its callers.
func (j *Job) Context() context.Context { return j.ctx }

// Task returns the Request.Task j was created with.
func (j *Job) Task() any { return j.task }

// QueueWait returns how long j waited for its slot, for Config.Run.
func (j *Job) QueueWait() time.Duration { return j.started.Sub(j.created) }

// batch is jobs computed together on one slot.
type batch struct {
	jobs    []*Job
	work    int64
	started time.Time
}
