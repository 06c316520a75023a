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
// goroutine, started by the first record, a bounded queue of node names,
// and the newest record per node (a node verified again before its
// record was written is written once).
// It declares no lock: the records are in a sync.Map, the order in a
// channel.
type recorder struct {
	store    DigestStore
	stats    *Stats
	pending  sync.Map // node → *digestRecord
	queue    chan string
	quit     chan struct{} // closed by close, once: drain, then stop
	starting sync.Once     // starts run, or marks it finished if close comes first
	closing  sync.Once
	finished chan struct{} // closed when the writer has stopped
	// base is the parent of every write's context; close cancels it when
	// its flush runs out of time, a write in flight included.
	base context.Context
	stop context.CancelFunc
}

func newRecorder(store DigestStore, stats *Stats) *recorder {
	base, stop := context.WithCancel(context.Background())
	r := &recorder{store: store, stats: stats, queue: make(chan string, digestQueue),
		quit: make(chan struct{}), finished: make(chan struct{}), base: base, stop: stop}
	return r
}

// record queues digest for node and its stored hash. It never blocks:
// with the queue full, the record is dropped and counted as a failed
// write.
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

// run writes queued records until close, then what is still queued; close
// cuts that flush, and a write in flight, digestFlushTimeout after it
// began.
func (r *recorder) run() {
	defer close(r.finished)
	for {
		select {
		case node := <-r.queue:
			r.write(r.base, node)
		case <-r.quit:
			for {
				select {
				case node := <-r.queue:
					r.write(r.base, node)
				default:
					return
				}
			}
		}
	}
}

func (r *recorder) write(parent context.Context, node string) {
	v, ok := r.pending.LoadAndDelete(node)
	if !ok {
		return
	}
	rec := v.(*digestRecord)
	if parent.Err() != nil {
		atomic.AddUint64(&r.stats.DigestWriteFailures, 1) // Close's flush ran out of time
		return
	}
	ctx, cancel := context.WithTimeout(parent, digestWriteTimeout)
	defer cancel()
	if err := r.remember(ctx, node, rec); err != nil {
		atomic.AddUint64(&r.stats.DigestWriteFailures, 1)
		return
	}
	atomic.AddUint64(&r.stats.DigestWrites, 1)
}

// remember calls the store, a panic included.
func (r *recorder) remember(ctx context.Context, node string, rec *digestRecord) (err error) {
	defer func() {
		if p := recover(); p != nil {
			atomic.AddUint64(&r.stats.Panics, 1)
			err = fmt.Errorf("verify: store RememberDigest(%q) panicked: %v", node, p)
		}
	}()
	return r.store.RememberDigest(ctx, node, rec.hash, rec.digest)
}

// close stops taking records and waits until the pending ones are written
// or digestFlushTimeout has passed, a write in flight included.
// Concurrent calls all return once it is done.
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
