package verify

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// admission runs at most slots scrypt computations at once and queues the
// rest in arrival order. It also estimates how long a queued computation
// will take to finish, from the work (128·r·N·p bytes) of everything ahead
// of it and a moving average of the measured time per byte, so that callers
// can be told the truth about when to come back.
//
// x/sync/semaphore bounds concurrency too, but it can neither say how much
// work is ahead of a waiter nor let a waiter be removed and accounted for,
// which the estimate needs.
//
// It is safe for concurrent use.
type admission struct {
	mu         sync.Mutex
	slots      int
	maxQueue   int
	running    map[*ticket]struct{}
	queue      list.List // of *ticket, oldest first
	queuedWork int64
	nsPerByte  float64 // moving average of scrypt time per byte of work
}

// ticket is one computation's place in the admission.
type ticket struct {
	work     int64
	elem     *list.Element // while queued
	ready    chan struct{} // closed when a slot is granted
	enqueued time.Time
	started  time.Time // when the slot was granted
	granted  bool
	released bool
}

// initialNsPerByte assumes 100 ms for a k3s default hash (32 MiB of work)
// until the first computation has been measured.
const initialNsPerByte = 100e6 / float64(32<<20)

// ewmaWeight is the weight of a new measurement in the moving average.
const ewmaWeight = 0.25

// minRetryAfter keeps every estimate positive.
const minRetryAfter = time.Millisecond

func newAdmission(slots, maxQueue int) *admission {
	return &admission{
		slots:     slots,
		maxQueue:  maxQueue,
		running:   make(map[*ticket]struct{}, slots),
		nsPerByte: initialNsPerByte,
	}
}

// enqueue asks for a slot for a computation of the given work. The ticket
// is granted at once when a slot is free and nothing is queued; otherwise
// it joins the queue. When the queue is full it returns an OverloadError
// saying when the queue is expected to have drained.
func (a *admission) enqueue(work int64) (*ticket, *OverloadError) {
	now := time.Now()
	t := &ticket{work: work, ready: make(chan struct{}), enqueued: now}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.running) < a.slots && a.queue.Len() == 0 {
		a.grantLocked(t, now)
		return t, nil
	}
	if a.queue.Len() >= a.maxQueue {
		after := a.startEstimateLocked(a.queuedWork, now) + a.duration(work)
		return nil, &OverloadError{After: max(after, minRetryAfter), Queued: false}
	}
	t.elem = a.queue.PushBack(t)
	a.queuedWork += work
	return t, nil
}

func (a *admission) grantLocked(t *ticket, now time.Time) {
	t.granted, t.started = true, now
	a.running[t] = struct{}{}
	close(t.ready)
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

// release gives t's slot to the next queued ticket, or takes t out of the
// queue if it never got one. elapsed, when positive, is how long the
// computation took and updates the estimate. Releasing twice is harmless.
func (a *admission) release(t *ticket, elapsed time.Duration) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.released {
		return
	}
	t.released = true
	if t.elem != nil { // still queued: it never ran
		a.queue.Remove(t.elem)
		a.queuedWork -= t.work
		t.elem = nil
	}
	delete(a.running, t)
	if elapsed > 0 && t.work > 0 {
		sample := float64(elapsed) / float64(t.work)
		a.nsPerByte += ewmaWeight * (sample - a.nsPerByte)
	}
	for len(a.running) < a.slots && a.queue.Len() > 0 {
		next := a.queue.Remove(a.queue.Front()).(*ticket)
		next.elem = nil
		a.queuedWork -= next.work
		a.grantLocked(next, now)
	}
}

// eta estimates how long until t's computation has finished.
func (a *admission) eta(t *ticket) time.Duration {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	var d time.Duration
	switch {
	case t.released:
		d = 0
	case t.granted:
		d = a.duration(t.work) - now.Sub(t.started)
	default:
		var ahead int64
		for e := a.queue.Front(); e != nil && e != t.elem; e = e.Next() {
			ahead += e.Value.(*ticket).work
		}
		d = a.startEstimateLocked(ahead, now) + a.duration(t.work)
	}
	return max(d, minRetryAfter)
}

// startEstimateLocked estimates when a computation with ahead bytes of
// queued work before it gets a slot: the running computations' remaining
// time plus the work ahead, spread over all slots.
func (a *admission) startEstimateLocked(ahead int64, now time.Time) time.Duration {
	var remaining time.Duration
	for r := range a.running {
		remaining += max(a.duration(r.work)-now.Sub(r.started), 0)
	}
	if len(a.running) < a.slots && ahead == 0 {
		return 0
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
	return len(a.running), a.queue.Len()
}
