package sched

import (
	"slices"
	"time"
)

// estimator turns bytes of work into time (see "Estimates" in the package
// doc). It keeps two measurements:
//
//   - the CPU time the last computations took per byte of work: what a
//     slot costs with nothing else running, the best case, whatever else
//     wants the CPU while it is measured;
//   - for the last callers held on an estimate, the wait they got over
//     the wait their estimate promised at the best: what the throughput
//     the scheduler actually reached made of its promises, TLS handshakes,
//     the store, GC and other processes included.
//
// An estimate is the best case times a margin: the ratio that most recent
// promises stayed within.
//
// A plain helper: the Scheduler calls it under its lock.
type estimator struct {
	nsPerByte float64   // the median of cpu, or a guess before any
	samples   int       // computations measured so far
	cpu       []float64 // the last computations' CPU time per byte
	nextCPU   int       // where cpu takes its next value once full

	errs    []float64 // the last promised waits' actual / promised
	nextErr int       // where errs takes its next value once full

	slots     int
	kinds     map[batchKind]int // batches that computed, by kind (see firstOfKind)
	recent    []completion      // the last completions with every slot busy, oldest first
	busySince time.Time         // the first completion of the current run with every slot busy

	// Kept as their inputs change, not at each estimate: errQuantile is
	// errs' marginQuantile (0 until there are minErrs), slow is slowdown().
	errQuantile, slow float64
}

// completion is a computation ending with every slot busy.
type completion struct {
	at   time.Time
	work int64
}

const (
	// initialNsPerByte assumes 100 ms for a k3s default hash (32 MiB of
	// work) until the first computation has been measured.
	initialNsPerByte = 100e6 / float64(32<<20)
	// warmSamples is how many computations must have been measured
	// before estimates are made: the first of each slot pays for its
	// buffer's first use, and one alone could be anything.
	warmSamples = 4
	// window is how many computations and promised waits the fastest
	// computation and the margin are taken over, and minErrs how many
	// promises the margin needs before it replaces defaultMargin.
	window        = 64
	minErrs       = 8
	defaultMargin = 1.1
	// minPromise: only promises of at least MaxWait/minPromise teach the
	// margin. The margin matters for the callers whose wait is near
	// MaxWait, and a short promise is off by a scheduling hiccup.
	minPromise = 4
	// throughputWindow is how many completions the slowdown is measured
	// over, and minThroughput how many it needs.
	throughputWindow = 32
	minThroughput    = 8
	// maxMargin bounds the margin: past it the machine is so short of CPU
	// that holding anyone is a gamble.
	maxMargin = 4
	// marginQuantile is the share of recent promises that the margin
	// would have kept.
	marginQuantile = 0.9
)

func newEstimator(slots int) estimator {
	return estimator{nsPerByte: initialNsPerByte, slots: slots, kinds: make(map[batchKind]int)}
}

// batchKind is what a batch's first runs pay for: its class and how many
// jobs it computed (its buffers, and the scrypt kernel of that width).
type batchKind struct {
	class Class
	n     int
}

// maxKinds bounds the kinds remembered: stored hashes an attacker planted
// could make many. A kind past it is measured from its first batch.
const maxKinds = 64

// firstOfKind counts a batch of class that computed n jobs and reports
// whether it is one of the first slots batches of its kind, which the
// estimates do not learn from (see "Warm-up" in the package doc).
func (e *estimator) firstOfKind(class Class, n int) bool {
	k := batchKind{class, n}
	seen, ok := e.kinds[k]
	if !ok && len(e.kinds) >= maxKinds {
		return false
	}
	e.kinds[k] = seen + 1
	return seen < e.slots
}

// observe learns from a batch of jobs computations, work bytes in all,
// that ended at now after wall on the wall clock and cpu of CPU time (0
// if unknown); busy says whether every slot was busy until then and the
// freed slot is taken at once, so that the time since the previous such
// completion measures the throughput. Each job counts as one computation
// of the batch's CPU time per byte.
func (e *estimator) observe(work int64, jobs int, wall, cpu time.Duration, now time.Time, busy bool) {
	if !busy {
		e.recent = e.recent[:0] // a gap with a slot idle says nothing of the rate
	} else if work > 0 {
		if len(e.recent) == 0 {
			e.busySince = now
		}
		if len(e.recent) == throughputWindow {
			e.recent = slices.Delete(e.recent, 0, 1)
		}
		e.recent = append(e.recent, completion{at: now, work: work})
	}
	if wall <= 0 || work <= 0 {
		e.slow = e.slowdown()
		return
	}
	if cpu <= 0 || cpu > wall {
		cpu = wall // no CPU clock: the wall clock says it all
	}
	for range max(jobs, 1) {
		e.samples++
		e.cpu, e.nextCPU = push(e.cpu, e.nextCPU, float64(cpu)/float64(work))
	}
	e.nsPerByte = medianOf(e.cpu)
	e.slow = e.slowdown()
}

// push adds v to ring, a window of at most window values whose next one
// goes at next once it is full, and returns both.
func push(ring []float64, next int, v float64) ([]float64, int) {
	if len(ring) < window {
		return append(ring, v), next
	}
	ring[next] = v
	return ring, (next + 1) % window
}

// warm reports whether enough computations have been measured for
// estimates: before that every estimate is a guess.
func (e *estimator) warm() bool { return e.samples >= warmSamples }

// median is how long a byte of work takes on a slot with nothing else
// wanting the CPU, in ns: the last computations' median CPU time per
// byte.
func (e *estimator) median() float64 { return e.nsPerByte }

// fastest is the least CPU time per byte of the last computations (median
// until one is measured): what "cannot come in time even at the best"
// is judged by, so that the average's drift does not send a held caller
// away.
func (e *estimator) fastest() float64 {
	if len(e.cpu) == 0 {
		return e.nsPerByte
	}
	return slices.Min(e.cpu)
}

// duration estimates a computation of work bytes at perByte ns per byte.
func duration(work int64, perByte float64) time.Duration {
	return time.Duration(perByte * float64(work))
}

// promised learns that a caller promised a wait of promised (at the best)
// got actual.
func (e *estimator) promised(promised, actual time.Duration) {
	if promised <= 0 {
		return
	}
	e.errs, e.nextErr = push(e.errs, e.nextErr, float64(actual)/float64(promised))
	if len(e.errs) >= minErrs {
		s := slices.Clone(e.errs)
		slices.Sort(s)
		e.errQuantile = s[min(int(marginQuantile*float64(len(s))), len(s)-1)]
	}
}

// margin is what waits at the best are multiplied by, between 1 and
// maxMargin: the ratio of actual to promised waits that marginQuantile of
// the recent promises stayed within (defaultMargin until there are
// minErrs of them).
func (e *estimator) margin() float64 {
	m := defaultMargin
	if e.errQuantile > 0 {
		m = e.errQuantile
	}
	return min(max(m, 1), maxMargin)
}

// wait is how long a wait of best at the best case is expected to take
// from now: best times the margin, or, while the last completions show a
// larger slowdown, that slowdown for as long again as it has lasted (since
// every slot has been busy) and the margin after.
//
// A slowdown that has lasted a fraction of a second (a herd's arrivals:
// goroutines, TLS handshakes) then adds about that fraction, not its
// ratio over the whole wait; one that has lasted seconds (another process
// taking a CPU) counts for seconds more.
func (e *estimator) wait(best time.Duration, now time.Time) time.Duration {
	m := e.margin()
	s := min(e.slow, maxMargin)
	if s <= m { // slow is 0 until the last busy completions are enough
		return time.Duration(float64(best) * m)
	}
	lasted := float64(max(now.Sub(e.busySince), 0))
	slow := min(float64(best), lasted/s) // the part of best done at the slowdown
	return time.Duration(slow*s + (float64(best)-slow)*m)
}

// slowdown is how much slower than at the best the last computations
// ended while every slot was busy: the throughput they reached against
// that of their CPU time, whatever else took the CPU meanwhile (a herd's
// TLS handshakes, say); 0 until there are minThroughput of them. Promises
// show the same only once callers held for long have been answered; this
// shows it within a few dozen computations, so that callers are not held
// on the best case while the CPU goes elsewhere.
func (e *estimator) slowdown() float64 {
	n := len(e.recent)
	if n < minThroughput {
		return 0
	}
	span := e.recent[n-1].at.Sub(e.recent[0].at)
	var work int64
	for _, c := range e.recent[1:] {
		work += c.work
	}
	if span <= 0 || work <= 0 || e.nsPerByte <= 0 {
		return 0
	}
	return float64(e.slots) * float64(span) / float64(work) / e.nsPerByte
}

// medianOf returns the median of v, which must not be empty; v is left as
// it is.
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
