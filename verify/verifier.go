package verify

import (
	"context"
	"crypto/hmac"
	"crypto/subtle"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nodepass/nodepass/cache"
	"github.com/nodepass/nodepass/scrypt"
	"github.com/nodepass/nodepass/verify/internal/sched"
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
	store      Store
	opts       Options
	enrollWork int64 // 128·r·N·p of Options.Params
	cache      *cache.Cache
	sched      *sched.Scheduler // the key → job map, the queue and the slots
	fails      *failures
	digests    *recorder // nil unless Options.DigestKey is set and the store is a DigestStore
	stats      counters
	closed     atomic.Bool
	// pending holds the enrollments Options.EnrollFailOpen let in while
	// their Create is retried: node → *deferredEnrollment.
	pending      sync.Map
	pendingCount atomic.Int64
	base         context.Context // cancelled by Close with ErrClosed
	cancel       context.CancelCauseFunc
	wg           sync.WaitGroup                // enrollments' Creates and their retries
	quiet        *time.Timer                   // releases idle scrypt buffers (releaseLater)
	createFailed atomic.Pointer[createFailure] // the last Create that failed, nil after one succeeds
	kindsMu      sync.Mutex
	kinds        map[batchKind]int // batches run, by kind (see firstBatch)

	// derive computes a batch's keys (scrypt.KeyBatch, or x/crypto's Key
	// one after the other); tests replace it.
	derive func(keys []scrypt.Job)
}

type counters struct {
	scryptRuns, cacheHits, shared, shed, shedAfterWait, mismatches, knownMatchRejects,
	enrollments, storeErrors, panics, failOpenEnrollments, failOpenFailures,
	digestHits, digestWrites, digestWriteFailures atomic.Uint64
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
	// ShedAfterWait counts the requests in Shed that were held, their wait
	// estimated within MaxWait, and then sent away all the same: the
	// estimate was wrong, and the agent lost both the time it was held and
	// its retry delay. (Requests for a node under suspicion, which wait
	// out MaxWait by design, are not counted.)
	ShedAfterWait uint64
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
	// FailOpenEnrollments counts new nodes let in although their hash
	// could not be stored (Options.EnrollFailOpen); FailOpenFailures
	// those of them whose hash was never stored or lost to another.
	FailOpenEnrollments, FailOpenFailures uint64
	// FailOpenPending is the number of such enrollments being retried now.
	FailOpenPending uint64
	// DigestHits counts requests answered as a match by a remembered
	// digest, without scrypt (Options.DigestKey); DigestWrites and
	// DigestWriteFailures count the digests recorded and those that could
	// not be (a store error, a full queue, or Close's flush timing out).
	DigestHits, DigestWrites, DigestWriteFailures uint64
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
		derive:     o.Scrypt.batch(),
		kinds:      make(map[batchKind]int),
	}
	lanes := 1
	if o.Scrypt == ScryptFast {
		lanes = scrypt.Lanes()
	}
	v.sched = sched.New(sched.Config{Slots: o.MaxConcurrent, Lanes: lanes, MaxQueue: o.MaxQueue,
		PerName: o.MaxQueuedPerNode, MaxWait: o.MaxWait, MaxBatchWork: int64(lanes) * enrollWork,
		WorkTimeout: o.WorkTimeout, ReturnAfter: o.AgentRetryDelay, HonourAfter: o.AgentsHonourRetryAfter,
		Run: v.runBatch, Prepare: v.prepare})
	v.quiet = time.AfterFunc(bufferIdle, v.releaseIfQuiet)
	v.quiet.Stop()
	if ds, ok := store.(DigestStore); ok && o.DigestKey != nil {
		v.digests = newRecorder(ds, &v.stats)
	}
	return v, nil
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
// Node names are case-insensitive: node is lower-cased (strings.ToLower,
// as k3s lower-cases the K3s-Node-Name header and the secret's name)
// before anything else, and the Store, the cache and every per-name
// defence see only the lower-case name.
//
// ctx bounds the Store.Get call and the wait for a result. When ctx ends
// while the result is being computed, Verify returns ctx's error at once;
// the computation goes on, detached, and its outcome is cached. A mismatch
// for a node that keeps failing is answered after a delay (see
// Options.MaxFailDelay), or when ctx ends if that is sooner.
func (v *Verifier) Verify(ctx context.Context, node, password string) error {
	node, err := v.checkInput(node, password)
	if err != nil {
		return err
	}
	stored, remembered, err := v.read(ctx, node)
	if err != nil {
		return err
	}
	return v.verifyStored(ctx, node, stored, password, remembered)
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
	node, err := v.checkInput(node, password)
	if err != nil {
		return err
	}
	stored, remembered, err := v.read(ctx, node)
	if err == nil {
		return v.verifyStored(ctx, node, stored, password, remembered)
	}
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	if err, ok := v.deferred(node, password); ok {
		return err
	}
	pprof.Do(ctx, requestLabels, func(ctx context.Context) { err = v.enroll(ctx, node, password) })
	if !errors.Is(err, ErrExists) {
		return err
	}
	if stored, remembered, err = v.read(ctx, node); err != nil {
		if errors.Is(err, ErrNotFound) {
			// The store said the node exists and then that it does not:
			// a store whose reads lag its writes. Not a mismatch.
			return fmt.Errorf("verify: node %q exists but its hash cannot be read yet: %v", node, err)
		}
		return err
	}
	return v.verifyStored(ctx, node, stored, password, remembered)
}

// Stats returns the Verifier's counters.
func (v *Verifier) Stats() Stats {
	running, queued := v.sched.Load()
	return Stats{
		ScryptRuns:          v.stats.scryptRuns.Load(),
		CacheHits:           v.stats.cacheHits.Load(),
		Shared:              v.stats.shared.Load(),
		Shed:                v.stats.shed.Load(),
		ShedAfterWait:       v.stats.shedAfterWait.Load(),
		Mismatches:          v.stats.mismatches.Load(),
		KnownMatchRejects:   v.stats.knownMatchRejects.Load(),
		Enrollments:         v.stats.enrollments.Load(),
		StoreErrors:         v.stats.storeErrors.Load(),
		Panics:              v.stats.panics.Load(),
		FailOpenEnrollments: v.stats.failOpenEnrollments.Load(),
		FailOpenFailures:    v.stats.failOpenFailures.Load(),
		FailOpenPending:     uint64(v.pendingCount.Load()),
		DigestHits:          v.stats.digestHits.Load(),
		DigestWrites:        v.stats.digestWrites.Load(),
		DigestWriteFailures: v.stats.digestWriteFailures.Load(),
		InFlight:            uint64(running),
		Queued:              uint64(queued),
	}
}

// Close stops the Verifier: every later call returns ErrClosed (a cached
// answer too), work cut short (queued, or in a Store call) ends with
// ErrClosed for its waiters, and Close waits for the computations already
// running (at most one batch per slot), then for the remembered digests
// still queued, at most 5 s. It drops the idle scrypt buffers. It is safe
// to call more than once.
func (v *Verifier) Close() error {
	v.closed.Store(true)
	v.cancel(ErrClosed)
	v.sched.Close()
	v.wg.Wait()
	if v.digests != nil {
		v.digests.close() // after the jobs, which may still record
	}
	v.quiet.Stop()
	scrypt.ReleaseBuffers()
	return nil
}

// checkInput refuses what no Store should see, and everything once the
// Verifier is closed. It returns the node name in the one form every part
// of the Verifier uses (the Store, the cache keys, the scheduler's names
// and the failure counts): lower case, as k3s lower-cases the
// K3s-Node-Name header and the node-password secret's name. Names that
// differ only in case are one node, so spreading guesses over Node-1 and
// NODE-1 gains nothing. An all-lower-case name is returned as is, without
// allocating.
func (v *Verifier) checkInput(node, password string) (string, error) {
	if v.closed.Load() {
		return "", ErrClosed
	}
	if err := v.checkRaw(node, password); err != nil {
		return "", err
	}
	node = strings.ToLower(node)
	if len(node) > MaxNodeNameLen { // lower case can be longer in UTF-8
		return "", fmt.Errorf("%w: node name is %d bytes in lower case, limit %d", ErrInvalidInput, len(node), MaxNodeNameLen)
	}
	return node, nil
}

func (v *Verifier) checkRaw(node, password string) error {
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

// read reads node's hash and, with remembered digests on, the digest
// remembered for it, in one store call.
func (v *Verifier) read(ctx context.Context, node string) (stored string, remembered []byte, err error) {
	if v.digests == nil {
		stored, err = v.get(ctx, node)
		return stored, nil, err
	}
	defer v.recoverStore("GetWithDigest", node, &err)
	stored, remembered, err = v.digests.store.GetWithDigest(ctx, node)
	if err = v.storeErr("GetWithDigest", node, err); err != nil {
		return "", nil, err
	}
	return stored, remembered, nil
}

// get reads node's hash. It is on every request's path, so it calls the
// store directly rather than through a closure.
func (v *Verifier) get(ctx context.Context, node string) (stored string, err error) {
	defer v.recoverStore("Get", node, &err)
	stored, err = v.store.Get(ctx, node)
	return stored, v.storeErr("Get", node, err)
}

// getFresh is get past the store's cache, where it has one (FreshGetter).
func (v *Verifier) getFresh(ctx context.Context, node string) (stored string, err error) {
	fg, ok := v.store.(FreshGetter)
	if !ok {
		return v.get(ctx, node)
	}
	defer v.recoverStore("GetFresh", node, &err)
	stored, err = fg.GetFresh(ctx, node)
	return stored, v.storeErr("GetFresh", node, err)
}

// storeCreate stores a new node's hash.
func (v *Verifier) storeCreate(ctx context.Context, node, stored string) (err error) {
	defer v.recoverStore("Create", node, &err)
	return v.storeErr("Create", node, v.store.Create(ctx, node, stored))
}

// storeErr passes ErrNotFound and ErrExists through as the store wrapped
// them; any other failure of the store's op is counted and wrapped with
// the call it came from.
func (v *Verifier) storeErr(op, node string, err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrExists) {
		return err
	}
	v.stats.storeErrors.Add(1)
	return fmt.Errorf("verify: store %s(%q): %w", op, node, err)
}

// recoverStore, deferred around a store call, turns its panic into an
// error in *err.
func (v *Verifier) recoverStore(op, node string, err *error) {
	if r := recover(); r != nil {
		v.stats.panics.Add(1)
		v.stats.storeErrors.Add(1)
		*err = fmt.Errorf("verify: store %s(%q) panicked: %v", op, node, r)
	}
}

// verifyStored answers from the cache or from a shared computation, and
// holds back mismatch answers for names that keep failing.
func (v *Verifier) verifyStored(ctx context.Context, node, stored, password string, remembered []byte) error {
	err := v.lookup(ctx, node, stored, password, remembered)
	switch {
	case err == nil:
		v.fails.match(node)
	case errors.Is(err, ErrMismatchedHashAndPassword):
		sleep(ctx, v.fails.delay(node))
	}
	return err
}

// lookup answers from the cache when it can (allocating nothing), then
// from the remembered digest, and otherwise from a shared computation.
func (v *Verifier) lookup(ctx context.Context, node, stored, password string, remembered []byte) error {
	key := v.cache.Key(node, stored, password)
	if o, ok := v.cache.Get(key); ok {
		return v.cached(node, o, false)
	}
	// The pair's key only now: a hit costs one HMAC, not two.
	pair := v.cache.PairKey(node, stored)
	if o, knownReject, ok := v.fromPair(key, pair); ok {
		return v.cached(node, o, knownReject)
	}
	var doubted bool
	if remembered != nil {
		d := digest(v.opts.DigestKey, node, stored, password)
		if hmac.Equal(d, remembered) {
			return v.digestHit(node, stored, key, pair)
		}
		// Another password's, a stale key's or a forged digest: never a
		// mismatch by itself, but computed after the others.
		doubted = true
	}
	return v.compute(ctx, node, stored, password, key, pair, doubted)
}

// digestHit answers a request whose password gives the digest remembered
// for its node and stored hash: a match proven by scrypt before, here or
// in another process sharing the store.
func (v *Verifier) digestHit(node, stored string, key, pair cache.Key) error {
	h, err := parseHash(stored, v.opts.Limits)
	if err != nil {
		return fmt.Errorf("%w (stored for node %q)", err, node)
	}
	v.stats.digestHits.Add(1)
	v.recordMatch(node, pair, key, len(h.key))
	return nil
}

// remember records the digest of a scrypt match, off the request path.
func (v *Verifier) remember(node, stored, password string) {
	if v.digests != nil {
		v.digests.record(node, stored, digest(v.opts.DigestKey, node, stored, password))
	}
}

// cached answers a request with the outcome the cache knew, and counts it.
func (v *Verifier) cached(node string, o cache.Outcome, knownReject bool) error {
	v.stats.cacheHits.Add(1)
	if knownReject {
		v.stats.knownMatchRejects.Add(1)
	}
	if o == cache.Match {
		return nil
	}
	v.stats.mismatches.Add(1)
	v.fails.mismatch(node)
	return ErrMismatchedHashAndPassword
}

// fromCache returns the tuple's cached outcome: its own, or its pair's
// (see fromPair).
func (v *Verifier) fromCache(key, pair cache.Key) (o cache.Outcome, knownReject, ok bool) {
	if o, ok := v.cache.Get(key); ok {
		return o, false, true
	}
	return v.fromPair(key, pair)
}

// fromPair answers a tuple from its pair's verified password: a match if
// it is that password, a mismatch (knownReject) if it is another. Pairs
// are recorded only for stored keys of at least 16 bytes (see
// recordMatch), so a second password matching the same key would be a
// 128-bit scrypt collision: any other password is a mismatch, no scrypt
// needed. The keys are compared in constant time.
func (v *Verifier) fromPair(key, pair cache.Key) (o cache.Outcome, knownReject, ok bool) {
	matched, ok := v.cache.MatchedTuple(pair)
	switch {
	case !ok:
		return 0, false, false
	case subtle.ConstantTimeCompare(matched[:], key[:]) == 1:
		return cache.Match, false, true // the verified tuple itself, its own entry evicted
	}
	return cache.Mismatch, true, true
}

// compute verifies a tuple that the cache could not answer, in a job
// shared with every request for the same tuple. It is apart from lookup
// so that what it allocates does not make lookup allocate on the
// cache-hit path.
func (v *Verifier) compute(ctx context.Context, node, stored, password string, key, pair cache.Key, doubted bool) (err error) {
	h, err := parseHash(stored, v.opts.Limits)
	if err != nil {
		return fmt.Errorf("%w (stored for node %q)", err, node)
	}
	t := &task{node: node, password: password, key: key, stored: stored, h: h, pair: pair}
	r := sched.Request{Key: sched.Key(key), Name: node, Work: h.work, Class: classOf(h.logN, h.r, h.p), Task: t, Doubted: doubted}
	pprof.Do(ctx, requestLabels, func(ctx context.Context) { err = v.share(ctx, r) })
	return err
}

// recordMatch caches a verified tuple and, when the stored key is long
// enough to make a second matching password impossible in practice
// (minKeyLen bytes), marks it as its pair's verified password.
func (v *Verifier) recordMatch(node string, pair, tuple cache.Key, keyLen int) {
	v.fails.match(node)
	if keyLen >= minKeyLen {
		v.cache.PutMatch(pair, tuple)
		v.sched.Cheapen(node) // its queued guesses will cost no scrypt
	} else {
		v.cache.Put(tuple, cache.Match)
	}
}

// enroll hashes password and creates node's hash, in a job shared with
// every request enrolling the same node with the same password. It
// returns an error wrapping ErrExists when the node turned out to have a
// hash already. The job holds its scrypt slot only while it hashes: the
// store is read before (prepare) and written after (store).
func (v *Verifier) enroll(ctx context.Context, node, password string) error {
	// An empty stored hash never occurs in a verification key, so this key
	// cannot collide with one.
	key := v.cache.Key(node, "", password)
	p := v.opts.Params
	t := &task{node: node, password: password, key: key}
	return v.share(ctx, sched.Request{Key: sched.Key(key), Name: node, Work: v.enrollWork,
		Class: classOf(p.LogN, p.R, p.P), Task: t, Later: true})
}
