package scrypt

import "sync"

// A Pool keeps the working buffers of the computations that take theirs
// from it ([Pool.KeyBatch]) for the next ones. Its idle buffers never
// take more memory than its buffers in use at the busiest moment since
// it was last emptied (its peak): a new buffer that would pass that sum
// first drops the oldest idle ones. A herd at one parameter set keeps
// its buffers; hashes of ever new sizes (a stored hash an attacker
// planted for each) replace one another instead of piling up. So a
// caller that bounds the bytes its calls hold at once bounds the pool's
// too, idle buffers included.
//
// [Key] and [KeyBatch] use a package-wide Pool; a program that runs
// several independent users of scrypt (two verifiers, say) gives each
// a Pool of its own, so that one's [Pool.Release] leaves the other's
// buffers alone. The zero Pool is empty and ready to use; a Pool is safe
// for concurrent use and must not be copied after first use.
type Pool struct {
	mu    sync.Mutex
	idle  [][]uint32 // oldest first
	idleB int64      // bytes in idle
	inUse int64      // bytes handed out and not back
	peak  int64      // the most inUse since the pool was last emptied
}

// shared is the Pool of Key and KeyBatch.
var shared Pool

func (p *Pool) get(n int) []uint32 {
	size := 4 * int64(n)
	p.mu.Lock()
	p.inUse += size
	for i := len(p.idle) - 1; i >= 0; i-- {
		if b := p.idle[i]; len(b) == n {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.idleB -= size
			p.mu.Unlock()
			return b
		}
	}
	p.peak = max(p.peak, p.inUse)
	for p.idleB+p.inUse > p.peak {
		p.idleB -= 4 * int64(len(p.idle[0]))
		p.idle[0] = nil
		p.idle = p.idle[1:]
	}
	p.mu.Unlock()
	// A new buffer is counted in use already; making it (and advising
	// huge pages) needs no lock.
	b := make([]uint32, n)
	adviseHuge(b)
	return b
}

// put clears b (it held password-derived state) and makes it idle.
func (p *Pool) put(b []uint32) {
	clear(b)
	size := 4 * int64(len(b))
	p.mu.Lock()
	p.inUse -= size
	p.idle = append(p.idle, b)
	p.idleB += size
	p.mu.Unlock()
}

// Release drops every idle buffer of p, for the garbage collector to
// free: a process that is done hashing for a while can give the memory
// back. Buffers in use are not affected; p then keeps no more idle than
// is in use at the busiest moment from now on.
func (p *Pool) Release() {
	p.mu.Lock()
	clear(p.idle)
	p.idle, p.idleB, p.peak = nil, 0, p.inUse
	p.mu.Unlock()
}

// Idle returns the number of idle buffers in p and their size in bytes.
func (p *Pool) Idle() (n int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle), p.idleB
}

// ReleaseBuffers is Release of the package-wide Pool that Key and
// KeyBatch use.
func ReleaseBuffers() { shared.Release() }

// IdleBuffers is Idle of the package-wide Pool that Key and KeyBatch use.
func IdleBuffers() (n int, bytes int64) { return shared.Idle() }
