package sched

import (
	"container/list"
	"slices"
)

// fairQueue holds the queued jobs by name, names in service order. A
// plain helper: the Scheduler calls it under its lock.
type fairQueue struct {
	names   map[string]*nameQueue // names with queued jobs
	ring    list.List             // of *nameQueue, in service order
	len     int                   // jobs queued
	work    int64                 // their bytes of work
	perName int                   // a name's places (Config.PerName)
	over    int                   // jobs queued past their name's places (pinned)
}

// nameQueue holds one name's queued jobs in service order (see
// Job.before).
type nameQueue struct {
	name string
	jobs []*Job
	elem *list.Element // in fairQueue.ring
}

func newFairQueue(perName int) fairQueue {
	return fairQueue{names: make(map[string]*nameQueue), perName: perName}
}

// of returns name's queue, or nil when it has no job queued.
func (q *fairQueue) of(name string) *nameQueue { return q.names[name] }

// push queues j behind the other names.
func (q *fairQueue) push(j *Job) {
	nq := q.names[j.name]
	if nq == nil {
		nq = &nameQueue{name: j.name}
		nq.elem = q.ring.PushBack(nq)
		q.names[j.name] = nq
	}
	nq.jobs = append(nq.jobs, j)
	nq.sort()
	if len(nq.jobs) > q.perName {
		q.over++
	}
	q.len++
	q.work += j.work
}

// remove takes queued j out.
func (q *fairQueue) remove(j *Job) {
	nq := q.names[j.name]
	if nq == nil {
		return
	}
	i := slices.Index(nq.jobs, j)
	if i < 0 {
		return
	}
	if len(nq.jobs) > q.perName {
		q.over--
	}
	nq.jobs = slices.Delete(nq.jobs, i, i+1)
	q.len--
	q.work -= j.work
	if len(nq.jobs) == 0 {
		q.ring.Remove(nq.elem)
		delete(q.names, j.name)
	}
}

// pop takes out the job whose turn it is: the first of the name next in
// turn (see next), whose other jobs then wait for the other names.
func (q *fairQueue) pop() *Job {
	nq := q.next()
	j := nq.jobs[0]
	q.remove(j)
	if len(nq.jobs) > 0 {
		q.ring.MoveToBack(nq.elem)
	}
	return j
}

// next returns the name whose turn it is: the first in ring order that a
// caller is waiting for (see wanted); when there is none, the name whose
// first job is not a suspect and whose caller is expected back soonest
// (see Job.expected), so that a caller coming back finds its result
// ready; when all are suspects, the name of the oldest (suspects are
// served in arrival order: the node's own password, sent with the herd,
// goes before the guesses that follow it).
func (q *fairQueue) next() *nameQueue {
	var soonest, oldest *nameQueue
	for e := q.ring.Front(); e != nil; e = e.Next() {
		nq := e.Value.(*nameQueue)
		if nq.wanted() {
			return nq
		}
		head := nq.jobs[0]
		if !head.suspect() && (soonest == nil || head.expected().Before(soonest.jobs[0].expected())) {
			soonest = nq
		}
		if oldest == nil || head.arrived < oldest.jobs[0].arrived {
			oldest = nq
		}
	}
	if soonest != nil {
		return soonest
	}
	return oldest
}

// waitedFor is called when a caller starts waiting for queued j. A name
// that a caller starts waiting for goes to the back of the ring: the names
// callers wait for are served in the order their callers came, so that
// one who came back early is not overtaken by those coming back after it,
// which its estimate did not count.
func (q *fairQueue) waitedFor(j *Job, wasWanted bool) {
	if nq := q.names[j.name]; nq != nil && !wasWanted && nq.wanted() {
		q.ring.MoveToBack(nq.elem)
	}
}

// cheapen sets the work of name's queued jobs to 0: they will be answered
// without scrypt.
func (q *fairQueue) cheapen(name string) {
	if nq := q.names[name]; nq != nil {
		for _, j := range nq.jobs {
			q.work -= j.work
			j.work = 0
		}
	}
}

// ahead returns the bytes of work served before queued j. Service order:
// first the names a caller waits for, then the others, then the suspects,
// oldest first. Among the names a caller waits for, round r takes the
// r-th job that is not a suspect of every name in ring order (a served
// name moves to the back, keeping the others' order), and a name's jobs
// are sorted with its suspects last. So ahead of such a j, at index rj of
// its name's queue, go every such name's jobs before index rj, and those
// at index rj of the names before j's in the ring. Ahead of a j nobody
// waits for go all of those, and the other names' jobs whose callers are
// expected back before j's, and its own name's jobs before it.
func (q *fairQueue) ahead(j *Job) int64 {
	if j.suspect() {
		return q.aheadOfSuspect(j)
	}
	nqJ := q.names[j.name]
	rj := -1
	if nqJ != nil {
		rj = slices.Index(nqJ.jobs, j)
	}
	if rj < 0 {
		return 0 // not queued
	}
	wanted := nqJ.wanted()
	var ahead int64
	before := true // nq comes before j's name in the ring
	for e := q.ring.Front(); e != nil; e = e.Next() {
		nq := e.Value.(*nameQueue)
		if nq == nqJ {
			before = false
		}
		w := nq.wanted()
		for i, u := range nq.jobs {
			if u.suspect() {
				break
			}
			var first bool // u is served before j
			switch {
			case w != wanted:
				first = w // the waited-for names go first
			case nq == nqJ:
				first = i < rj
			case wanted:
				first = i < rj || i == rj && before
			default:
				first = u.expected().Before(j.expected())
			}
			if first {
				ahead += u.work
			}
		}
	}
	return ahead
}

// aheadOfSuspect returns the bytes of work served before suspect j: every
// job that is not a suspect and every older suspect.
func (q *fairQueue) aheadOfSuspect(j *Job) int64 {
	var ahead int64
	for e := q.ring.Front(); e != nil; e = e.Next() {
		for _, u := range e.Value.(*nameQueue).jobs {
			if !u.suspect() || u.arrived < j.arrived {
				ahead += u.work
			}
		}
	}
	return ahead
}

// sort puts nq's jobs in service order.
func (nq *nameQueue) sort() {
	slices.SortStableFunc(nq.jobs, func(x, y *Job) int {
		switch {
		case x.before(y):
			return -1
		case y.before(x):
			return 1
		}
		return 0
	})
}

// displaceable returns nq's newest job that a parked one may displace
// (see Job.displaceable), or nil.
func (nq *nameQueue) displaceable() *Job {
	for i := len(nq.jobs) - 1; i >= 0; i-- {
		if j := nq.jobs[i]; j.displaceable() {
			return j
		}
	}
	return nil
}

// wanted reports whether a caller is waiting for one of nq's jobs that is
// not a suspect.
func (nq *nameQueue) wanted() bool {
	for _, j := range nq.jobs {
		if j.waiters > 0 && !j.suspect() {
			return true
		}
	}
	return false
}
