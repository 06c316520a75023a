package verify

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/nodepass/nodepass/cache"
	"github.com/nodepass/nodepass/scrypt"
	"github.com/nodepass/nodepass/verify/internal/sched"
)

// task is what one job computes: the scrypt of password against a stored
// hash (a verification), or for a new node's hash (an enrollment).
type task struct {
	node, password string
	key            cache.Key // the job's: (node, stored, password), or (node, "", password) to enroll
	// A verification's stored hash and its pair key; h.key is nil for an
	// enrollment.
	stored string
	h      hash
	pair   cache.Key
	// hashOnly marks an enrollment that stores nothing (Hasher.CreateHash):
	// the slot writes the hash it made to made before the job finishes.
	hashOnly bool
	made     string
}

func taskOf(j *sched.Job) *task { return j.Task().(*task) }

func (t *task) enroll() bool { return t.h.key == nil }

// classOf is the batch class of a computation with these parameters.
func classOf(logN, r, p int) sched.Class { return sched.Class{N: 1 << logN, R: r, P: p} }

// share joins the job r asks for, shared with every concurrent request
// for the same r.Key, and waits for its result within ctx and
// Options.MaxWait. The job runs on one of the scheduler's slots, in a
// batch (runBatch), detached from ctx (its values and pprof labels
// kept), under Options.WorkTimeout.
func (v *Verifier) share(ctx context.Context, r sched.Request) error {
	r.Doubted = r.Doubted || v.fails.failing(r.Name)
	j, created, err := v.sched.Join(ctx, r)
	if err != nil { // closed, or the whole queue full
		return v.result(err)
	}
	if !created {
		v.stats.shared.Add(1)
	}
	err = v.sched.Wait(ctx, j)
	if cause := context.Cause(ctx); cause != nil && err == cause {
		return fmt.Errorf("verify: waiting for result: %w", err)
	}
	return v.result(err)
}

// prepare is an enrollment's first step, before it asks for a slot: a
// read past the store's cache, so that a node enrolled a moment ago (by
// another server, say) is verified against that hash instead of costing
// one scrypt and one failing Create, as k3s reads the API before it
// creates. It holds no slot while it reads.
func (v *Verifier) prepare(j *sched.Job) {
	ctx := j.Context()
	pprof.SetGoroutineLabels(ctx)
	t := taskOf(j)
	_, err := v.getFresh(ctx, t.node)
	switch f := v.createFailed.Load(); {
	case err == nil:
		v.sched.Finish(j, fmt.Errorf("%w: %q enrolled meanwhile", ErrExists, t.node))
	case errors.Is(err, ErrNotFresh) && f != nil && time.Since(f.at) < createFailingFor:
		// The store could not be read past its cache and its last Create
		// failed moments ago (an outage, say): hashing would cost a
		// scrypt for a Create that fails too, and fail-open needs a fresh
		// read.
		v.sched.Finish(j, fmt.Errorf("verify: not enrolling %q: the store's last Create failed %v ago: %w", t.node, time.Since(f.at).Round(time.Millisecond), f.err))
	case errors.Is(err, ErrNotFound):
		v.sched.Submit(j)
	default:
		v.sched.Finish(j, v.cut(ctx, err))
	}
}

// createFailure is the last Store.Create that failed (but for ErrExists
// and Close).
type createFailure struct {
	at  time.Time
	err error
}

// createFailingFor is how long after a failed Create an enrollment that
// could not read the store past its cache is refused without hashing.
const createFailingFor = 5 * time.Second

// runBatch computes jobs, a batch the scheduler gave one slot: their
// scrypt in one scrypt.KeyBatch (Lanes() at a time), under the pprof
// label ProfileLabel=ProfileScrypt; then each job's outcome is cached and
// published (an enrollment's hash is stored after the slot is given
// back). A job whose outcome came to be known while it was queued (its
// node's password verified meanwhile) is answered without scrypt. Every
// outcome is cached before runBatch returns and the slot goes to the next
// batch, whose jobs may be guesses for the same nodes.
func (v *Verifier) runBatch(jobs []*sched.Job) (computed int, wall, cpu time.Duration) {
	defer v.countPanic()
	var todo []*sched.Job
	var keys []scrypt.Job
	for _, j := range jobs {
		t := taskOf(j)
		v.observeQueueWait(j)
		if !t.enroll() {
			if o, knownReject, ok := v.fromCache(t.key, t.pair); ok {
				v.sched.Finish(j, v.known(t.node, o, knownReject))
				continue
			}
		}
		k, err := v.scryptJob(t)
		if err != nil {
			v.sched.Finish(j, err)
			continue
		}
		todo = append(todo, j)
		keys = append(keys, k)
	}
	if len(todo) == 0 {
		return 0, 0, 0
	}
	// The goroutine keeps its thread so that the thread's CPU clock
	// measures this computation alone.
	held := v.reserve(keys) // before the clocks: waiting is not computing
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, cpu0 := time.Now(), threadCPU()
	v.stats.scryptRuns.Add(uint64(len(todo)))
	err := v.deriveAll(todo, keys)
	took := time.Since(start)
	v.mem.release(held)
	wall = took
	if cpu0 > 0 {
		cpu = time.Duration(threadCPU() - cpu0)
	}
	for i, j := range todo {
		v.observeScrypt(j, took)
		switch t := taskOf(j); {
		case err != nil:
			v.sched.Finish(j, err)
		case keys[i].Err != nil:
			v.sched.Finish(j, fmt.Errorf("%w: %v", ErrInvalidHash, keys[i].Err))
		case t.hashOnly:
			t.made = format(keys[i].Salt, v.opts.Params.LogN, v.opts.Params.R, v.opts.Params.P, keys[i].Key)
			// Its key is verified against it: the VerifyHash that follows
			// costs no scrypt (the hash is its name; see Hasher).
			v.recordMatch(t.made, v.cache.PairKey(t.made, t.made), v.cache.Key(t.made, t.made, t.password), v.opts.Params.KeyLen)
			v.sched.Finish(j, nil)
		case t.enroll():
			made := format(keys[i].Salt, v.opts.Params.LogN, v.opts.Params.R, v.opts.Params.P, keys[i].Key)
			v.sched.Hold(j)
			v.wg.Add(1)
			go v.finishEnroll(j, made)
		default:
			v.sched.Finish(j, v.verified(t, keys[i].Key))
		}
		clear(keys[i].Key)
	}
	v.releaseLater()
	return len(todo), wall, cpu
}

// countPanic, deferred by runBatch, counts a panic in its own code in
// Stats.Panics and passes it on to the scheduler, which ends the batch's
// unanswered jobs with it (result gives their callers a "verify: "
// error).
func (v *Verifier) countPanic() {
	if r := recover(); r != nil {
		v.stats.panics.Add(1)
		panic(r)
	}
}

// observeQueueWait and observeScrypt tell the Observer, if any, of j's
// queue wait and computation. A panic in the Observer is recovered and
// counted in Stats.Panics: a timing is not worth an answer, so the job's
// answer, and those of its batch, are as without it.
func (v *Verifier) observeQueueWait(j *sched.Job) {
	if o := v.opts.Observer; o != nil {
		defer v.recoverObserver()
		o.ObserveQueueWait(observed(j), j.QueueWait())
	}
}

func (v *Verifier) observeScrypt(j *sched.Job, took time.Duration) {
	if o := v.opts.Observer; o != nil {
		defer v.recoverObserver()
		o.ObserveScrypt(observed(j), took)
	}
}

func (v *Verifier) recoverObserver() {
	if recover() != nil {
		v.stats.panics.Add(1)
	}
}

// observed is the context an Observer is given for j: j's own, labelled
// ProfileLabel=ProfileScrypt.
func observed(j *sched.Job) context.Context { return pprof.WithLabels(j.Context(), scryptLabels) }

// scryptJob returns the scrypt inputs of t: the stored hash's salt and
// parameters, or a fresh salt and Options.Params for an enrollment.
func (v *Verifier) scryptJob(t *task) (scrypt.Job, error) {
	if !t.enroll() {
		h := &t.h
		return scrypt.Job{Password: []byte(t.password), Salt: h.salt, N: 1 << h.logN, R: h.r, P: h.p, KeyLen: len(h.key)}, nil
	}
	p := v.opts.Params
	salt := make([]byte, p.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return scrypt.Job{}, fmt.Errorf("verify: reading random salt: %w", err)
	}
	return scrypt.Job{Password: []byte(t.password), Salt: salt, N: 1 << p.LogN, R: p.R, P: p.P, KeyLen: p.KeyLen}, nil
}

// deriveAll computes keys, the scrypt of the jobs todo, under the labels
// the jobs' contexts all carry and ProfileLabel=ProfileScrypt. A panic
// becomes the error of every job, not a dead process.
func (v *Verifier) deriveAll(todo []*sched.Job, keys []scrypt.Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			v.stats.panics.Add(1)
			err = fmt.Errorf("verify: panic in shared work: %v", r)
		}
	}()
	pprof.Do(commonLabels(todo), scryptLabels, func(context.Context) { v.derive(keys) })
	return nil
}

// commonLabels returns a context carrying the pprof labels that every
// job's context carries with the same value: what the batch's CPU can be
// attributed to.
func commonLabels(jobs []*sched.Job) context.Context {
	ctx := jobs[0].Context()
	if len(jobs) == 1 {
		return ctx
	}
	var shared []string
	pprof.ForLabels(ctx, func(k, val string) bool {
		for _, j := range jobs[1:] {
			if w, ok := pprof.Label(j.Context(), k); !ok || w != val {
				return true
			}
		}
		shared = append(shared, k, val)
		return true
	})
	return pprof.WithLabels(context.Background(), pprof.Labels(shared...))
}

// verified caches the outcome of t's computed key and returns it.
func (v *Verifier) verified(t *task, derived []byte) error {
	if subtle.ConstantTimeCompare(derived, t.h.key) != 1 {
		v.cache.Put(t.key, cache.Mismatch)
		v.fails.mismatch(t.node)
		return ErrMismatchedHashAndPassword
	}
	v.recordMatch(t.node, t.pair, t.key, len(t.h.key))
	v.remember(t.node, t.stored, t.password)
	return nil
}

// known answers a job whose outcome the cache learned while it was
// queued: no scrypt needed.
func (v *Verifier) known(node string, o cache.Outcome, knownReject bool) error {
	if o == cache.Match {
		return nil
	}
	v.fails.mismatch(node)
	if knownReject {
		return errKnownReject
	}
	return ErrMismatchedHashAndPassword
}

// errKnownReject is ErrMismatchedHashAndPassword for a job answered
// without scrypt because another password is its node's: result counts
// it in KnownMatchRejects once per caller, as it counts Mismatches.
var errKnownReject = fmt.Errorf("%w", ErrMismatchedHashAndPassword)

// finishEnroll is an enrollment's last step, after its slot was given
// back: Create the hash made, then publish the outcome.
func (v *Verifier) finishEnroll(j *sched.Job, made string) {
	defer v.wg.Done()
	ctx := j.Context()
	pprof.SetGoroutineLabels(ctx)
	t := taskOf(j)
	v.sched.Finish(j, v.create(ctx, t.node, t.key, made, t.password))
}

// create stores made as node's new hash and records the enrollment; when
// the store fails, it lets the node in if Options.FailOpen allows
// (see failOpen).
func (v *Verifier) create(ctx context.Context, node string, key cache.Key, made, password string) error {
	err := v.storeCreate(ctx, node, made)
	switch {
	case err == nil:
		v.createFailed.Store(nil)
		v.recordMatch(node, v.cache.PairKey(node, made), v.cache.Key(node, made, password), v.opts.Params.KeyLen)
		v.remember(node, made, password)
		v.stats.enrollments.Add(1)
		return nil
	case errors.Is(err, ErrExists):
		return err
	}
	err = v.cut(ctx, err)
	if !errors.Is(err, ErrClosed) {
		v.createFailed.Store(&createFailure{at: time.Now(), err: err})
	}
	if err := v.failOpen(ctx, node, key, made, err); err != nil {
		return err
	}
	// Let in: once the retry stores the hash, the node's requests are
	// cache hits.
	v.recordMatch(node, v.cache.PairKey(node, made), v.cache.Key(node, made, password), v.opts.Params.KeyLen)
	return nil
}

// cut returns ErrClosed for err when Close cut ctx's work short,
// wherever it was, and err otherwise.
func (v *Verifier) cut(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), sched.ErrClosed) {
		return ErrClosed
	}
	return err
}

// result turns a job's or the scheduler's answer into the caller's and
// counts it.
func (v *Verifier) result(err error) error {
	var o *sched.Overload
	switch {
	case err == nil:
	case errors.Is(err, ErrMismatchedHashAndPassword):
		v.stats.mismatches.Add(1)
		if err == errKnownReject {
			v.stats.knownMatchRejects.Add(1)
		}
	case errors.As(err, &o):
		v.stats.shed.Add(1)
		if o.Held {
			v.stats.shedAfterWait.Add(1)
		}
		return &OverloadError{After: o.After, Queued: o.Queued, reason: o.Reason}
	case errors.Is(err, sched.ErrClosed):
		return ErrClosed
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("verify: work timed out (Options.WorkTimeout): %w", err)
	case errors.Is(err, sched.ErrPanic): // counted by countPanic
		return fmt.Errorf("verify: %w", err)
	}
	return err
}

// releaseLater releases the scrypt buffers once the Verifier has had
// nothing to compute for bufferIdle (see Options.MaxConcurrent).
func (v *Verifier) releaseLater() { v.quiet.Reset(bufferIdle) }

// bufferIdle is how long the Verifier keeps idle scrypt buffers.
const bufferIdle = 30 * time.Second

// releaseIfQuiet drops the idle scrypt buffers unless work is under way;
// then it looks again bufferIdle later, since that work may end without
// a batch to re-arm the timer (an enrollment whose read fails, say).
func (v *Verifier) releaseIfQuiet() {
	if running, waiting := v.sched.Load(); running == 0 && waiting == 0 {
		v.pool.Release()
		return
	}
	v.releaseLater()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
