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
	// maxMargin bounds the margin: past it the machine is so short of CPU
	// that holding anyone is a gamble.
	maxMargin = 4
	// marginQuantile is the share of recent promises that the margin
	// would have kept.
	marginQuantile = 0.9
)

func newEstimator() estimator {
	return estimator{nsPerByte: initialNsPerByte}
}

// observe learns from a computation of work bytes that took wall on the
// wall clock and cpu of CPU time (0 if unknown).
func (e *estimator) observe(work int64, wall, cpu time.Duration) {
	if wall <= 0 || work <= 0 {
		return
	}
	if cpu <= 0 || cpu > wall {
		cpu = wall // no CPU clock: the wall clock says it all
	}
	e.samples++
	e.cpu, e.nextCPU = push(e.cpu, e.nextCPU, float64(cpu)/float64(work))
	e.nsPerByte = median(e.cpu)
}

// median returns the median of v, which must not be empty.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
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

// calibrate makes the estimates take perByte ns of CPU time per byte, as
// if that many computations had been measured.
func (e *estimator) calibrate(perByte float64) {
	e.cpu, e.nextCPU = append(e.cpu[:0], perByte), 0
	e.nsPerByte = perByte
	e.samples = max(e.samples, warmSamples)
}

// best is how long a byte of work takes on a slot with nothing else
// wanting the CPU, in ns: the last computations' median CPU time per
// byte.
func (e *estimator) best() float64 { return e.nsPerByte }

// fastest is the least CPU time per byte of the last computations (best
// until one is measured): what "cannot come in time even at the best"
// is judged by, so that the average's drift does not send a held caller
// away.
func (e *estimator) fastest() float64 {
	if len(e.cpu) == 0 {
		return e.nsPerByte
	}
	return slices.Min(e.cpu)
}

// expected is how long a byte of work is expected to take on a slot, in
// ns: the best case times the margin.
func (e *estimator) expected() float64 { return e.nsPerByte * e.margin() }

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
}

// margin is the ratio of actual to promised waits that marginQuantile of
// the recent promises stayed within, between 1 and maxMargin;
// defaultMargin until there are minErrs of them.
func (e *estimator) margin() float64 {
	if len(e.errs) < minErrs {
		return defaultMargin
	}
	s := slices.Clone(e.errs)
	slices.Sort(s)
	q := s[min(int(marginQuantile*float64(len(s))), len(s)-1)]
	return min(max(q, 1), maxMargin)
}
