package sched

import "time"

// estimator turns bytes of work into time: CPU time per byte, and the
// wall-clock slowdown over CPU time that contention adds (see the package
// doc). A plain helper: the Scheduler calls it under its lock.
type estimator struct {
	nsPerByte float64 // moving average of CPU time per byte of work
	slowdown  float64 // moving average of wall time over CPU time, >= 1
	samples   int     // measurements so far
}

const (
	// initialNsPerByte assumes 100 ms for a k3s default hash (32 MiB of
	// work) until the first computation has been measured.
	initialNsPerByte = 100e6 / float64(32<<20)
	// cpuWeight is the weight of a new measurement of CPU time per byte
	// once there are enough; before that the estimate is the plain mean
	// of the initial guess and the measurements.
	cpuWeight = 0.25
	// slowdownWeight is the weight of a new measurement of wall over CPU
	// time, and maxSlowdown its bound.
	slowdownWeight = 0.05
	maxSlowdown    = 16
)

func newEstimator() estimator {
	return estimator{nsPerByte: initialNsPerByte, slowdown: 1}
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
	sample := float64(cpu) / float64(work)
	e.nsPerByte += max(cpuWeight, 1/float64(e.samples+1)) * (sample - e.nsPerByte)
	ratio := min(float64(wall)/float64(cpu), maxSlowdown)
	e.slowdown += slowdownWeight * (ratio - e.slowdown)
}

// duration estimates a computation of work bytes taking slow times its
// CPU time.
func (e *estimator) duration(work int64, slow float64) time.Duration {
	return time.Duration(e.nsPerByte * slow * float64(work))
}
