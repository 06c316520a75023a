package scrypt

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// TestPoolsApart: a Pool's Release drops its own idle buffers and leaves
// another Pool's, and the package-wide one's, alone.
func TestPoolsApart(t *testing.T) {
	var a, b Pool
	job := func() []Job {
		return []Job{{Password: []byte("pw"), Salt: []byte("s"), N: 1 << 8, R: 1, P: 1, KeyLen: 32}}
	}
	a.KeyBatch(job(), Lanes())
	b.KeyBatch(job(), Lanes())
	a.Release()
	if n, _ := a.Idle(); n != 0 {
		t.Errorf("%d idle after Release", n)
	}
	if n, size := b.Idle(); n != 1 || size != bufferBytes(32*(1<<8+2)) {
		t.Errorf("the other Pool: %d idle, %d bytes; want its buffer kept", n, size)
	}
}

// TestPoolKeyBatchLanes: Pool.KeyBatch with maxLanes holds at most that
// many buffers (a power of two at most Lanes()), whatever the jobs' P,
// and gives the keys Key gives.
func TestPoolKeyBatchLanes(t *testing.T) {
	for _, most := range []int{0, 1, 2, 3, 4, 8, 64} {
		t.Run(fmt.Sprint("lanes=", most), func(t *testing.T) {
			var p Pool
			jobs := []Job{
				{Password: []byte("a"), Salt: []byte("s"), N: 1 << 6, R: 2, P: 13, KeyLen: 32}, // 17 blocks: more than Lanes()
				{Password: []byte("b"), Salt: []byte("s"), N: 1 << 6, R: 2, P: 1, KeyLen: 32},
				{Password: []byte("c"), Salt: []byte("s"), N: 1 << 6, R: 2, P: 3, KeyLen: 32},
			}
			p.KeyBatch(jobs, most)
			for _, j := range jobs {
				want, _ := Key(j.Password, j.Salt, j.N, j.R, j.P, j.KeyLen)
				if j.Err != nil || !bytes.Equal(j.Key, want) {
					t.Fatalf("job %s: %x, %v; want Key's %x", j.Password, j.Key, j.Err, want)
				}
			}
			held := max(1, min(most, Lanes()))
			for held&(held-1) != 0 {
				held--
			}
			if n := idleOf(&p, 32*2*(1<<6+2)); n != held {
				t.Errorf("%d buffers held, want %d", n, held)
			}
		})
	}
}

// TestPerHash: PerHash reports the fastest kernel measured at (N, r) of
// each width, and nothing for widths or classes not measured.
func TestPerHash(t *testing.T) {
	resetChoices(t)
	ch := choiceFor(class{N: 1 << 12, r: 8, n: 1})
	for _, k := range ch.cands {
		ch.record(k, 100, time.Duration(16-int(k))*time.Millisecond)
	}
	d, ok := PerHash(1<<12, 8, 1)
	var want float64
	for _, k := range ch.cands {
		if v := ch.fastest[k] * float64(1<<12); want == 0 || v < want {
			want = v
		}
	}
	if !ok || d != time.Duration(want) {
		t.Errorf("one lane: %v, %v; want %v", d, ok, time.Duration(want))
	}
	if _, ok := PerHash(1<<12, 8, 2); ok && lanes >= 2 {
		t.Error("a width no class measured has a time")
	}
	if _, ok := PerHash(1<<13, 8, 1); ok {
		t.Error("a class never measured has a time")
	}
}

// TestPoolBuffersAligned: every buffer a Pool hands out starts on a
// 64-byte boundary, a cache line, whatever its size: the word-sliced
// kernel writes V in whole lines with non-temporal stores, which fault
// on a buffer that is not.
func TestPoolBuffersAligned(t *testing.T) {
	var p Pool
	defer p.Release()
	for _, words := range []int{1, 7, 16, 33, 100, 1000, 4099, 1 << 14, 1<<16 + 3} {
		for range 4 {
			b := p.get(words)
			if len(b) != words {
				t.Fatalf("get(%d): %d words", words, len(b))
			}
			if a := uintptr(unsafe.Pointer(&b[0])) % 64; a != 0 {
				t.Fatalf("get(%d): the buffer starts %d bytes past a 64-byte boundary", words, a)
			}
			defer p.put(b)
		}
	}
}

// idleOf is how many of p's idle buffers have words words: the lanes'
// buffers, say, and not a kernel's scratch.
func idleOf(p *Pool, words int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.idle.bufs {
		if len(e.b) == words {
			n++
		}
	}
	return n
}

// TestKeyBatchBytes: what KeyBatch allocates on a new Pool, with every
// kernel, is within KeyBatchBytes: its buffers and the kernel's scratch,
// PBKDF2's outputs, the keys, in shapes where a lane's V undercounts
// them (a small N with a large r, a large p) and in batches of mixed
// parameters with jobs Key refuses.
func TestKeyBatchBytes(t *testing.T) {
	job := func(logN, r, p, keyLen int) Job {
		return Job{Password: []byte("pw"), Salt: []byte("salt"), N: 1 << logN, R: r, P: p, KeyLen: keyLen}
	}
	repeat := func(j Job, n int) []Job { return slices.Repeat([]Job{j}, n) }
	batches := map[string][]Job{
		"small N, large r":   {job(1, 1<<11, 16, 64)},
		"large p":            {job(1, 1, 1<<12, 64)},
		"k3s's r and p":      repeat(job(8, 8, 1, 64), 16),
		"a lone key":         {job(6, 4, 1, 1024)},
		"mixed and refused":  append(repeat(job(4, 64, 4, 32), 5), job(5, 3, 2, 16), job(3, 0, 1, 16), job(3, 3, 1, 1), job(4, 64, 1, 17)),
		"more jobs than all": repeat(job(2, 16, 3, 64), 40),
	}
	forEachKernel(t, func(t *testing.T, k kernel) {
		for name, jobs := range batches {
			for _, most := range []int{1, 3, maxLanes} {
				// TotalAlloc counts the whole process: a timer or a
				// goroutine of an earlier test may allocate meanwhile,
				// and only add. So the least of three tries counts.
				got := uint64(math.MaxUint64)
				for range 3 {
					var p Pool
					var before, after runtime.MemStats
					mapped := OffHeapBytes()
					runtime.ReadMemStats(&before)
					p.KeyBatch(jobs, most)
					runtime.ReadMemStats(&after)
					mapped = OffHeapBytes() - mapped
					got = min(got, after.TotalAlloc-before.TotalAlloc+uint64(mapped))
					p.Release()
				}
				if counted := KeyBatchBytes(jobs, most); got > uint64(counted) {
					t.Errorf("%s, %d lanes: KeyBatch allocated %d bytes, KeyBatchBytes counts %d", name, most, got, counted)
				}
			}
		}
	})
}

// TestPoolIdleMakesRoom: bytes a computation holds besides its buffers
// (Pool.hold) drop idle buffers as a new buffer would, so that idle and
// in use together stay within the peak, and come back when released.
func TestPoolIdleMakesRoom(t *testing.T) {
	var p Pool
	defer p.Release()
	var bufs [][]uint32
	for range 4 {
		bufs = append(bufs, p.get(1<<14))
	}
	for _, b := range bufs {
		p.put(b)
	}
	peak := 4 * bufferBytes(1<<14)
	release := p.hold(3 * bufferBytes(1<<14))
	p.mu.Lock()
	idle, inUse := p.idleB, p.inUse
	p.mu.Unlock()
	if idle+inUse > peak || idle != bufferBytes(1<<14) {
		t.Fatalf("holding 3 buffers' bytes: %d idle, %d in use; want 1 buffer idle, at most %d in all", idle, inUse, peak)
	}
	release()
	p.mu.Lock()
	inUse = p.inUse
	p.mu.Unlock()
	if inUse != 0 {
		t.Fatalf("%d bytes in use after the release", inUse)
	}
}

// TestPoolUnmaps: a buffer outside the Go heap (a huge page or more, on
// Linux) is unmapped when its Pool drops it, and when its Pool becomes
// garbage with the buffer idle; OffHeapBytes counts it while it is
// mapped.
func TestPoolUnmaps(t *testing.T) {
	const words = 2 << 20 / 4 // a huge page
	var p Pool
	before := OffHeapBytes()
	b := p.get(words)
	b[0], b[words-1] = 1, 2 // it is memory
	p.put(b)
	n := OffHeapBytes() - before
	if n == 0 {
		if OffHeapBytes() != 0 {
			t.Fatalf("OffHeapBytes %d where buffers live on the Go heap", OffHeapBytes())
		}
		t.Skip("buffers live on the Go heap here")
	}
	if m := mappingOf(b); n != bufferBytes(words) || m == (mapping{}) {
		t.Fatalf("OffHeapBytes rose by %d for a buffer of %d bytes, mapped %v", n, bufferBytes(words), m != (mapping{}))
	}
	p.Release()
	if got := OffHeapBytes(); got != before {
		t.Fatalf("OffHeapBytes %d after Release, %d before the buffer", got, before)
	}
	q := new(Pool)
	q.put(q.get(words))
	q = nil
	deadline := time.Now().Add(10 * time.Second)
	for OffHeapBytes() != before {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still mapped 10 s after their Pool became garbage", OffHeapBytes()-before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestScrubLeavesTheLock: the scrub clears an idle buffer without the
// Pool's lock, so that a get that comes meanwhile takes another idle
// buffer at once (a request right after a herd: on d6fdf27 it waited for
// the whole scrub, up to the budget's worth of buffers); a get that needs
// the very buffer being cleared has it at the end of the chunk.
func TestScrubLeavesTheLock(t *testing.T) {
	const words = 4 * scrubChunk
	for _, idle := range []int{2, 1} {
		t.Run(fmt.Sprint("idle=", idle), func(t *testing.T) {
			var p Pool
			var bufs [][]uint32
			for range idle {
				bufs = append(bufs, p.get(words))
			}
			for _, b := range bufs {
				p.put(b)
			}
			entered, release := make(chan []uint32), make(chan struct{})
			defer func(f func([]uint32)) { clearChunk = f }(clearChunk)
			clearChunk = func(b []uint32) {
				select {
				case entered <- b:
					<-release
				case <-release:
				}
				clear(b)
			}
			p.mu.Lock()
			for i := range p.idle.bufs {
				p.idle.bufs[i].dirty = time.Now().Add(-scrubAfter) // stale
			}
			p.mu.Unlock()
			go p.scrubIdle()
			scrubbing := <-entered // in its first chunk
			got := make(chan []uint32)
			go func() { got <- p.get(words) }()
			if idle == 1 {
				close(release) // the get waits for the end of the chunk
			}
			var b []uint32
			select {
			case b = <-got:
			case <-time.After(10 * time.Second): // a guard against a deadlock, not a timing
				t.Fatal("a get waited for the scrub of another buffer")
			}
			if taken := &b[0] == &scrubbing[0]; taken != (idle == 1) {
				t.Fatalf("%d idle: get took the buffer being cleared: %v", idle, taken)
			}
			if idle == 2 {
				close(release)
			}
			p.put(b)
			p.Release() // stops the scrub, if it still runs
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.idleB != 0 || p.inUse != 0 || p.scrubDone != nil {
				t.Errorf("after Release: %d bytes idle, %d in use, scrub running %v", p.idleB, p.inUse, p.scrubDone != nil)
			}
		})
	}
}

// TestHeapBytesBound: heapBytes is at least what the runtime makes of an
// allocation, its size class or whole pages, which append reports as the
// capacity it gives.
func TestHeapBytesBound(t *testing.T) {
	sizes := []int{1<<20 + 1, 1<<25 + 3}
	for n := 1; n < 1<<17; n += 1 + n/64 {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		if got := cap(append([]byte(nil), make([]byte, n)...)); int64(got) > heapBytes(int64(n)) {
			t.Errorf("an allocation of %d bytes takes %d, heapBytes counts %d", n, got, heapBytes(int64(n)))
		}
	}
}
