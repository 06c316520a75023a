package verify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/cache"
	"github.com/nodepass/nodepass/scrypt"
	"github.com/nodepass/nodepass/verify/internal/sched"
)

// Verifier checks node passwords against a Store. It is safe for
// concurrent use. Make one with New; close it with Close.
type Verifier struct {
	// A request runs down request.go to the scheduler, which computes it
	// in a batch on a slot (slot.go); an enrollment reads the store before
	// and writes it after (enroll.go).

	// Set by New, then read-only. The scheduler, the cache and the
	// failure counts have locks of their own; nothing here holds one
	// while it takes another.
	store        Store
	opts         Options
	enrollWork   int64 // 128·r·N·p of Options.Params
	cache        *cache.Cache
	sched        *sched.Scheduler
	fails        *failures
	digests      *recorder // nil unless Options.DigestKey is set and the store is a DigestStore
	pool         *scrypt.Pool
	mem          *memory // Options.ScryptMemory
	slots, lanes int     // batches at once, and hashes per batch at Options.Params (slotsAndLanes)
	base         context.Context
	cancel       context.CancelCauseFunc            // cancels base with ErrClosed
	quiet        *time.Timer                        // releases idle scrypt buffers (releaseLater)
	derive       func(keys []scrypt.Job, lanes int) // a batch's scrypt: pool.KeyBatch; tests wrap it

	// Lock-free.
	stats        *Stats // counters, added to atomically (count)
	closed       atomic.Bool
	pending      sync.Map // node → *deferredEnrollment, while Options.FailOpen retries its Create
	pendingCount atomic.Int64
	createFailed atomic.Pointer[createFailure] // the last Create that failed, nil after one succeeds
	tokenNames   sync.Map                      // token user → its name (tokenName)
	loaded       atomic.Pointer[MemoryStore]   // the tokens LoadTokens loaded
	wg           sync.WaitGroup                // enrollments' Creates and their retries
}

// New returns a Verifier over store; opts may be nil for the defaults.
func New(store Store, opts *Options) (*Verifier, error) {
	return newShaped(store, opts, (*Verifier).slotsAndLanes)
}

// newShaped is New with the slots and lanes that shape chooses when
// Options.ScryptMemory sets a budget (slotsAndLanes; tests fix them).
func newShaped(store Store, opts *Options, shape func(*Verifier) (slots, lanes int)) (*Verifier, error) {
	if store == nil {
		return nil, errors.New("verify: nil Store")
	}
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	c, err := cache.New(o.Cache)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	_, enrollWork, err := cost(o.Params.LogN, o.Params.R, o.Params.P, o.Limits)
	if err != nil { // resolve checked it
		return nil, fmt.Errorf("verify: Options.Params: %v", err)
	}
	base, cancel := context.WithCancelCause(context.Background())
	v := &Verifier{
		store:      store,
		opts:       o,
		enrollWork: enrollWork,
		cache:      c,
		fails:      newFailures(o.MaxFailDelay),
		base:       base,
		cancel:     cancel,
		pool:       new(scrypt.Pool),
		mem:        newMemory(o.ScryptMemory),
		slots:      o.MaxConcurrent,
		lanes:      scrypt.Lanes(),
		stats:      new(Stats),
	}
	v.derive = v.pool.KeyBatch
	if o.ScryptMemory > 0 {
		v.slots, v.lanes = shape(v)
	}
	v.sched = sched.New(sched.Config{Slots: v.slots, Lanes: v.lanes, MaxQueue: o.MaxQueue,
		PerName: o.MaxQueuedPerNode, MaxWait: o.MaxWait, MaxBatchWork: int64(v.lanes) * enrollWork,
		WorkTimeout: o.WorkTimeout, ReturnAfter: o.Agents.RetryDelay, HonourAfter: o.Agents.HonourRetryAfter,
		Run: v.runBatch, Prepare: v.prepare})
	v.quiet = time.AfterFunc(bufferIdle, v.releaseIfQuiet)
	v.quiet.Stop()
	if ds, ok := store.(DigestStore); ok && o.DigestKey != nil {
		v.digests = newRecorder(ds, v.stats)
	}
	return v, nil
}

// Close stops the Verifier: later calls, and work cut short, get
// ErrClosed. It waits for the running batches and up to 5 s for digest
// writes.
func (v *Verifier) Close() error {
	v.closed.Store(true)
	v.cancel(ErrClosed)
	v.sched.Close()
	v.wg.Wait()
	if v.digests != nil {
		v.digests.close() // after the jobs, which may still record
	}
	v.quiet.Stop()
	v.pool.Release()
	return nil
}
