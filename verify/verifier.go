package verify

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nodepass/nodepass/cache"
)

// Verifier checks node passwords against a Store and keeps doing so when
// hundreds of nodes ask at once. For each request it reads the stored hash,
// answers from the verified-tuple cache when it can, lets identical
// concurrent requests share one computation, and runs scrypt on at most
// Options.MaxConcurrent slots, answering with an OverloadError rather than
// making a caller wait past Options.MaxWait.
//
// A Verifier is safe for concurrent use. Make one with New; the zero value
// is not usable. Close it to stop its background work.
type Verifier struct {
	store   Store
	opts    Options
	cache   *cache.Cache
	adm     *admission
	fails   *failures
	stats   counters
	base    context.Context // cancelled by Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup // detached work
	mu      sync.Mutex     // guards flights and closed
	flights map[cache.Key]*flight
	closed  bool

	// The hash functions, replaceable in tests.
	compare  func(h *hash, password string) error
	generate func(password string, p Params, lim Limits) (string, error)
}

// flight is one computation shared by every request for its key: the
// singleflight pattern. golang.org/x/sync/singleflight is not used because
// a waiter here must learn the flight's admission ticket the moment it
// joins (to tell its caller how long the queued work will take) and must be
// able to leave while the work goes on; the map below, guarded by
// Verifier.mu together with the admission queue, gives both without races.
type flight struct {
	done chan struct{} // closed when err is set
	err  error
	t    *ticket
}

type counters struct {
	scryptRuns, cacheHits, shared, shed, mismatches, knownMatchRejects,
	enrollments, storeErrors, panics atomic.Uint64
}

// Stats are a Verifier's counters since New. Counters only grow; InFlight
// and Queued are the current values.
type Stats struct {
	// ScryptRuns counts scrypt computations started (verifications and
	// enrollments).
	ScryptRuns uint64
	// CacheHits counts requests answered from the verified-tuple cache.
	CacheHits uint64
	// Shared counts requests that joined a computation started by another
	// request with the same node, stored hash and password.
	Shared uint64
	// Shed counts requests answered with an OverloadError.
	Shed uint64
	// Mismatches counts requests answered with ErrMismatchedHashAndPassword.
	Mismatches uint64
	// KnownMatchRejects counts mismatches answered without scrypt because
	// another password is the verified one for that node and stored hash
	// (also counted in CacheHits and Mismatches).
	KnownMatchRejects uint64
	// Enrollments counts nodes whose hash Ensure created.
	Enrollments uint64
	// StoreErrors counts failed Store calls, other than ErrNotFound from
	// Get and ErrExists from Create.
	StoreErrors uint64
	// Panics counts panics recovered in the store or the hasher.
	Panics uint64
	// InFlight is the number of scrypt computations running now.
	InFlight uint64
	// Queued is the number of computations waiting for a slot now.
	Queued uint64
}

// New returns a Verifier over store. opts may be nil for the defaults; New
// fails on a nil store or invalid options.
func New(store Store, opts *Options) (*Verifier, error) {
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
	base, cancel := context.WithCancel(context.Background())
	return &Verifier{
		store:    store,
		opts:     o,
		cache:    c,
		adm:      newAdmission(o.MaxConcurrent, o.MaxQueue, o.MaxQueuedPerNode),
		fails:    newFailures(o.MaxFailDelay),
		base:     base,
		cancel:   cancel,
		flights:  make(map[cache.Key]*flight),
		compare:  (*hash).compare,
		generate: generate,
	}, nil
}

// Verify checks password against node's stored hash. It returns nil on a
// match and otherwise an error that wraps one of:
//   - ErrInvalidInput: empty or oversized node name or password; the Store
//     is not consulted;
//   - ErrNotFound: the node has no stored hash;
//   - ErrMismatchedHashAndPassword: wrong password;
//   - ErrInvalidHash: the stored hash is malformed or beyond Options.Limits;
//   - ErrOverloaded: no answer within Options.MaxWait; the error's
//     RetryAfter says when to ask again, and the work goes on so that the
//     retry is answered from the cache;
//   - ErrClosed: Close was called;
//   - or a Store error, never cached.
//
// ctx bounds the Store.Get call and the wait for a result. When ctx ends
// while the result is being computed, Verify returns ctx's error at once;
// the computation goes on, detached, and its outcome is cached. A mismatch
// for a node that keeps failing is answered after a delay (see
// Options.MaxFailDelay), or when ctx ends if that is sooner.
func (v *Verifier) Verify(ctx context.Context, node, password string) error {
	if err := v.checkInput(node, password); err != nil {
		return err
	}
	stored, err := v.get(ctx, node)
	if err != nil {
		return err
	}
	return v.verifyStored(ctx, node, stored, password)
}

// Ensure is Verify for a node's join, as k3s does it: when the node has no
// stored hash, the password is hashed with Options.Params and stored with
// Store.Create, and the node is enrolled (nil). If another request created
// the node's hash first (ErrExists), the password is verified against that
// hash, so of concurrent first joins with different passwords exactly one
// wins and the others get ErrMismatchedHashAndPassword. An enrollment counts
// as a verified match: the node's next request costs no scrypt.
//
// Errors and ctx are as for Verify, except that ErrNotFound is not
// returned.
func (v *Verifier) Ensure(ctx context.Context, node, password string) error {
	if err := v.checkInput(node, password); err != nil {
		return err
	}
	stored, err := v.get(ctx, node)
	if err == nil {
		return v.verifyStored(ctx, node, stored, password)
	}
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	pprof.Do(ctx, requestLabels, func(ctx context.Context) { err = v.enroll(ctx, node, password) })
	if !errors.Is(err, ErrExists) {
		return err
	}
	if stored, err = v.get(ctx, node); err != nil {
		if errors.Is(err, ErrNotFound) {
			// The store said the node exists and then that it does not:
			// a store whose reads lag its writes. Not a mismatch.
			return fmt.Errorf("verify: node %q exists but its hash cannot be read yet: %v", node, err)
		}
		return err
	}
	return v.verifyStored(ctx, node, stored, password)
}

// Stats returns the Verifier's counters.
func (v *Verifier) Stats() Stats {
	running, queued := v.adm.load()
	return Stats{
		ScryptRuns:        v.stats.scryptRuns.Load(),
		CacheHits:         v.stats.cacheHits.Load(),
		Shared:            v.stats.shared.Load(),
		Shed:              v.stats.shed.Load(),
		Mismatches:        v.stats.mismatches.Load(),
		KnownMatchRejects: v.stats.knownMatchRejects.Load(),
		Enrollments:       v.stats.enrollments.Load(),
		StoreErrors:       v.stats.storeErrors.Load(),
		Panics:            v.stats.panics.Load(),
		InFlight:          uint64(running),
		Queued:            uint64(queued),
	}
}

// Close stops the Verifier: later calls return ErrClosed, queued work is
// dropped (its waiters get an error) and Close waits for the computations
// already running, at most one scrypt per slot. It is safe to call more
// than once.
func (v *Verifier) Close() error {
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
	v.cancel()
	v.wg.Wait()
	return nil
}

func (v *Verifier) checkInput(node, password string) error {
	switch {
	case node == "":
		return fmt.Errorf("%w: empty node name", ErrInvalidInput)
	case len(node) > MaxNodeNameLen:
		return fmt.Errorf("%w: node name is %d bytes, limit %d", ErrInvalidInput, len(node), MaxNodeNameLen)
	case password == "":
		return fmt.Errorf("%w: empty password", ErrInvalidInput)
	case len(password) > v.opts.MaxPasswordLen:
		return fmt.Errorf("%w: password is %d bytes, limit %d", ErrInvalidInput, len(password), v.opts.MaxPasswordLen)
	}
	if !utf8.ValidString(node) {
		return fmt.Errorf("%w: node name is not valid UTF-8", ErrInvalidInput)
	}
	for i := 0; i < len(node); i++ {
		if c := node[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: node name contains control character %#x", ErrInvalidInput, c)
		}
	}
	return nil
}

// get reads node's hash. ErrNotFound passes through; other failures,
// panics included, become store errors.
func (v *Verifier) get(ctx context.Context, node string) (stored string, err error) {
	defer func() {
		if r := recover(); r != nil {
			v.stats.panics.Add(1)
			err = fmt.Errorf("verify: store Get(%q) panicked: %v", node, r)
			v.stats.storeErrors.Add(1)
		}
	}()
	stored, err = v.store.Get(ctx, node)
	if err == nil || errors.Is(err, ErrNotFound) {
		return stored, err
	}
	v.stats.storeErrors.Add(1)
	return "", fmt.Errorf("verify: store Get(%q): %w", node, err)
}

// create stores a new node's hash. ErrExists passes through.
func (v *Verifier) create(ctx context.Context, node, stored string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			v.stats.panics.Add(1)
			v.stats.storeErrors.Add(1)
			err = fmt.Errorf("verify: store Create(%q) panicked: %v", node, r)
		}
	}()
	err = v.store.Create(ctx, node, stored)
	if err == nil || errors.Is(err, ErrExists) {
		return err
	}
	v.stats.storeErrors.Add(1)
	return fmt.Errorf("verify: store Create(%q): %w", node, err)
}

// verifyStored answers from the cache or from a shared computation, and
// holds back mismatch answers for names that keep failing.
func (v *Verifier) verifyStored(ctx context.Context, node, stored, password string) error {
	err := v.lookup(ctx, node, stored, password)
	switch {
	case err == nil:
		v.fails.match(node)
	case errors.Is(err, ErrMismatchedHashAndPassword):
		hold(ctx, v.fails.delay(node))
	}
	return err
}

func (v *Verifier) lookup(ctx context.Context, node, stored, password string) error {
	key := v.cache.Key(node, stored, password)
	if o, ok := v.cache.Get(key); ok {
		v.stats.cacheHits.Add(1)
		if o == cache.Mismatch {
			v.fails.mismatch(node)
		}
		return v.outcome(o)
	}
	pair := v.cache.PairKey(node, stored)
	if err, ok := v.known(node, pair, key); ok {
		v.stats.cacheHits.Add(1)
		if err != nil {
			v.stats.mismatches.Add(1)
		}
		return err
	}
	return v.compute(ctx, node, stored, password, key, pair)
}

// known answers a tuple from its pair's verified password, if the pair has
// one. Pairs are recorded only for stored keys of at least 16 bytes (see
// recordMatch), so a second password matching the same key would be a
// 128-bit scrypt collision: any other password is a mismatch, no scrypt
// needed. The keys are compared in constant time.
func (v *Verifier) known(node string, pair, key cache.Key) (err error, ok bool) {
	matched, ok := v.cache.MatchedTuple(pair)
	if !ok {
		return nil, false
	}
	if subtle.ConstantTimeCompare(matched[:], key[:]) == 1 {
		return nil, true // the verified tuple itself, its own entry evicted
	}
	v.stats.knownMatchRejects.Add(1)
	v.fails.mismatch(node)
	return ErrMismatchedHashAndPassword, true
}

// compute verifies a tuple that the cache could not answer. It is apart
// from lookup so that the keys its closure captures do not make lookup's
// allocate on the cache-hit path.
func (v *Verifier) compute(ctx context.Context, node, stored, password string, key, pair cache.Key) (err error) {
	pprof.Do(ctx, requestLabels, func(ctx context.Context) { err = v.computeLabelled(ctx, node, stored, password, key, pair) })
	return err
}

func (v *Verifier) computeLabelled(ctx context.Context, node, stored, password string, key, pair cache.Key) error {
	h, err := parseHash(stored, v.opts.Limits)
	if err != nil {
		return fmt.Errorf("%w (stored for node %q)", err, node)
	}
	return v.share(ctx, node, key, h.work, func(ctx context.Context, t *ticket) error {
		if err := v.acquire(ctx, t); err != nil {
			return err
		}
		// The node's own password may have been verified while this
		// waited in the queue: then no scrypt is needed.
		if err, ok := v.known(node, pair, key); ok {
			v.adm.release(t, 0)
			return err
		}
		err := v.runSlot(ctx, t, func() error { return v.compare(&h, password) })
		switch {
		case err == nil:
			v.recordMatch(node, pair, key, len(h.key))
		case errors.Is(err, ErrMismatchedHashAndPassword):
			v.cache.Put(key, cache.Mismatch)
			v.fails.mismatch(node)
		}
		return err
	})
}

// recordMatch caches a verified tuple and, when the stored key is long
// enough to make a second matching password impossible in practice
// (minKeyLen bytes), marks it as its pair's verified password.
func (v *Verifier) recordMatch(node string, pair, tuple cache.Key, keyLen int) {
	v.fails.match(node)
	if keyLen >= minKeyLen {
		v.cache.PutMatch(pair, tuple)
		v.adm.cheapen(node) // its queued guesses will cost no scrypt
	} else {
		v.cache.Put(tuple, cache.Match)
	}
}

// enroll hashes password and creates node's hash. It returns an error
// wrapping ErrExists when the node turned out to have one already.
func (v *Verifier) enroll(ctx context.Context, node, password string) error {
	// An empty stored hash never occurs in a verification key, so this key
	// cannot collide with one.
	key := v.cache.Key(node, "", password)
	p := v.opts.Params
	work := (int64(128) << p.LogN) * int64(p.R) * int64(p.P)
	return v.share(ctx, node, key, work, func(ctx context.Context, t *ticket) error {
		// A request that found no hash may arrive just after an identical
		// enrollment finished: look again before hashing, so it verifies
		// against the new hash (a cache hit) instead of hashing anew.
		if _, err := v.get(ctx, node); err == nil {
			v.adm.release(t, 0)
			return fmt.Errorf("%w: %q enrolled meanwhile", ErrExists, node)
		} else if !errors.Is(err, ErrNotFound) {
			v.adm.release(t, 0)
			return err
		}
		if err := v.acquire(ctx, t); err != nil {
			return err
		}
		var stored string
		err := v.runSlot(ctx, t, func() (err error) {
			stored, err = v.generate(password, p, v.opts.Limits)
			return err
		})
		if err != nil {
			return err
		}
		if err := v.create(ctx, node, stored); err != nil {
			return err
		}
		v.recordMatch(node, v.cache.PairKey(node, stored), v.cache.Key(node, stored, password), p.KeyLen)
		v.stats.enrollments.Add(1)
		return nil
	})
}

func (v *Verifier) outcome(o cache.Outcome) error {
	if o == cache.Match {
		return nil
	}
	v.stats.mismatches.Add(1)
	return ErrMismatchedHashAndPassword
}

// share runs job once for all concurrent callers with the same key and
// waits for its result within ctx and Options.MaxWait. The job runs
// detached from ctx, under Options.WorkTimeout, and caches its outcome
// itself.
func (v *Verifier) share(ctx context.Context, node string, key cache.Key, work int64, job func(context.Context, *ticket) error) error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return ErrClosed
	}
	if f, ok := v.flights[key]; ok {
		v.mu.Unlock()
		v.stats.shared.Add(1)
		v.adm.ask(f.t) // asked again: it goes before less-asked passwords
		return v.await(ctx, f)
	}
	// The flight for key may have ended between the caller's cache miss
	// and now; its outcome is then cached.
	if o, ok := v.cache.Get(key); ok {
		v.mu.Unlock()
		v.stats.cacheHits.Add(1)
		return v.outcome(o)
	}
	t, overload, perNode := v.adm.enqueue(node, key, work, v.fails.failing(node))
	if overload != nil {
		v.mu.Unlock()
		v.stats.shed.Add(1)
		if perNode {
			// The name has no room: hold the answer, so that a guesser
			// cannot spin on refusals (an agent retries after 5-10 s
			// anyway).
			hold(ctx, max(v.fails.delay(node), v.opts.MaxFailDelay))
		}
		return overload
	}
	f := &flight{done: make(chan struct{}), t: t}
	v.flights[key] = f
	v.wg.Add(1)
	v.mu.Unlock()

	go v.run(ctx, key, f, job)
	return v.await(ctx, f)
}

// run executes a flight's job detached from the caller that started it.
func (v *Verifier) run(caller context.Context, key cache.Key, f *flight, job func(context.Context, *ticket) error) {
	defer v.wg.Done()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(caller), v.opts.WorkTimeout)
	defer cancel()
	stop := context.AfterFunc(v.base, cancel)
	defer stop()

	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				v.stats.panics.Add(1)
				err = fmt.Errorf("verify: panic in shared work: %v", r)
			}
		}()
		pprof.Do(ctx, scryptLabels, func(ctx context.Context) { err = job(ctx, f.t) })
		return err
	}()
	// A ticket that never got a slot (or whose job panicked before
	// releasing it) must not hold its place.
	v.adm.release(f.t, 0)

	v.mu.Lock()
	delete(v.flights, key)
	v.mu.Unlock()
	f.err = err
	close(f.done)
}

// acquire waits for t's slot. On a nil return the caller must give it
// back, with runSlot or adm.release.
func (v *Verifier) acquire(ctx context.Context, t *ticket) error {
	if err := v.adm.wait(ctx, t); err != nil {
		var oe *OverloadError
		if errors.As(err, &oe) {
			return err // displaced: come back later
		}
		return fmt.Errorf("verify: waiting for a scrypt slot: %w", err)
	}
	if o := v.opts.Observer; o != nil {
		o.ObserveQueueWait(ctx, time.Since(t.enqueued))
	}
	return nil
}

// runSlot runs one scrypt computation fn on t's slot and gives the slot
// back.
func (v *Verifier) runSlot(ctx context.Context, t *ticket, fn func() error) error {
	// The goroutine keeps its thread so that the thread's CPU clock
	// measures this computation alone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, cpu0 := time.Now(), threadCPU()
	v.stats.scryptRuns.Add(1)
	var elapsed, cpu time.Duration
	defer func() { v.adm.releaseMeasured(t, elapsed, cpu) }()
	err := fn()
	elapsed = time.Since(start)
	if cpu0 > 0 {
		cpu = time.Duration(threadCPU() - cpu0)
	}
	if o := v.opts.Observer; o != nil {
		o.ObserveScrypt(ctx, elapsed)
	}
	return err
}

// await waits for f's result within ctx and Options.MaxWait. The estimate
// of when f will finish is checked when the caller arrives and again every
// recheckInterval while it waits: as soon as the result is not expected
// within what is left of MaxWait, the caller is told when to come back,
// rather than held until MaxWait and told then.
func (v *Verifier) await(ctx context.Context, f *flight) error {
	select {
	case <-f.done:
		return v.result(f.err)
	default:
	}
	// While it waits, its computation goes before those nobody waits for.
	v.adm.watch(f.t, 1)
	comeBack, err := v.hold(ctx, f)
	v.adm.watch(f.t, -1)
	if comeBack {
		return v.shedQueued(f.t)
	}
	return err
}

// hold is await's wait for f: it returns f's result, ctx's error, or
// comeBack when the caller is to be told to come back later.
func (v *Verifier) hold(ctx context.Context, f *flight) (comeBack bool, err error) {
	maxWait := v.opts.MaxWait
	// A caller is told at once to come back only when its result cannot
	// come within MaxWait even at the best: an agent sent away wrongly
	// loses a whole retry delay (k3s: 5-10 s), one held wrongly is told
	// at the next recheck, which counts the contention measured meanwhile
	// (a herd's own TLS handshakes, in its first second, are no guide to
	// the seconds after). A suspect (see admission) is not told early: it
	// waits out MaxWait in case spare capacity comes, and a guesser is
	// slowed down the same way.
	if eta := v.adm.etaAtBest(f.t); eta > maxWait && !v.adm.isSuspect(f.t) {
		return true, nil
	}
	deadline := time.Now().Add(maxWait)
	every := recheckInterval(maxWait)
	timer := time.NewTimer(min(every, maxWait))
	defer timer.Stop()
	for {
		select {
		case <-f.done:
			return false, v.result(f.err)
		case <-ctx.Done():
			return false, fmt.Errorf("verify: waiting for result: %w", context.Cause(ctx))
		case <-timer.C:
		}
		left := time.Until(deadline)
		if eta := v.adm.eta(f.t); left <= 0 || eta > left && !v.adm.isSuspect(f.t) {
			return true, nil
		}
		timer.Reset(min(every, left))
	}
}

// recheckInterval is how often a waiting caller's estimate is checked.
func recheckInterval(maxWait time.Duration) time.Duration {
	return min(max(maxWait/16, 10*time.Millisecond), 500*time.Millisecond)
}

// shedQueued answers a caller of await that has stopped waiting for t.
// The estimate is made once the caller no longer counts as waiting, as t
// may then be served after the computations callers wait for. It asks
// the caller back MaxWait/2 before then: the retry then waits for the
// result rather than arriving after it, so an estimate that is off by up
// to MaxWait/2 either way costs the caller no extra round.
func (v *Verifier) shedQueued(t *ticket) error {
	v.stats.shed.Add(1)
	return &OverloadError{After: max(v.adm.eta(t)-v.opts.MaxWait/2, minRetryAfter), Queued: true}
}

// result counts a flight's outcome for one waiter.
func (v *Verifier) result(err error) error {
	switch {
	case errors.Is(err, ErrMismatchedHashAndPassword):
		v.stats.mismatches.Add(1)
	case errors.Is(err, ErrOverloaded):
		v.stats.shed.Add(1) // displaced by a password asked for more often
	}
	return err
}
