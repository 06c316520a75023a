package bench

import (
	"errors"
	"sync/atomic"
)

// errGuardTripped is what an unbounded model answers, without running
// scrypt, once the heap guard has stopped the run.
var errGuardTripped = errors.New("bench: heap guard tripped: run stopped")

// heapGuard stops a run whose heap in use passes a limit. The run's
// sampler checks it every Scenario.SampleEvery, but a process saturated
// by hundreds of scrypt goroutines can keep the sampler off the CPUs for
// seconds (seen here: 2.5 s, by which time the heap had passed 8 GiB); so
// the unbounded models also ask the guard before every scrypt call, in
// the goroutine that would allocate, and allocate nothing once it has
// tripped. Up to the trip the models behave exactly as without it.
//
// It is safe for concurrent use; a nil *heapGuard admits everything.
type heapGuard struct {
	max     uint64
	tripped atomic.Bool
	done    chan struct{} // closed when it trips: the run is to stop
}

func newHeapGuard(max uint64) *heapGuard {
	return &heapGuard{max: max, done: make(chan struct{})}
}

// admit reports whether a computation that allocates bytes may start,
// tripping the guard when it would take the heap past the limit.
func (g *heapGuard) admit(bytes uint64) bool {
	if g == nil {
		return true
	}
	if g.tripped.Load() {
		return false
	}
	if ReadHeap().Objects+bytes > g.max {
		g.stop()
		return false
	}
	return true
}

// stop trips the guard.
func (g *heapGuard) stop() {
	if g.tripped.CompareAndSwap(false, true) {
		close(g.done)
	}
}
