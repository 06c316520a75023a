package scrypt

import "sync"

// The buffer pool. Its idle buffers never take more memory than the
// buffers in use at the busiest moment since the pool was last emptied
// (peak): a new buffer that would pass that sum first drops the oldest
// idle ones. A herd at one parameter set keeps its buffers; hashes of
// ever new sizes (a stored hash an attacker planted for each) replace
// one another instead of piling up.
var pool struct {
	mu    sync.Mutex
	idle  [][]uint32 // oldest first
	idleB int64      // bytes in idle
	inUse int64      // bytes handed out and not back
	peak  int64      // the most inUse since the pool was last emptied
}

func getBuf(n int) []uint32 {
	size := 4 * int64(n)
	pool.mu.Lock()
	pool.inUse += size
	for i := len(pool.idle) - 1; i >= 0; i-- {
		if b := pool.idle[i]; len(b) == n {
			pool.idle = append(pool.idle[:i], pool.idle[i+1:]...)
			pool.idleB -= size
			pool.mu.Unlock()
			return b
		}
	}
	pool.peak = max(pool.peak, pool.inUse)
	for pool.idleB+pool.inUse > pool.peak {
		pool.idleB -= 4 * int64(len(pool.idle[0]))
		pool.idle[0] = nil
		pool.idle = pool.idle[1:]
	}
	pool.mu.Unlock()
	// A new buffer is counted in use already; making it (and advising
	// huge pages) needs no lock.
	b := make([]uint32, n)
	adviseHuge(b)
	return b
}

// putBuf clears b (it held password-derived state) and makes it idle.
func putBuf(b []uint32) {
	clear(b)
	size := 4 * int64(len(b))
	pool.mu.Lock()
	pool.inUse -= size
	pool.idle = append(pool.idle, b)
	pool.idleB += size
	pool.mu.Unlock()
}

// ReleaseBuffers drops every idle buffer of the pool, for the garbage
// collector to free: a process that is done hashing for a while can give
// the memory back. Buffers in use are not affected; the pool then keeps
// no more idle than is in use at the busiest moment from now on.
func ReleaseBuffers() {
	pool.mu.Lock()
	clear(pool.idle)
	pool.idle, pool.idleB, pool.peak = nil, 0, pool.inUse
	pool.mu.Unlock()
}

// IdleBuffers returns the number of idle buffers in the pool and their size
// in bytes.
func IdleBuffers() (n int, bytes int64) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return len(pool.idle), pool.idleB
}
