package sched

import (
	"slices"
	"time"
)

// estimator turns bytes of work into time, as "Estimates" in the package
// doc says. The Scheduler calls it under its lock.
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

	// Kept as their inputs change: errQuantile is errs' marginQuantile (0
	// until there are minErrs), slow is slowdown().
	errQuantile, slow float64
}

// completion is a computation ending with every slot busy.
type completion struct {
	at   time.Time
	work int64
}

// The package doc ("Estimates") gives these their meaning.
const (
	initialNsPerByte = 100e6 / float64(32<<20) // 100 ms a k3s hash, until measured
	warmSamples      = 4                       // computations measured before estimates
	window           = 64                      // computations and promises remembered
	minErrs          = 8                       // promises before the margin replaces defaultMargin
	defaultMargin    = 1.1
	minPromise       = 4  // promises of MaxWait/minPromise or more teach the margin: shorter ones are off by a hiccup
	throughputWindow = 32 // completions the slowdown is measured over
	minThroughput    = 8  // and needs
	maxMargin        = 4  // past it, holding anyone is a gamble
	marginQuantile   = 0.9
)

func newEstimator(slots int) estimator {
	return estimator{nsPerByte: initialNsPerByte, slots: slots, kinds: make(map[batchKind]int)}
}

// batchKind is what a batch's first runs pay for: buffers and kernels of
// its class and width.
type batchKind struct {
	class Class
	n     int
}

// maxKinds bounds the kinds remembered (planted hashes could make many);
// a kind past it is measured from its first batch.
const maxKinds = 64

// firstOfKind counts a batch of class that computed n jobs and reports
// whether it is one of the first slots of its kind.
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
// that ended at now after wall (and cpu of CPU time, 0 if unknown); busy
// says whether its slot is taken again at once, so that completions
// measure the throughput. Each job counts the batch's CPU time per byte.
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

// push adds v to ring, at most window values, next the place of the
// next once full.
func push(ring []float64, next int, v float64) ([]float64, int) {
	if len(ring) < window {
		return append(ring, v), next
	}
	ring[next] = v
	return ring, (next + 1) % window
}

// warm reports whether enough computations are measured for estimates.
func (e *estimator) warm() bool { return e.samples >= warmSamples }

// fastest is the least CPU time per byte of the last computations.
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

// promised learns that a caller promised promised (at the best) got actual.
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

// margin is what waits at the best are multiplied by.
func (e *estimator) margin() float64 {
	m := defaultMargin
	if e.errQuantile > 0 {
		m = e.errQuantile
	}
	return min(max(m, 1), maxMargin)
}

// wait is how long a wait of best at the best case is expected to take
// from now: best times the margin, or, while the last completions show a
// larger slowdown, that slowdown for as long again as it has lasted and
// the margin after.
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

// slowdown is how much slower than at the best the last completions with
// every slot busy came, against their CPU time (a herd's TLS handshakes
// take CPU too); 0 until there are minThroughput. It shows within a few
// dozen computations what promises show only once callers are answered.
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

// medianOf returns the median of v, not empty, left as it is.
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
