package sched

import (
	"container/list"
	"time"
)

// fairQueue holds the queued jobs by name in service order, with the sums
// the estimates need, at O(log n) an operation; the Scheduler calls it
// under its lock. A name is wanted (in turn: by when it last came to the
// back, made, served or come to be wanted), unwanted (by when its first
// job's caller is due back, then in turn), or, with only suspects queued,
// in neither: suspects are in suspects, every name's, oldest first.
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

// due is when a caller for j is expected: back, or at j's creation (its
// creator is on its way to Wait).
func (j *Job) due() time.Time {
	if j.back.IsZero() {
		return j.created
	}
	return j.back
}

// suspect reports whether j is a suspect (see the package doc).
func (j *Job) suspect() bool { return j.doubtedOrBusy && j.asks < 2 }

// tier is j's rank within its name (see "Order" 5 in the package doc).
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
// place: a suspect not earned whose callers came and all left.
func (j *Job) displaceable() bool {
	return j.state == queued && j.suspect() && j.waited && j.waiters == 0 && !j.earned
}

// waitedOrdinary reports whether j makes its name wanted.
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

// push queues j.
func (q *fairQueue) push(nq *nameQueue, j *Job) {
	q.attach(nq, j)
	q.settle(nq, false)
}

// remove takes queued j out.
func (q *fairQueue) remove(nq *nameQueue, j *Job) {
	q.detach(nq, j)
	q.settle(nq, false)
}

// change applies f, which may change j's place, to queued j.
func (q *fairQueue) change(nq *nameQueue, j *Job, f func()) {
	q.detach(nq, j)
	f()
	q.attach(nq, j)
	q.settle(nq, false)
}

// settle puts nq where its jobs now place it and updates the sums. A name
// that comes to be wanted, or was just served, goes to the back of the
// wanted ones.
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

// walk calls f with the queued jobs in turn ("Order" in the package
// doc), until f returns false: the first job of each wanted name, then
// of each unwanted name, then the suspects. It serves nothing: a name
// served comes back in turn with its next job, behind the wanted names if
// it is one, else at a place the walk does not follow.
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

// ahead returns the bytes of work served before queued j: for a suspect,
// every ordinary job and older suspect; for a wanted name's job, its
// name's jobs before it, and of the other wanted names as many rounds as
// that, plus the first jobs of those before it in turn (exact when each
// has one job ahead, as in a herd; else each job counted as its name's
// first, at most all of them); for an unwanted name's job, all wanted
// work, its name's jobs before it and the names due back sooner.
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

// cheapen sets the work of nq's queued jobs to 0 (see Cheapen).
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
