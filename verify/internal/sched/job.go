package sched

import (
	"context"
	"time"
)

// Key identifies the computation a job does: the verifier's HMAC of
// (node, stored hash, password).
type Key [32]byte

// State is where a job is in its life. Every transition happens under
// Scheduler.mu:
//
//	Pending ──Acquire──▶ Queued ──(a slot is free, its name's turn)──▶ Running
//	Parked ──(its name has room, or a caller waited out MaxWait)──▶ Queued
//	Running ──Release──▶ Finishing ──Finish──▶ Done
//	Pending, Parked, Queued or Running ──Finish──▶ Done
//
// Join creates a job Queued, or Running when a slot is free and nothing
// is queued, or Parked when its name's queue is full; with Request.Later
// it creates it Pending, and the job asks for its slot when its runner
// calls Acquire (or goes straight to Running when one is free then). A
// Parked or Queued job can also end Done without running: a Parked one
// when its last caller leaves before it got a place, a Queued suspect
// when a parked job takes its place (see the package doc), either when
// the context of its Acquire ends (work timeout, or the scheduler
// closed).
type State uint8

const (
	// Pending: in the map, so that callers share it, but not yet asking
	// for a slot: its runner does I/O first.
	Pending State = iota
	// Parked: its name's queue was full; it waits in its name's line for
	// a place while a caller waits for it, and holds none.
	Parked
	// Queued: waiting for a slot.
	Queued
	// Running: holds a slot; its computation may run.
	Running
	// Finishing: its computation is over and its slot given back; what
	// is left holds no slot (e.g. storing an enrolled hash).
	Finishing
	// Done: its result is published and it has left the scheduler.
	Done
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Parked:
		return "parked"
	case Queued:
		return "queued"
	case Running:
		return "running"
	case Finishing:
		return "finishing"
	case Done:
		return "done"
	}
	return "State(?)"
}

// Job is one computation, shared by every caller with its key, and its
// place in the scheduler. Callers hold it from Join until it is done and
// read its result with Wait; only the goroutine running it calls Acquire,
// Release and Finish.
type Job struct {
	// Set by Join, then read-only.
	key   Key
	name  string
	ctx   context.Context // the starting request's, for Start
	ready chan struct{}   // closed when it leaves Queued
	done  chan struct{}   // closed when it is Done, after err is set

	// Written before done is closed, read after.
	err error

	// Guarded by Scheduler.mu.
	state    State
	work     int64     // bytes mixed (128·r·N·p); 0 once known to need no scrypt
	arrived  uint64    // order of its first ask among all asks
	asks     uint32    // how often its password was asked for (see asks)
	waiters  int       // callers waiting in Wait now
	waited   bool      // some caller has waited in Wait
	wary     bool      // its name was failing or busy when it arrived
	pinned   bool      // a caller waited out MaxWait for it: never displaced
	queuedAt time.Time // when Join created it
	started  time.Time // when it got its slot
	// back is when a caller sent away is expected back (see
	// Config.ReturnAfter); zero while none was.
	back time.Time
	// heldAt is when a caller was first held on an estimate, promise the
	// wait it was promised then (its estimate, before the margin); zero if
	// none was.
	heldAt  time.Time
	promise time.Duration
}

// expected is when a caller for j is expected: back, or when j was
// created (its creator is on its way to Wait).
func (j *Job) expected() time.Time {
	if j.back.IsZero() {
		return j.queuedAt
	}
	return j.back
}

// suspect reports whether j waits for spare capacity: a first ask for a
// name that was failing or busy. A second ask makes it ordinary.
func (j *Job) suspect() bool { return j.wary && j.asks < 2 }

// before reports whether j goes before u within their name: ordinary
// before suspects, then a password asked again before one asked once
// (an agent retries the same password), then in the order they arrived.
// Asking more than twice does not count: asking costs a guesser nothing,
// so a count could keep a guess jumping ahead of a password queued before
// it; with the count capped at two, only jobs that arrived before j can
// stay ahead of it once it has been asked again.
func (j *Job) before(u *Job) bool {
	if js, us := j.suspect(), u.suspect(); js != us {
		return us
	}
	if ja, ua := j.asks >= 2, u.asks >= 2; ja != ua {
		return ja
	}
	return j.arrived < u.arrived
}

// displaceable reports whether a parked job may take queued j's place: a
// suspect whose callers have all left without pinning it. A job nobody
// has waited for yet is not: its creator is on its way to Wait.
func (j *Job) displaceable() bool {
	return j.state == Queued && j.suspect() && j.waited && j.waiters == 0 && !j.pinned
}
