package verify

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// admission runs at most slots scrypt computations at once and queues the
// rest, serving node names in turn (round robin) rather than in arrival
// order, so that a flood of work for some names cannot starve the others.
// A name may have at most perName computations queued at once.
//
// It also estimates how long a queued computation will take to finish,
// from the work (128·r·N·p bytes) served before it and a moving average of
// the measured time per byte, so that callers can be told the truth about
// when to come back.
//
// x/sync/semaphore bounds concurrency too, but it serves waiters in
// arrival order and can say nothing about the work ahead of a waiter,
// which the fairness and the estimate need.
//
// It is safe for concurrent use.
type admission struct {
	mu         sync.Mutex
	slots      int
	maxQueue   int
	perName    int
	running    map[*ticket]struct{}
	names      map[string]*nameQueue // names with queued tickets
	ring       list.List             // of *nameQueue, in service order
	queued     int
	queuedWork int64
	nsPerByte  float64 // moving average of scrypt time per byte of work
	samples    int     // measurements so far
}

// nameQueue holds one name's queued tickets, oldest first.
type nameQueue struct {
	name    string
	tickets []*ticket
	elem    *list.Element // in admission.ring
}

// ticket is one computation's place in the admission.
type ticket struct {
	name     string
	work     int64
	ready    chan struct{} // closed when a slot is granted
	enqueued time.Time
	started  time.Time // when the slot was granted
	queued   bool
	granted  bool
	released bool
}

// initialNsPerByte assumes 100 ms for a k3s default hash (32 MiB of work)
// until the first computation has been measured.
const initialNsPerByte = 100e6 / float64(32<<20)

// ewmaWeight is the weight of a new measurement in the moving average once
// there are enough; before that the estimate is the plain mean of the
// initial guess and the measurements, so that neither the guess nor one
// unlucky first measurement (taken while a herd's TLS handshakes compete
// for the CPU) decides the early estimates alone.
const ewmaWeight = 0.25

// minRetryAfter keeps every estimate positive.
const minRetryAfter = time.Millisecond

func newAdmission(slots, maxQueue, perName int) *admission {
	return &admission{
		slots:     slots,
		maxQueue:  maxQueue,
		perName:   perName,
		running:   make(map[*ticket]struct{}, slots),
		names:     make(map[string]*nameQueue),
		nsPerByte: initialNsPerByte,
	}
}

// enqueue asks for a slot for a computation of the given work for name.
// The ticket is granted at once when a slot is free and nothing is queued;
// otherwise it joins name's queue. When the whole queue or name's queue is
// full it returns an OverloadError saying when there should be room.
func (a *admission) enqueue(name string, work int64) (*ticket, *OverloadError) {
	now := time.Now()
	t := &ticket{name: name, work: work, ready: make(chan struct{}), enqueued: now}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.running) < a.slots && a.queued == 0 {
		a.grantLocked(t, now)
		return t, nil
	}
	nq := a.names[name]
	var after time.Duration
	switch {
	case a.queued >= a.maxQueue:
		// Room for new work once the queue has drained.
		after = a.startLocked(a.queuedWork, now) + a.duration(work)
	case nq != nil && len(nq.tickets) >= a.perName:
		// Room for this name once its oldest queued ticket has run.
		after = a.etaLocked(nq.tickets[0], now)
	default:
		if nq == nil {
			nq = &nameQueue{name: name}
			nq.elem = a.ring.PushBack(nq)
			a.names[name] = nq
		}
		nq.tickets = append(nq.tickets, t)
		t.queued = true
		a.queued++
		a.queuedWork += work
		return t, nil
	}
	return nil, &OverloadError{After: max(after, minRetryAfter), Queued: false}
}

func (a *admission) grantLocked(t *ticket, now time.Time) {
	t.granted, t.started = true, now
	a.running[t] = struct{}{}
	close(t.ready)
}

// dequeueLocked takes t out of its name's queue.
func (a *admission) dequeueLocked(t *ticket) {
	nq := a.names[t.name]
	for i, q := range nq.tickets {
		if q == t {
			nq.tickets = append(nq.tickets[:i], nq.tickets[i+1:]...)
			break
		}
	}
	if len(nq.tickets) == 0 {
		a.ring.Remove(nq.elem)
		delete(a.names, t.name)
	}
	t.queued = false
	a.queued--
	a.queuedWork -= t.work
}

// wait blocks until t holds a slot or ctx ends. On a nil return the caller
// must call release. When ctx ends first, t leaves the queue (or gives its
// slot back, if it was granted meanwhile) and ctx's error is returned.
func (a *admission) wait(ctx context.Context, t *ticket) error {
	select {
	case <-t.ready:
		return nil
	case <-ctx.Done():
	}
	a.release(t, 0)
	return context.Cause(ctx)
}

// release gives t's slot to the next name in turn, or takes t out of the
// queue if it never got a slot. elapsed, when positive, is how long the
// computation took and updates the estimate. Releasing twice is harmless.
func (a *admission) release(t *ticket, elapsed time.Duration) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.released {
		return
	}
	t.released = true
	if t.queued { // it never ran
		a.dequeueLocked(t)
	}
	delete(a.running, t)
	if elapsed > 0 && t.work > 0 {
		sample := float64(elapsed) / float64(t.work)
		a.samples++
		a.nsPerByte += max(ewmaWeight, 1/float64(a.samples+1)) * (sample - a.nsPerByte)
	}
	for len(a.running) < a.slots && a.queued > 0 {
		nq := a.ring.Front().Value.(*nameQueue)
		next := nq.tickets[0]
		a.dequeueLocked(next)
		if len(nq.tickets) > 0 {
			a.ring.MoveToBack(nq.elem) // its next ticket waits for the other names
		}
		a.grantLocked(next, now)
	}
}

// eta estimates how long until t's computation has finished.
func (a *admission) eta(t *ticket) time.Duration {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	return max(a.etaLocked(t, now), minRetryAfter)
}

func (a *admission) etaLocked(t *ticket, now time.Time) time.Duration {
	switch {
	case t.released:
		return 0
	case t.granted:
		return a.duration(t.work) - now.Sub(t.started)
	}
	// Service order: round r takes the r-th ticket of every name, in ring
	// order (a served name moves to the back, keeping the others' order).
	var ahead int64
	for r := 0; ; r++ {
		more := false
		for e := a.ring.Front(); e != nil; e = e.Next() {
			nq := e.Value.(*nameQueue)
			if r >= len(nq.tickets) {
				continue
			}
			if nq.tickets[r] == t {
				return a.startLocked(ahead, now) + a.duration(t.work)
			}
			ahead += nq.tickets[r].work
			more = true
		}
		if !more {
			return 0 // not queued: cannot happen for a live ticket
		}
	}
}

// startLocked estimates when a computation with ahead bytes of queued work
// before it gets a slot: the running computations' remaining time plus the
// work ahead, spread over all slots.
func (a *admission) startLocked(ahead int64, now time.Time) time.Duration {
	if len(a.running) < a.slots && ahead == 0 {
		return 0
	}
	var remaining time.Duration
	for r := range a.running {
		remaining += max(a.duration(r.work)-now.Sub(r.started), 0)
	}
	return (remaining + a.duration(ahead)) / time.Duration(a.slots)
}

func (a *admission) duration(work int64) time.Duration {
	return time.Duration(a.nsPerByte * float64(work))
}

// load returns how many computations are running and queued.
func (a *admission) load() (running, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.running), a.queued
}
