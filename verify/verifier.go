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

// Verifier checks node passwords against a Store, and keeps doing so when
// hundreds of nodes ask at once (see the package doc). It is safe for
// concurrent use. Make one with New; close it with Close.
type Verifier struct {
	// State lives in the scheduler (jobs, queue, slots, under its mutex),
	// the failure counter and the cache (their mutexes), and lock-free maps
	// for fail-open enrollments and queued digest writes; no lock is held
	// while another is taken.
	store      Store
	opts       Options
	enrollWork int64 // 128·r·N·p of Options.Params
	cache      *cache.Cache
	sched      *sched.Scheduler // the key → job map, the queue and the slots
	fails      *failures
	digests    *recorder // nil unless Options.DigestKey is set and the store is a DigestStore
	stats      counters
	closed     atomic.Bool
	// pending holds the enrollments Options.FailOpen let in while
	// their Create is retried: node → *deferredEnrollment.
	pending      sync.Map
	pendingCount atomic.Int64
	base         context.Context // cancelled by Close with ErrClosed
	cancel       context.CancelCauseFunc
	wg           sync.WaitGroup                // enrollments' Creates and their retries
	quiet        *time.Timer                   // releases idle scrypt buffers (releaseLater)
	pool         *scrypt.Pool                  // the scrypt buffers of this Verifier's computations
	mem          *memory                       // Options.ScryptMemory: the bytes the batches may hold
	slots, lanes int                           // batches at once, and hashes per batch at Options.Params (shape)
	createFailed atomic.Pointer[createFailure] // the last Create that failed, nil after one succeeds
	tokenNames   sync.Map                      // token user → its name (tokenName)
	loaded       atomic.Pointer[MemoryStore]   // the tokens LoadTokens loaded

	// derive computes a batch's keys (deriveKeys: the Verifier's pool and
	// lanes); tests replace it.
	derive func(keys []scrypt.Job)
}

type counters struct {
	scryptRuns, cacheHits, shared, shed, shedAfterWait, mismatches, knownMatchRejects,
	enrollments, storeErrors, panics, failOpenEnrollments, failOpenFailures,
	digestHits, digestWrites, digestWriteFailures atomic.Uint64
}

// Stats are a Verifier's counters since New; InFlight and Queued are
// current values.
type Stats struct {
	ScryptRuns        uint64 // scrypt computations started
	CacheHits         uint64 // requests answered from the verified-tuple cache
	Shared            uint64 // requests that joined another's computation
	Shed              uint64 // requests answered with an OverloadError
	ShedAfterWait     uint64 // of Shed, those held, then sent away: a wrong estimate
	Mismatches        uint64 // requests answered ErrMismatchedHashAndPassword
	KnownMatchRejects uint64 // of those, without scrypt: another password is the node's
	Enrollments       uint64 // nodes whose hash Ensure stored
	StoreErrors       uint64 // failed Store calls (not ErrNotFound, ErrExists)
	Panics            uint64 // panics recovered in the store or the hasher
	// Nodes let in by Options.FailOpen; never stored; being retried now.
	FailOpenEnrollments, FailOpenFailures, FailOpenPending uint64
	// Answers by a remembered digest; digests written; not written.
	DigestHits, DigestWrites, DigestWriteFailures uint64
	InFlight                                      uint64 // computations running now
	Queued                                        uint64 // computations waiting for a slot now
}

// New returns a Verifier over store; opts may be nil for the defaults.
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
		pool:       new(scrypt.Pool),
		mem:        newMemory(o.ScryptMemory),
		slots:      o.MaxConcurrent,
		lanes:      scrypt.Lanes(),
	}
	v.derive = v.deriveKeys
	if o.ScryptMemory > 0 {
		v.slots, v.lanes = v.shape()
	}
	v.sched = sched.New(sched.Config{Slots: v.slots, Lanes: v.lanes, MaxQueue: o.MaxQueue,
		PerName: o.MaxQueuedPerNode, MaxWait: o.MaxWait, MaxBatchWork: int64(v.lanes) * enrollWork,
		WorkTimeout: o.WorkTimeout, ReturnAfter: o.Agents.RetryDelay, HonourAfter: o.Agents.HonourRetryAfter,
		Run: v.runBatch, Prepare: v.prepare})
	v.quiet = time.AfterFunc(bufferIdle, v.releaseIfQuiet)
	v.quiet.Stop()
	if ds, ok := store.(DigestStore); ok && o.DigestKey != nil {
		v.digests = newRecorder(ds, &v.stats)
	}
	return v, nil
}

// Verify checks password against node's stored hash: nil on a match, or
// an error wrapping ErrInvalidInput (the Store is not asked), ErrNotFound,
// ErrMismatchedHashAndPassword, ErrInvalidHash, ErrOverloaded (ask again
// after its RetryAfter: the work goes on, its outcome cached), ErrClosed,
// or a Store error (never cached). node is lower-cased first, as k3s
// does, and must then name its secret as k3s does: node +
// ".node-password.k3s" a DNS-1123 subdomain (so node has at most 235
// characters, lower-case letters, digits, '-' and '.', each label
// starting and ending with a letter or digit). ctx bounds Store.Get and
// the wait: when it ends, Verify returns at once and the computation
// goes on. A mismatch for a node that keeps failing is answered after
// Options.MaxFailDelay at most.
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

// Ensure is Verify for a node's join, as k3s does it: a node with no
// stored hash is enrolled (its password hashed with Options.Params and
// stored with Store.Create), and of concurrent first joins with different
// passwords exactly one wins. It never returns ErrNotFound.
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

// Close stops the Verifier: later calls and work cut short get ErrClosed.
// It waits for the batches running and at most 5 s for queued digest
// writes, and drops the idle scrypt buffers. It is safe to call twice.
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
	if !secretName(node) {
		return "", fmt.Errorf("%w: node name %q cannot name its secret (%q): want a DNS-1123 subdomain, lower-case letters, digits, '-' and '.', each label starting and ending with a letter or digit", ErrInvalidInput, node, node+secretSuffix)
	}
	return node, nil
}

// secretName reports whether node, in lower case, makes a valid name for
// the secret k3s keeps its hash in (node + secretSuffix): a DNS-1123
// subdomain. So every Store agrees on the names it is given, and a name
// no Kubernetes object could have (a wildcard, a space, a slash) never
// reaches one, nor a certificate signed for the node.
func secretName(node string) bool {
	prev := byte('.') // the name starts a label
	for i := 0; i < len(node); i++ {
		c := node[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && prev != '.', c == '.' && prev != '.' && prev != '-':
		default:
			return false
		}
		prev = c
	}
	return prev != '.' && prev != '-'
}

func (v *Verifier) checkRaw(node, password string) error {
	switch {
	case node == "":
		return fmt.Errorf("%w: empty node name", ErrInvalidInput)
	case len(node) > maxNodeNameLen:
		return fmt.Errorf("%w: node name is %d bytes, limit %d", ErrInvalidInput, len(node), maxNodeNameLen)
	case password == "":
		return fmt.Errorf("%w: empty password", ErrInvalidInput)
	case len(password) > v.opts.Limits.MaxPasswordLen:
		return fmt.Errorf("%w: password is %d bytes, limit %d", ErrInvalidInput, len(password), v.opts.Limits.MaxPasswordLen)
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
		return fmt.Errorf("%w (stored for %s)", err, displayName(node))
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
		return fmt.Errorf("%w (stored for %s)", err, displayName(node))
	}
	if err := v.fits(&h, node); err != nil {
		return err
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
