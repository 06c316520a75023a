package scrypt

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// A Pool keeps the working buffers of the computations that take theirs
// from it ([Pool.KeyBatch]) for the next ones. Its idle buffers never
// take more memory than was in use at the busiest moment since it was
// last emptied: new bytes in use that would pass that first drop the
// oldest idle buffers. So a caller that bounds the bytes its calls hold
// at once ([KeyBatchBytes]) bounds the pool's too.
//
// [Key] and [KeyBatch] use a package-wide Pool; independent users of
// scrypt (two verifiers) each take their own. The zero Pool is empty and
// ready to use; a Pool is safe for concurrent use and must not be copied
// after first use.
type Pool struct {
	mu    sync.Mutex
	idle  *idleList // made by the first put
	idleB int64     // bytes in idle (bufferBytes)
	inUse int64     // bytes handed out or held (hold) and not back
	peak  int64     // the most inUse since the pool was last emptied
	// scrubArmed: a timer will run scrubIdle. Each arming makes a new
	// timer, never Reset or Stop of an old one, which a testing/synctest
	// bubble other than its own may not touch.
	scrubArmed bool
	// scrubDone is open while scrubIdle clears a buffer (scrubbing);
	// whoever would take that one out sets scrubStop and waits for it.
	scrubDone chan struct{}
	scrubStop atomic.Bool
}

// idleList is a Pool's idle buffers, oldest first, in an allocation of
// their own, which a cleanup frees when the Pool becomes garbage.
type idleList struct{ bufs []idleBuf }

// An idleBuf is an idle buffer; dirty is when it came back holding a
// computation's password-derived state, zero once cleared.
type idleBuf struct {
	b         []uint32
	dirty     time.Time
	scrubbing bool // being cleared outside the lock (scrubIdle)
}

// OffHeapBytes returns the bytes of scrypt buffers mapped outside the Go
// heap now, by every Pool of the process: on Linux, every buffer of a
// huge page (2 MiB) or more; 0 elsewhere. The runtime's figures
// (runtime/metrics, runtime.MemStats) do not count them. It is safe for
// concurrent use.
func OffHeapBytes() int64 { return offHeap.Load() }

// offHeap counts the bytes OffHeapBytes returns.
var offHeap atomic.Int64

// scrubAfter is how long a buffer may stay idle with password-derived
// state in it (see the package doc).
const scrubAfter = 100 * time.Millisecond

// shared is the Pool of Key and KeyBatch.
var shared Pool

func (p *Pool) get(n int) []uint32 {
	if b := p.use(bufferBytes(int64(n)), n); b != nil {
		return b // dirty or not: the computation overwrites it
	}
	// A new buffer is counted in use already; making it needs no lock.
	b := newWords(n)
	return b
}

// hold counts n bytes a computation allocates besides its buffers as in
// use, so that idle buffers make room for them, and returns the call
// that gives them back.
func (p *Pool) hold(n int64) (release func()) {
	p.use(n, 0)
	return func() {
		p.mu.Lock()
		p.inUse -= n
		p.mu.Unlock()
	}
}

// use counts size bytes in use. With words > 0 it returns an idle buffer
// of that many words if there is one (see takeLocked); otherwise (nil)
// the bytes are new, and it first drops the oldest idle buffers, as many
// as keep the bytes idle and in use within the peak.
func (p *Pool) use(size int64, words int) []uint32 {
	p.mu.Lock()
	p.inUse += size
	if b := p.takeLocked(words); b != nil {
		p.idleB -= size
		p.mu.Unlock()
		return b
	}
	p.peak = max(p.peak, p.inUse)
	var dropped []idleBuf
	for l := p.listLocked(); p.idleB+p.inUse > p.peak; {
		if l.bufs[0].scrubbing {
			p.stopScrubLocked()
			continue
		}
		p.idleB -= bufferBytes(int64(len(l.bufs[0].b)))
		dropped = append(dropped, l.bufs[0])
		l.bufs[0] = idleBuf{}
		l.bufs = l.bufs[1:]
	}
	p.mu.Unlock()
	drop(dropped)
	return nil
}

// takeLocked takes out of idle its newest buffer of words words, nil if
// none: the one the scrub is clearing only if no other fits, once the
// scrub has let go of it.
func (p *Pool) takeLocked(words int) []uint32 {
	for l := p.listLocked(); words > 0; {
		i := -1
		for k, e := range l.bufs {
			if len(e.b) == words && (i < 0 || !e.scrubbing) {
				i = k
			}
		}
		switch {
		case i < 0:
			return nil
		case l.bufs[i].scrubbing:
			p.stopScrubLocked()
			continue
		}
		b := l.bufs[i].b
		l.bufs = slices.Delete(l.bufs, i, i+1)
		return b
	}
	return nil
}

// listLocked returns p's idle list, made with its cleanup on first use.
func (p *Pool) listLocked() *idleList {
	if p.idle == nil {
		p.idle = new(idleList)
		runtime.AddCleanup(p, func(l *idleList) { drop(l.bufs) }, p.idle)
	}
	return p.idle
}

// alignedWords returns n zero words that start on a 64-byte boundary,
// which the word-sliced kernel's non-temporal stores need.
func alignedWords(n int) []uint32 {
	b := make([]uint32, n+15)
	off := (64 - int(uintptr(unsafe.Pointer(&b[0]))%64)) % 64 / 4
	return b[off : off+n : off+n]
}

// heapBuffer is what a buffer of n words from alignedWords takes of the
// heap.
func heapBuffer(n int64) int64 { return heapBytes(4 * (n + 15)) }

// heapBytes bounds what the Go heap takes for an allocation of n bytes:
// it rounds a small one up to its size class, at most a quarter and 16
// bytes more, and a large one (past 32 KiB) up to whole 8 KiB pages.
func heapBytes(n int64) int64 { return n + min(n/4+16, 8<<10) }

// put makes b idle until it is taken again or dropped, cleared by then
// or scrubAfter later.
func (p *Pool) put(b []uint32) {
	size := bufferBytes(int64(len(b)))
	p.mu.Lock()
	p.inUse -= size
	l := p.listLocked()
	l.bufs = append(l.bufs, idleBuf{b: b, dirty: time.Now()})
	p.idleB += size
	p.armLocked(scrubAfter)
	p.mu.Unlock()
}

// armLocked makes the scrub run in d, unless it is armed already.
func (p *Pool) armLocked(d time.Duration) {
	if !p.scrubArmed {
		p.scrubArmed = true
		time.AfterFunc(d, p.scrubIdle)
	}
}

// scrubIdle clears the buffers dirty for scrubAfter or more, oldest
// first, one at a time, without the lock: a request that comes meanwhile
// waits for none of it. One that needs the buffer being cleared stops it
// at the end of a chunk, and the scrub comes back scrubAfter later.
func (p *Pool) scrubIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scrubArmed = false
	for l := p.listLocked(); p.scrubDone == nil; { // else another run clears
		// Buffers come back in order: the first dirty one is the oldest.
		i := slices.IndexFunc(l.bufs, func(e idleBuf) bool { return !e.dirty.IsZero() })
		if i < 0 {
			return
		}
		if age := time.Since(l.bufs[i].dirty); age < scrubAfter {
			p.armLocked(scrubAfter - age)
			return
		}
		l.bufs[i].scrubbing, p.scrubDone = true, make(chan struct{})
		b := l.bufs[i].b
		p.mu.Unlock()
		cleared := true
		for k := 0; k < len(b) && cleared; k += scrubChunk {
			if cleared = !p.scrubStop.Load(); cleared {
				clearChunk(b[k:min(k+scrubChunk, len(b))])
			}
		}
		p.mu.Lock()
		// Still idle: whoever would take it out waits for scrubDone.
		i = slices.IndexFunc(l.bufs, func(e idleBuf) bool { return e.scrubbing })
		l.bufs[i].scrubbing = false
		if cleared {
			l.bufs[i].dirty = time.Time{}
		}
		close(p.scrubDone)
		p.scrubDone = nil
		if p.scrubStop.Swap(false) {
			p.armLocked(scrubAfter)
			return
		}
	}
}

// stopScrubLocked asks the scrub to let go of its buffer and waits,
// without the lock: the caller looks at idle again.
func (p *Pool) stopScrubLocked() {
	done := p.scrubDone
	p.scrubStop.Store(true)
	p.mu.Unlock()
	<-done
	p.mu.Lock()
}

// scrubChunk is how many words the scrub clears between two looks at
// scrubStop: 256 KiB, tens of microseconds. clearChunk clears them
// (tests make it wait).
const scrubChunk = 64 << 10

var clearChunk = func(b []uint32) { clear(b) }

// drop frees buffers no Pool keeps: unmapped, or cleared if dirty and
// left to the garbage collector.
func drop(es []idleBuf) {
	for _, e := range es {
		if m := mappingOf(e.b); m != (mapping{}) {
			m.unmap()
		} else if !e.dirty.IsZero() {
			clear(e.b)
		}
	}
}

// Release drops every idle buffer of p, so that a process done hashing
// for a while gives the memory back; p then keeps no more idle than is in
// use at the busiest moment from now on.
func (p *Pool) Release() {
	p.mu.Lock()
	for p.scrubDone != nil {
		p.stopScrubLocked()
	}
	var dropped []idleBuf
	if l := p.idle; l != nil { // nil: nothing was ever put
		dropped, l.bufs = l.bufs, nil
	}
	p.idleB, p.peak = 0, p.inUse
	p.scrubArmed = false // a pending scrub finds nothing; the next put arms one
	p.mu.Unlock()
	drop(dropped)
}

// Idle returns the number of idle buffers in p and the bytes they take.
func (p *Pool) Idle() (n int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle == nil {
		return 0, 0
	}
	return len(p.idle.bufs), p.idleB
}

// ReleaseBuffers is Release of the package-wide Pool that Key and
// KeyBatch use.
func ReleaseBuffers() { shared.Release() }

// IdleBuffers is Idle of the package-wide Pool that Key and KeyBatch use.
func IdleBuffers() (n int, bytes int64) { return shared.Idle() }
