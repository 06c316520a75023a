package verify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// MinDigestKeyLen is the shortest Options.DigestKey.
const MinDigestKeyLen = 32

// digestDomain separates remembered digests from any other use of the
// same key.
const digestDomain = "nodepass remembered verification v1"

// Bounds of the digest recorder.
const (
	digestQueue        = 4096             // records waiting to be written
	digestWriteTimeout = 10 * time.Second // one RememberDigest call
	digestFlushTimeout = 5 * time.Second  // Close's wait for what is pending
)

// digest returns HMAC-SHA256(key, domain, node, stored hash, password),
// each field prefixed with its length as 8 bytes big-endian.
func digest(key []byte, node, stored, password string) []byte {
	m := hmac.New(sha256.New, key)
	var n [8]byte
	for _, f := range [...]string{digestDomain, node, stored, password} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	return m.Sum(nil)
}

// digestRecord is a digest waiting to be written.
type digestRecord struct {
	hash   string
	digest []byte
}

// recorder writes remembered digests off the request path: one writer
// goroutine, started by the first record, takes node names from a
// bounded queue and writes each node's newest record (pending).
type recorder struct {
	store    DigestStore
	stats    *Stats
	pending  sync.Map // node → *digestRecord
	queue    chan string
	quit     chan struct{} // closed by close: drain, then stop
	finished chan struct{} // closed when the writer has stopped
	starting sync.Once     // starts run, or marks it finished if close comes first
	closing  sync.Once
	// base is the parent of every write's context; close cancels it when
	// its flush runs out of time, a write in flight included.
	base context.Context
	stop context.CancelFunc
}

func newRecorder(store DigestStore, stats *Stats) *recorder {
	base, stop := context.WithCancel(context.Background())
	return &recorder{store: store, stats: stats, queue: make(chan string, digestQueue),
		quit: make(chan struct{}), finished: make(chan struct{}), base: base, stop: stop}
}

// record queues digest for node and its stored hash. It never blocks: a
// record the full queue refuses is counted as a failed write.
func (r *recorder) record(node, hash string, digest []byte) {
	r.starting.Do(func() { go r.run() })
	rec := &digestRecord{hash: hash, digest: digest}
	if _, queued := r.pending.Swap(node, rec); queued {
		return // the writer will take this newer record
	}
	select {
	case <-r.quit:
	case r.queue <- node:
		return
	default:
	}
	// Not queued: drop the node's record, rec or a newer one that came
	// meanwhile and, finding rec, counted on this call to queue the node.
	if _, ok := r.pending.LoadAndDelete(node); ok {
		atomic.AddUint64(&r.stats.DigestWriteFailures, 1)
	}
}

// run writes queued records until close, then what is still queued.
func (r *recorder) run() {
	defer close(r.finished)
	for {
		select {
		case node := <-r.queue:
			r.write(node)
		case <-r.quit:
			for len(r.queue) > 0 { // run alone takes from the queue
				r.write(<-r.queue)
			}
			return
		}
	}
}

// write writes node's newest record, if any, and counts how it went.
func (r *recorder) write(node string) {
	if v, ok := r.pending.LoadAndDelete(node); !ok {
		return
	} else if err := r.remember(node, v.(*digestRecord)); err != nil {
		atomic.AddUint64(&r.stats.DigestWriteFailures, 1)
	} else {
		atomic.AddUint64(&r.stats.DigestWrites, 1)
	}
}

// remember calls the store within digestWriteTimeout, a panic included,
// unless Close's flush ran out of time.
func (r *recorder) remember(node string, rec *digestRecord) (err error) {
	if err := r.base.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.base, digestWriteTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			atomic.AddUint64(&r.stats.Panics, 1)
			err = fmt.Errorf("verify: store RememberDigest(%q) panicked: %v", node, p)
		}
	}()
	return r.store.RememberDigest(ctx, node, rec.hash, rec.digest)
}

// close stops taking records and waits until the pending ones are written
// or digestFlushTimeout has passed, a write in flight included. Concurrent
// calls all return once it is done.
func (r *recorder) close() {
	r.closing.Do(func() {
		r.starting.Do(func() { close(r.finished) }) // nothing recorded
		close(r.quit)
		cut := time.AfterFunc(digestFlushTimeout, r.stop)
		<-r.finished
		cut.Stop()
		r.stop()
	})
}
