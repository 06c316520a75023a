package verify

import (
	"cmp"
	"container/list"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/nodepass/nodepass/cache"
)

// admission runs at most slots scrypt computations at once and queues the
// rest, serving node names in turn (round robin) rather than in arrival
// order, so that a flood of work for some names cannot starve the others.
//
// A name may have at most perName computations queued at once. Within a
// name, a password asked for again goes first: a node's agent retries the
// same password, a guesser never sends one twice. The admission remembers
// the last few passwords (as cache keys) asked for each name, and a
// password asked for more often displaces a less-asked queued one when the
// name has no room, so that guesses cannot hold a name's places against
// the node's own password.
//
// A first ask for a name that is failing (it has had mismatches and no
// verified password yet), or that already has work queued or running, is
// a suspect: it is served only when no other work is queued. A guesser's
// passwords are all first asks, so guesses for a name that is failing or
// already being checked wait for spare capacity, and a herd's queue holds
// at most one ordinary computation per name; the node's own password,
// asked for again by its agent's retry, is served in the name's next turn.
//
// Among the names in turn, those with a caller waiting for one of their
// computations go first, in the order their callers came; the
// computations nobody waits for (their callers were told to come back
// later) run when no caller is waiting. The work
// done is the same either way, but a node's retry then finds its
// computation done or served next, rather than queued behind computations
// whose callers have not come back yet.
//
// It also estimates how long a queued computation will take to finish,
// from the work (128·r·N·p bytes) served before it, so that callers can be
// told the truth about when to come back. The time per byte has two
// parts, measured apart: the CPU time a computation takes (a moving
// average that settles within a few computations) and how much longer
// than that it takes on the wall clock because others want the CPU too (a
// slow moving average, starting at 1). A burst of contention, such as a
// herd's TLS handshakes in its first second, then does not make every
// estimate of that second many times too long, while lasting contention
// is learnt within a few dozen computations.
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
	seq        uint64
	asked      *simplelru.LRU[string, *askLog]
	nsPerByte  float64 // moving average of scrypt CPU time per byte of work
	slowdown   float64 // moving average of wall time over CPU time, >= 1
	samples    int     // measurements so far
}

// nameQueue holds one name's queued tickets in service order: suspects
// last, then most asked first, then oldest first.
type nameQueue struct {
	name    string
	tickets []*ticket
	elem    *list.Element // in admission.ring
}

// ticket is one computation's place in the admission.
type ticket struct {
	name      string
	key       cache.Key
	work      int64
	asks      uint32        // how often its password was asked for (askLog)
	waiters   int           // callers waiting for its outcome now
	doubtful  bool          // first asked while its name was failing or busy
	seq       uint64        // arrival order
	ready     chan struct{} // closed when a slot is granted, or on displacement
	enqueued  time.Time
	started   time.Time // when the slot was granted
	queued    bool
	granted   bool
	released  bool
	displaced *OverloadError // set when a more-asked password took its place
}

// askLog remembers the last askSlots passwords asked for one name.
type askLog struct {
	keys   [askSlots]cache.Key
	counts [askSlots]uint32
	last   [askSlots]uint64 // seq of the last ask; 0: slot unused
}

const (
	askSlots = 8     // passwords remembered per name
	askNames = 16384 // names remembered (LRU)
)

// initialNsPerByte assumes 100 ms for a k3s default hash (32 MiB of work)
// until the first computation has been measured.
const initialNsPerByte = 100e6 / float64(32<<20)

// ewmaWeight is the weight of a new measurement of CPU time per byte once
// there are enough; before that the estimate is the plain mean of the
// initial guess and the measurements.
const ewmaWeight = 0.25

// slowdownWeight is the weight of a new measurement of wall over CPU time,
// and maxSlowdown its bound.
const (
	slowdownWeight = 0.05
	maxSlowdown    = 16
)

// minRetryAfter keeps every estimate positive.
const minRetryAfter = time.Millisecond

func newAdmission(slots, maxQueue, perName int) *admission {
	asked, err := simplelru.NewLRU[string, *askLog](askNames, nil)
	if err != nil {
		panic(err) // only for a non-positive size
	}
	return &admission{
		slots:     slots,
		maxQueue:  maxQueue,
		perName:   perName,
		running:   make(map[*ticket]struct{}, slots),
		names:     make(map[string]*nameQueue),
		asked:     asked,
		nsPerByte: initialNsPerByte,
		slowdown:  1,
	}
}

// askLocked records an ask for (name, key) and returns how often that
// password has been asked for among the name's remembered ones.
func (a *admission) askLocked(name string, key cache.Key) uint32 {
	a.seq++
	log, ok := a.asked.Get(name)
	if !ok {
		log = &askLog{}
		a.asked.Add(name, log)
	}
	oldest := 0
	for i := range log.keys {
		if log.last[i] != 0 && log.keys[i] == key {
			log.counts[i]++
			log.last[i] = a.seq
			return log.counts[i]
		}
		if log.last[i] < log.last[oldest] {
			oldest = i
		}
	}
	log.keys[oldest], log.counts[oldest], log.last[oldest] = key, 1, a.seq
	return 1
}

// ask records another request for t's password and moves t up its name's
// queue if it now goes before others.
func (a *admission) ask(t *ticket) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t.asks = a.askLocked(t.name, t.key)
	if t.queued {
		a.sortLocked(a.names[t.name])
	}
}

func (a *admission) sortLocked(nq *nameQueue) {
	slices.SortStableFunc(nq.tickets, func(x, y *ticket) int {
		if c := x.rank(y); c != 0 {
			return -c
		}
		return cmp.Compare(x.seq, y.seq)
	})
}

// suspect reports whether t waits for spare capacity: a first ask for a
// name that was failing or busy.
func (t *ticket) suspect() bool { return t.doubtful && t.asks < 2 }

// rank orders t and u by priority: positive when t goes first.
func (t *ticket) rank(u *ticket) int {
	if ts, us := t.suspect(), u.suspect(); ts != us {
		if ts {
			return -1
		}
		return 1
	}
	return cmp.Compare(t.asks, u.asks)
}

// enqueue asks for a slot for a computation of the given work for the
// password whose cache key is key; failing says whether name has had
// mismatches and no verified password. The ticket is granted at once when
// a slot is free and nothing is queued; otherwise it joins name's queue.
// When the whole queue or name's queue is full it returns an
// OverloadError saying when there should be room; perName tells which.
func (a *admission) enqueue(name string, key cache.Key, work int64, failing bool) (t *ticket, oe *OverloadError, perName bool) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	t = &ticket{name: name, key: key, work: work, doubtful: failing || a.busyLocked(name), ready: make(chan struct{}), enqueued: now}
	t.asks = a.askLocked(name, key)
	t.seq = a.seq
	if len(a.running) < a.slots && a.queued == 0 {
		a.grantLocked(t, now)
		return t, nil, false
	}
	if a.queued >= a.maxQueue {
		// Room for new work once the queue has drained.
		after := a.startLocked(a.queuedWork, now, a.slowdown) + a.duration(work, a.slowdown)
		return nil, &OverloadError{After: max(after, minRetryAfter), reason: "queue full"}, false
	}
	nq := a.names[name]
	if nq != nil && len(nq.tickets) >= a.perName {
		last := nq.tickets[len(nq.tickets)-1]
		if last.rank(t) >= 0 {
			// Room for this name once its first queued ticket has run.
			return nil, &OverloadError{After: max(a.etaLocked(nq.tickets[0], now, a.slowdown), minRetryAfter), reason: "node's queue full"}, true
		}
		a.dequeueLocked(last)
		nq = a.names[name] // nil if last was its only ticket
		last.released = true
		defer func() {
			// Come back when t, which took its place, is expected done.
			last.displaced = &OverloadError{After: max(a.etaLocked(t, now, a.slowdown), minRetryAfter),
				reason: "displaced by a password asked for more often"}
			close(last.ready)
		}()
	}
	if nq == nil {
		nq = &nameQueue{name: name}
		nq.elem = a.ring.PushBack(nq)
		a.names[name] = nq
	}
	nq.tickets = append(nq.tickets, t)
	a.sortLocked(nq)
	t.queued = true
	a.queued++
	a.queuedWork += work
	return t, nil, false
}

// busyLocked reports whether name has work queued or running.
func (a *admission) busyLocked(name string) bool {
	if a.names[name] != nil {
		return true
	}
	for r := range a.running {
		if r.name == name {
			return true
		}
	}
	return false
}

func (a *admission) grantLocked(t *ticket, now time.Time) {
	t.granted, t.started = true, now
	a.running[t] = struct{}{}
	close(t.ready)
}

// dequeueLocked takes t out of its name's queue.
func (a *admission) dequeueLocked(t *ticket) {
	nq := a.names[t.name]
	if i := slices.Index(nq.tickets, t); i >= 0 {
		nq.tickets = slices.Delete(nq.tickets, i, i+1)
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
// slot back, if it was granted meanwhile) and ctx's error is returned. A
// displaced ticket returns its *OverloadError.
func (a *admission) wait(ctx context.Context, t *ticket) error {
	select {
	case <-t.ready:
		if t.displaced != nil { // written before ready was closed
			return t.displaced
		}
		return nil
	case <-ctx.Done():
	}
	a.release(t, 0)
	return context.Cause(ctx)
}

// release gives t's slot to the next name in turn, or takes t out of the
// queue if it never got a slot. Releasing twice is harmless.
func (a *admission) release(t *ticket, elapsed time.Duration) {
	a.releaseMeasured(t, elapsed, 0)
}

// releaseMeasured is release after a computation that took elapsed on the
// wall clock and cpu of CPU time (0 if unknown); both update the
// estimates.
func (a *admission) releaseMeasured(t *ticket, elapsed, cpu time.Duration) {
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
		if cpu <= 0 || cpu > elapsed {
			cpu = elapsed // no CPU clock: the wall clock says it all
		}
		sample := float64(cpu) / float64(t.work)
		a.samples++
		a.nsPerByte += max(ewmaWeight, 1/float64(a.samples+1)) * (sample - a.nsPerByte)
		ratio := min(float64(elapsed)/float64(cpu), maxSlowdown)
		a.slowdown += slowdownWeight * (ratio - a.slowdown)
	}
	for len(a.running) < a.slots && a.queued > 0 {
		nq := a.nextLocked()
		next := nq.tickets[0]
		a.dequeueLocked(next)
		if len(nq.tickets) > 0 {
			a.ring.MoveToBack(nq.elem) // its next ticket waits for the other names
		}
		a.grantLocked(next, now)
	}
}

// nextLocked returns the name whose turn it is: the first in ring order
// that a caller is waiting for (see wantedLocked); when there is none, the
// first with a ticket that is not a suspect; when all are suspects, the
// name of the oldest (suspects are served in arrival order: the node's own
// password, sent with the herd, goes before the guesses that follow it;
// each name has at most perName of them).
func (a *admission) nextLocked() *nameQueue {
	var first, oldest *nameQueue
	for e := a.ring.Front(); e != nil; e = e.Next() {
		nq := e.Value.(*nameQueue)
		if wantedLocked(nq) {
			return nq
		}
		if first == nil && !nq.tickets[0].suspect() {
			first = nq
		}
		if oldest == nil || nq.tickets[0].seq < oldest.tickets[0].seq {
			oldest = nq
		}
	}
	if first != nil {
		return first
	}
	return oldest
}

// wantedLocked reports whether a caller is waiting for one of nq's
// tickets that are not suspects.
func wantedLocked(nq *nameQueue) bool {
	for _, t := range nq.tickets {
		if t.waiters > 0 && !t.suspect() {
			return true
		}
	}
	return false
}

// watch counts a caller that starts (delta 1) or stops (delta -1) waiting
// for t's outcome. A name that a caller starts waiting for goes to the
// back of the ring: the names callers wait for are served in the order
// their callers came, so that one who came back early is not overtaken
// by those coming back after it, which its estimate did not count.
func (a *admission) watch(t *ticket, delta int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	nq := a.names[t.name]
	if !t.queued || nq == nil {
		t.waiters += delta
		return
	}
	was := wantedLocked(nq)
	t.waiters += delta
	if !was && wantedLocked(nq) {
		a.ring.MoveToBack(nq.elem)
	}
}

// cheapen marks name's queued computations as costing nothing: its
// password was just verified, so they will be answered without scrypt
// when their turn comes (see Verifier.known). Estimates stop counting them.
func (a *admission) cheapen(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if nq := a.names[name]; nq != nil {
		for _, t := range nq.tickets {
			a.queuedWork -= t.work
			t.work = 0
		}
	}
}

// isSuspect reports whether t is a queued suspect.
func (a *admission) isSuspect(t *ticket) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return t.queued && t.suspect()
}

// eta estimates how long until t's computation has finished.
func (a *admission) eta(t *ticket) time.Duration {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	return max(a.etaLocked(t, now, a.slowdown), minRetryAfter)
}

// etaAtBest is eta if computations took only their CPU time from now on:
// the contention measured so far (see admission) gone.
func (a *admission) etaAtBest(t *ticket) time.Duration {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	return max(a.etaLocked(t, now, 1), minRetryAfter)
}

// etaLocked estimates t's completion with computations taking slow times
// their CPU time.
func (a *admission) etaLocked(t *ticket, now time.Time, slow float64) time.Duration {
	switch {
	case t.released:
		return 0
	case t.granted:
		return a.duration(t.work, slow) - now.Sub(t.started)
	case t.suspect():
		return a.suspectEtaLocked(t, now, slow)
	}
	// Service order: first the names a caller waits for, then the others,
	// then the suspects, oldest first. Within each of the first two
	// groups, round r takes the r-th ticket that is not a suspect of every
	// name in ring order (a served name moves to the back, keeping the
	// others' order). A name's tickets are sorted with its suspects last.
	// So ahead of t, at index rt of its name's queue, go: all of the
	// earlier group's tickets, and in t's group every name's tickets
	// before index rt, and at index rt of the names before t's in the ring.
	nqT := a.names[t.name]
	rt := -1
	if nqT != nil {
		rt = slices.Index(nqT.tickets, t)
	}
	if rt < 0 {
		return 0 // not queued: cannot happen for a live ticket
	}
	wanted := wantedLocked(nqT)
	var ahead int64
	before := true // nq comes before t's name in the ring
	for e := a.ring.Front(); e != nil; e = e.Next() {
		nq := e.Value.(*nameQueue)
		if nq == nqT {
			before = false
		}
		last := rt // index of the last of nq's tickets served before t
		if !before {
			last = rt - 1
		}
		if w := wantedLocked(nq); w != wanted {
			if !w {
				continue // served after t's group
			}
			last = len(nq.tickets) - 1
		}
		for _, q := range nq.tickets[:min(last+1, len(nq.tickets))] {
			if q.suspect() {
				break
			}
			ahead += q.work
		}
	}
	return a.startLocked(ahead, now, slow) + a.duration(t.work, slow)
}

// suspectEtaLocked estimates a suspect's completion: after every ticket
// that is not a suspect and every older suspect.
func (a *admission) suspectEtaLocked(t *ticket, now time.Time, slow float64) time.Duration {
	var ahead int64
	for e := a.ring.Front(); e != nil; e = e.Next() {
		for _, q := range e.Value.(*nameQueue).tickets {
			if !q.suspect() || q.seq < t.seq {
				ahead += q.work
			}
		}
	}
	return a.startLocked(ahead, now, slow) + a.duration(t.work, slow)
}

// startLocked estimates when a computation with ahead bytes of queued work
// before it gets a slot: the running computations' remaining time plus the
// work ahead, spread over all slots.
func (a *admission) startLocked(ahead int64, now time.Time, slow float64) time.Duration {
	if len(a.running) < a.slots && ahead == 0 {
		return 0
	}
	var remaining time.Duration
	for r := range a.running {
		remaining += max(a.duration(r.work, slow)-now.Sub(r.started), 0)
	}
	return (remaining + a.duration(ahead, slow)) / time.Duration(a.slots)
}

// duration estimates a computation of the given work taking slow times
// its CPU time.
func (a *admission) duration(work int64, slow float64) time.Duration {
	return time.Duration(a.nsPerByte * slow * float64(work))
}

// load returns how many computations are running and queued.
func (a *admission) load() (running, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.running), a.queued
}
