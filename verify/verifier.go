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
	store      Store
	opts       Options
	enrollWork int64 // 128·r·N·p of Options.Params
	cache      *cache.Cache
	sched      *sched.Scheduler
	fails      *failures
	digests    *recorder // nil unless Options.DigestKey is set and the store is a DigestStore
	pool       *scrypt.Pool
	mem        func() *memory            // Options.ScryptMemory, resolved by the first computation (sized)
	fixedShape func() (slots, lanes int) // if not nil, the shape where the budget binds (tests)
	base       context.Context
	cancel     context.CancelCauseFunc            // cancels base with ErrClosed
	quiet      *time.Timer                        // releases idle scrypt buffers (releaseLater)
	derive     func(keys []scrypt.Job, lanes int) // a batch's scrypt: pool.KeyBatch; tests wrap it

	// Lock-free.
	shape        atomic.Pointer[shaping] // the batches' slots and lanes (reshape)
	stats        *Stats                  // counters, added to atomically (count)
	closed       atomic.Bool
	pending      sync.Map // node → *deferredEnrollment, while Options.FailOpen retries its Create
	pendingCount atomic.Int64
	createFailed atomic.Pointer[createFailure] // the last Create that failed, nil after one succeeds
	tokenNames   sync.Map                      // token user → its name (tokenName)
	loaded       atomic.Pointer[MemoryStore]   // the tokens LoadTokens loaded
	wg           sync.WaitGroup                // enrollments' Creates and their retries
}

// New returns a Verifier over store; opts may be nil for the defaults.
// It only validates opts: it starts no goroutine, computes and maps
// nothing. The first computation sizes the scrypt budget.
func New(store Store, opts *Options) (*Verifier, error) {
	return newShaped(store, opts, nil)
}

// newShaped is New with the slots and lanes fixed where the budget binds
// (tests), unless fixed is nil.
func newShaped(store Store, opts *Options, fixed func() (slots, lanes int)) (*Verifier, error) {
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
	enrollWork, err := cost(o.Params.LogN, o.Params.R, o.Params.P, o.Limits)
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
		fixedShape: fixed,
		stats:      new(Stats),
	}
	v.derive = v.pool.KeyBatch
	v.mem = sync.OnceValue(v.sized)
	// One lane until reshape, at the first computation, before any join.
	v.sched = sched.New(sched.Config{Slots: o.MaxConcurrent, Lanes: 1, MaxQueue: o.MaxQueue,
		PerName: o.MaxQueuedPerNode, MaxWait: o.MaxWait, MaxBatchWork: enrollWork,
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
