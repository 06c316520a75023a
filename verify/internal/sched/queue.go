package sched

import (
	"container/list"
	"time"
)

// fairQueue holds the queued jobs, by name, in service order (see the
// package doc), with the sums the estimates need, so that every operation
// costs O(log n) whatever the backlog. A plain helper: the Scheduler
// calls it under its lock.
//
// A name is in at most one of two orders: wanted (a caller waits for one
// of its ordinary jobs), in turn: by when it last came to the back of the
// line (made, served, or come to be wanted); or unwanted (it has ordinary
// jobs, nobody waits for them), by when the caller of its first job is
// expected back, and in turn among equal times. A name whose queued jobs are
// all suspects is in neither; its suspects are in suspects, with every
// other name's, oldest first.
type fairQueue struct {
	perName  int
	wanted   tree[*nameQueue] // weight: its first job's work
	unwanted tree[*nameQueue] // weight: its ordinary jobs' work
	suspects tree[*Job]       // every queued suspect, by arrival
	disp     tree[*Job]       // every displaceable job, by arrival
	seq      uint64           // orders the wanted names

	len       int   // jobs queued
	work      int64 // their work
	over      int   // jobs queued past their names' places (earned)
	ordWork   int64 // the work of the queued ordinary jobs
	wantWork  int64 // the part of ordWork in wanted names
	wantHeads int64 // the work of the wanted names' first jobs
}

// nameQueue is one name's state: its queued jobs in service order, its
// line of parked jobs, and how many of its jobs are pending or running.
type nameQueue struct {
	name    string
	ring    uint64     // its place in turn: names come to the back when served or wanted
	jobs    tree[*Job] // queued, by (tier, arrival)
	disp    tree[*Job] // the displaceable ones among them, by arrival
	line    list.List  // parked jobs, oldest first
	pending int        // jobs holding a place while Config.Prepare runs
	running int        // jobs in a running batch
	waited  int        // queued ordinary jobs a caller waits for

	// Its part in the fairQueue's orders and sums, as last settled.
	order   *tree[*nameQueue] // wanted, unwanted or nil
	key     treeKey
	over    int
	ordWork int64
	head    int64 // its first job's work, while wanted
}

func newFairQueue(perName int) fairQueue { return fairQueue{perName: perName} }

// places returns how many of nq's places are held: queued or pending jobs.
func (nq *nameQueue) places() int {
	n, _ := nq.jobs.len()
	return n + nq.pending
}

// idle reports whether nq has nothing left: it can be forgotten.
func (nq *nameQueue) idle() bool {
	n, _ := nq.jobs.len()
	return n == 0 && nq.pending == 0 && nq.running == 0 && nq.line.Len() == 0
}

// first returns nq's first queued job in service order, or nil.
func (nq *nameQueue) first() *Job {
	j, _ := nq.jobs.first()
	return j
}

// displaceable returns nq's newest displaceable job (see
// Job.displaceable), or nil.
func (nq *nameQueue) displaceable() *Job {
	j, _ := nq.disp.last()
	return j
}

// A job's place in the queue's orders.

// due is when a caller for j is expected: back, or when j was
// created (its creator is on its way to Wait).
func (j *Job) due() time.Time {
	if j.back.IsZero() {
		return j.created
	}
	return j.back
}

// suspect reports whether j waits for spare capacity: a first ask for a
// name that was failing or busy. A second ask makes it ordinary.
func (j *Job) suspect() bool { return j.doubtedOrBusy && j.asks < 2 }

// tier is j's rank within its name: a password asked again (an agent
// retries the same password) before one asked once, and suspects last;
// asking more than twice counts for nothing, as asking costs a guesser
// nothing: a count would let a guess keep passing a password queued
// before it. Within a tier jobs go in the order they arrived.
func (j *Job) tier() uint64 {
	switch {
	case j.asks >= 2:
		return tierAgain
	case !j.doubtedOrBusy:
		return tierOnce
	}
	return tierSuspect
}

const (
	tierAgain = iota
	tierOnce
	tierSuspect
)

// displaceable reports whether a parked or new job may take queued j's
// place: a suspect whose callers have all left without earning it a place. A job
// nobody has waited for yet is not: its creator is on its way to Wait.
func (j *Job) displaceable() bool {
	return j.state == queued && j.suspect() && j.waited && j.waiters == 0 && !j.earned
}

// waitedOrdinary reports whether j is a queued ordinary job a caller
// waits for: what makes its name wanted.
func (j *Job) waitedOrdinary() bool {
	return j.state == queued && !j.suspect() && j.waiters > 0
}

func byArrival(j *Job) treeKey { return treeKey{hi: j.arrived} }

// attach adds queued j to nq's structures and the queue's sums; settle
// must follow.
func (q *fairQueue) attach(nq *nameQueue, j *Job) {
	j.qkey = treeKey{hi: j.tier(), lo: j.arrived}
	nq.jobs.insert(j.qkey, j, j.work)
	q.len++
	q.work += j.work
	if j.suspectQ = j.suspect(); j.suspectQ {
		q.suspects.insert(byArrival(j), j, j.work)
	}
	if j.dispQ = j.displaceable(); j.dispQ {
		nq.disp.insert(byArrival(j), j, 0)
		q.disp.insert(byArrival(j), j, 0)
	}
	if j.waitedOrdinary() {
		nq.waited++
	}
}

// detach is attach undone, with j's fields as they were when attached.
func (q *fairQueue) detach(nq *nameQueue, j *Job) {
	nq.jobs.remove(j.qkey)
	q.len--
	q.work -= j.work
	if j.suspectQ {
		q.suspects.remove(byArrival(j))
		j.suspectQ = false
	}
	if j.dispQ {
		nq.disp.remove(byArrival(j))
		q.disp.remove(byArrival(j))
		j.dispQ = false
	}
	if j.waitedOrdinary() {
		nq.waited--
	}
}

// push queues j behind its name's jobs of its tier.
func (q *fairQueue) push(nq *nameQueue, j *Job) {
	q.attach(nq, j)
	q.settle(nq, false)
}

// remove takes queued j out.
func (q *fairQueue) remove(nq *nameQueue, j *Job) {
	q.detach(nq, j)
	q.settle(nq, false)
}

// change applies f to queued j, whose tier, waiters, earned place, work or
// expected time f may change, and puts j where it now belongs.
func (q *fairQueue) change(nq *nameQueue, j *Job, f func()) {
	q.detach(nq, j)
	f()
	q.attach(nq, j)
	q.settle(nq, false)
}

// settle puts nq where its jobs now place it and updates the sums. A
// name that comes to be wanted goes to the back of the wanted ones, and
// so does a wanted name just served (served), so that the names callers
// wait for are served in turn, in the order their callers came.
func (q *fairQueue) settle(nq *nameQueue, served bool) {
	over := max(nq.places()-q.perName, 0)
	q.over += over - nq.over
	nq.over = over
	_, ord := nq.jobs.before(treeKey{hi: tierSuspect})
	q.ordWork += ord - nq.ordWork
	wasWanted := nq.order == &q.wanted
	if nq.order != nil {
		nq.order.remove(nq.key)
	}
	if wasWanted {
		q.wantWork -= nq.ordWork
		q.wantHeads -= nq.head
	}
	nq.ordWork, nq.order, nq.head = ord, nil, 0
	first := nq.first()
	if first != nil && (served || nq.waited > 0 && !wasWanted) {
		q.seq++
		nq.ring = q.seq // to the back
	}
	switch {
	case nq.waited > 0:
		nq.order, nq.key, nq.head = &q.wanted, treeKey{hi: nq.ring}, first.work
		q.wantWork += ord
		q.wantHeads += first.work
		q.wanted.insert(nq.key, nq, first.work)
	case first != nil && !first.suspect():
		nq.order, nq.key = &q.unwanted, treeKey{hi: timeKey(first.due()), lo: nq.ring}
		q.unwanted.insert(nq.key, nq, ord)
	}
}

// timeKey orders times as a tree key.
func timeKey(t time.Time) uint64 {
	if ns := t.UnixNano(); ns > 0 {
		return uint64(ns)
	}
	return 0
}

// walk calls f with the queued jobs in turn, until f returns false: the
// first job of each wanted name; then that of each unwanted name, whose
// first caller is expected back soonest first, so that a caller coming
// back finds its result ready; then the suspects, oldest first (the
// node's own password, sent with the herd, goes before the guesses that
// follow it). It serves nothing: a name served comes back in turn with
// its next job, behind the wanted names if it is one, else at a place
// the walk does not follow.
func (q *fairQueue) walk(f func(*Job) bool) {
	more := true
	names := func(nq *nameQueue) bool {
		more = f(nq.first())
		return more
	}
	q.wanted.ascend(names)
	if more {
		q.unwanted.ascend(names)
	}
	if more {
		q.suspects.ascend(f)
	}
}

// next returns the job whose turn it is (walk's first), or nil with
// nothing queued.
func (q *fairQueue) next() (j *Job) {
	q.walk(func(first *Job) bool {
		j = first
		return false
	})
	return j
}

// pop takes out next's job; its name, if still wanted, goes to the back
// of the wanted ones.
func (q *fairQueue) pop() *Job {
	j := q.next()
	if j != nil {
		q.detach(j.nq, j)
		q.settle(j.nq, true)
	}
	return j
}

// ahead returns the bytes of work served before queued j (see next): for
// a suspect, every ordinary job and every older suspect; for an ordinary
// job of a wanted name, its name's jobs before it and, of the other
// wanted names, as many rounds as it has jobs before it, plus the first
// jobs of the names before it in turn (exact when every name has one job
// ahead of j's place, as in a herd; otherwise it counts every other
// wanted name's jobs as costing what its first one does, at most all of
// them); for one of an unwanted name, every wanted name's ordinary work,
// its name's jobs before it, and the ordinary work of the names whose
// callers are expected back before its own.
func (q *fairQueue) ahead(nq *nameQueue, j *Job) int64 {
	if j.suspect() {
		_, older := q.suspects.before(byArrival(j))
		return q.ordWork + older
	}
	rank, own := nq.jobs.before(j.qkey)
	switch nq.order {
	case &q.wanted:
		_, heads := q.wanted.before(nq.key)
		others := min(heads+int64(rank)*(q.wantHeads-nq.head), q.wantWork-nq.ordWork)
		return own + others
	case &q.unwanted:
		k := treeKey{hi: timeKey(j.due()), lo: nq.ring}
		_, sooner := q.unwanted.before(k)
		if nq.key.less(k) {
			sooner -= nq.ordWork
		}
		return q.wantWork + max(sooner, 0) + own
	}
	return 0 // not queued
}

// cheapen sets the work of nq's queued jobs to 0: they will be answered
// without scrypt.
func (q *fairQueue) cheapen(nq *nameQueue) {
	var js []*Job
	nq.jobs.ascend(func(j *Job) bool {
		js = append(js, j)
		return true
	})
	for _, j := range js {
		q.detach(nq, j)
		j.work = 0
		q.attach(nq, j)
	}
	q.settle(nq, false)
}
