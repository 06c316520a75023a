package bench

import (
	"errors"
	"runtime"
	"runtime/metrics"
	"sync/atomic"

	"github.com/nodepass/nodepass/scrypt"
	"github.com/nodepass/nodepass/verify"
)

// HeapReading is one reading of the runtime's heap metrics
// (runtime/metrics), for the whole process.
type HeapReading struct {
	// Live is the heap the last finished GC cycle marked live
	// (/gc/heap/live:bytes): the figure Result.PeakHeap reports. It
	// changes only when a GC cycle ends, which an overloaded process can
	// delay by seconds.
	Live uint64
	// Objects is the heap objects allocated now, live or not yet swept
	// (/memory/classes/heap/objects:bytes): what the heap guard watches,
	// and Result.PeakHeapObjects reports. It moves with every allocation.
	Objects uint64
	// GCCycles counts the GC cycles finished so far
	// (/gc/cycles/total:gc-cycles).
	GCCycles uint64
	// OffHeap is nodepass's scrypt buffers outside the Go heap
	// (scrypt.OffHeapBytes: on Linux, every buffer of 2 MiB or more),
	// which no heap metric counts.
	OffHeap uint64
}

// heapMetrics are the metrics ReadHeap reads, in HeapReading's order.
var heapMetrics = [...]string{"/gc/heap/live:bytes", "/memory/classes/heap/objects:bytes", "/gc/cycles/total:gc-cycles"}

// ReadHeap reads the heap metrics now. A metric this runtime does not
// publish reads as 0. It does not stop the world and is safe for
// concurrent use: the heap guard calls it before every scrypt call of the
// unbounded models.
func ReadHeap() HeapReading {
	var s [len(heapMetrics)]metrics.Sample
	for i, name := range heapMetrics {
		s[i].Name = name
	}
	metrics.Read(s[:])
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return HeapReading{Live: v(0), Objects: v(1), GCCycles: v(2), OffHeap: uint64(max(scrypt.OffHeapBytes(), 0))}
}

// ScryptBuffers is the most a nodepass Verifier of this process may hold
// in scrypt buffers at logN (r 8, as k3s) with verify.Options.ScryptMemory
// set to scryptMemory (0: its default, taken as its most,
// verify.DefaultScryptMemory; negative: no budget): the budget, or all
// its slots' lanes where that is less, GOMAXPROCS × scrypt.Lanes() ×
// 128·r·(N+2).
func ScryptBuffers(scryptMemory int64, logN int) int64 {
	all := int64(runtime.GOMAXPROCS(0)*scrypt.Lanes()) * 128 * 8 * (1<<logN + 2)
	switch {
	case scryptMemory == 0:
		return min(all, verify.DefaultScryptMemory)
	case scryptMemory < 0:
		return all
	}
	return min(all, scryptMemory)
}

// heapSlack is what Result.HeapBound allows beside the scrypt buffers:
// the rest of the servers' heap.
const heapSlack = 100 << 20

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

func (g *heapGuard) stop() {
	if g.tripped.CompareAndSwap(false, true) {
		close(g.done)
	}
}
