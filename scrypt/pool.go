package scrypt

import "sync"

// The buffer pool: idle buffers by length in words. A buffer is allocated
// only when none of its length is idle, so the pool never holds more
// buffers of a length than were in use at the same moment.
var pool struct {
	mu   sync.Mutex
	idle map[int][][]uint32
}

func getBuf(n int) []uint32 {
	pool.mu.Lock()
	if l := pool.idle[n]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		pool.idle[n] = l[:len(l)-1]
		pool.mu.Unlock()
		return b
	}
	pool.mu.Unlock()
	return make([]uint32, n)
}

// putBuf clears b (it held password-derived state) and makes it idle.
func putBuf(b []uint32) {
	clear(b)
	pool.mu.Lock()
	if pool.idle == nil {
		pool.idle = make(map[int][][]uint32)
	}
	pool.idle[len(b)] = append(pool.idle[len(b)], b)
	pool.mu.Unlock()
}

// ReleaseBuffers drops every idle buffer of the pool, for the garbage
// collector to free: a process that is done hashing for a while can give
// the memory back. Buffers in use are not affected.
func ReleaseBuffers() {
	pool.mu.Lock()
	pool.idle = nil
	pool.mu.Unlock()
}

// IdleBuffers returns the number of idle buffers in the pool and their size
// in bytes.
func IdleBuffers() (n int, bytes int64) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for size, l := range pool.idle {
		n += len(l)
		bytes += int64(len(l)) * int64(size) * 4
	}
	return n, bytes
}
