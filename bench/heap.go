package bench

import "runtime/metrics"

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
	return HeapReading{Live: v(0), Objects: v(1), GCCycles: v(2)}
}
