package verify

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/cache"
	"github.com/nodepass/nodepass/scrypt"
	"github.com/nodepass/nodepass/verify/internal/sched"
)

// The slot side: a batch of jobs the scheduler gave a slot, computed and
// answered. It calls nothing on the request side.

// task is what one job computes.
type task struct {
	kind     jobKind
	name     string    // the name of the check (see request.go)
	password string    // as scrypt sees it (hmacKey)
	key      cache.Key // (name, stored, password), or (name, "", password) for a new hash
	stored   string    // a verification's stored hash, and h, its parsed form
	h        hash
	made     string // a hashOnly job's hash, written before the job finishes
}

// jobKind says what a job computes, and what becomes of its outcome.
type jobKind uint8

const (
	verification jobKind = iota // a password against a stored hash
	enrollment                  // a new node's hash, stored after the slot (finishEnroll)
	hashOnly                    // a hash for Hasher.CreateHash, stored nowhere
)

// runBatch computes a batch the scheduler gave one slot: its scrypt in
// one KeyBatch, then each job's outcome published and cached before the
// slot takes the next batch. A verification whose outcome became known
// while it was queued costs no scrypt.
func (v *Verifier) runBatch(jobs []*sched.Job) (computed int, wall, cpu time.Duration) {
	defer v.countPanic()
	var todo []*sched.Job
	var keys []scrypt.Job
	for _, j := range jobs {
		t := taskOf(j)
		v.observe(j, false, 0)
		if t.kind == verification {
			if known, err := v.fromCache(t.name, t.stored, t.key); known {
				v.sched.Finish(j, err)
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
	// The thread's CPU clock measures this computation alone.
	lanes, per, release := v.reserve(keys) // before the clocks: waiting is not computing
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, cpu0 := time.Now(), threadCPU()
	atomic.AddUint64(&v.stats.ScryptRuns, uint64(len(todo)))
	err := v.deriveAll(todo, keys, lanes, per)
	wall = time.Since(start)
	release()
	if cpu0 > 0 {
		cpu = time.Duration(threadCPU() - cpu0)
	}
	for i, j := range todo {
		v.observe(j, true, wall)
		v.publish(j, &keys[i], err)
		clear(keys[i].Key)
	}
	if !v.shape.Load().final {
		v.reshape(v.mem()) // this batch may have measured the kernels
	}
	v.releaseLater()
	return len(todo), wall, cpu
}

// countPanic, deferred by runBatch, counts a panic in Stats.Panics and
// passes it on to the scheduler, which ends the batch's jobs with it.
func (v *Verifier) countPanic() {
	if r := recover(); r != nil {
		atomic.AddUint64(&v.stats.Panics, 1)
		panic(r)
	}
}

// taskOf returns what j computes.
func taskOf(j *sched.Job) *task { return j.Task().(*task) }

// observe tells the Observer, if any, of j's wait for its slot, or once
// j ran, of its batch's time wall, with j's context labelled
// ProfileLabel=ProfileScrypt. A panic in the Observer is counted in
// Stats.Panics and changes no answer: a timing is not worth one.
func (v *Verifier) observe(j *sched.Job, ran bool, wall time.Duration) {
	o := v.opts.Observer
	if o == nil {
		return
	}
	defer func() {
		if recover() != nil {
			atomic.AddUint64(&v.stats.Panics, 1)
		}
	}()
	ctx := pprof.WithLabels(j.Context(), scryptLabels)
	if ran {
		o.ObserveScrypt(ctx, wall)
	} else {
		o.ObserveQueueWait(ctx, j.QueueWait())
	}
}

// scryptJob returns the scrypt inputs of t: the stored hash's salt and
// parameters, or a fresh salt and Options.Params for a new hash.
func (v *Verifier) scryptJob(t *task) (scrypt.Job, error) {
	if t.kind == verification {
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

// deriveAll computes keys, the scrypt of the jobs todo, per jobs and
// lanes hashes at a time, under the labels the jobs' contexts all carry
// and ProfileLabel=ProfileScrypt. A panic becomes the error of every job,
// not a dead process.
func (v *Verifier) deriveAll(todo []*sched.Job, keys []scrypt.Job, lanes, per int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			atomic.AddUint64(&v.stats.Panics, 1)
			err = fmt.Errorf("verify: panic in shared work: %v", r)
		}
	}()
	pprof.Do(commonLabels(todo), scryptLabels, func(context.Context) {
		for i := 0; i < len(keys); i += per {
			v.derive(keys[i:min(i+per, len(keys))], lanes)
		}
	})
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

// publish answers j, whose scrypt is k (or err when its batch failed),
// by its kind: a verification's outcome is cached; an enrollment's hash
// is stored after the slot is given back (finishEnroll); a hashOnly
// job's hash is recorded as verified against its key.
func (v *Verifier) publish(j *sched.Job, k *scrypt.Job, err error) {
	if err == nil && k.Err != nil {
		err = fmt.Errorf("%w: %v", ErrInvalidHash, k.Err)
	}
	if err != nil {
		v.sched.Finish(j, err)
		return
	}
	p := v.opts.Params
	switch t := taskOf(j); t.kind {
	case verification:
		v.sched.Finish(j, v.verified(t, k.Key))
	case enrollment:
		v.sched.Hold(j)
		v.wg.Add(1)
		go v.finishEnroll(j, t, format(k.Salt, p.LogN, p.R, p.P, k.Key))
	case hashOnly:
		t.made = format(k.Salt, p.LogN, p.R, p.P, k.Key)
		// The VerifyHash that follows costs no scrypt: the hash is its
		// name (see Hasher).
		v.recordMatch(t.made, t.made, v.cache.Key(t.made, t.made, t.password), p.KeyLen)
		v.sched.Finish(j, nil)
	}
}

// verified records the outcome of t's computed key and returns it.
func (v *Verifier) verified(t *task, derived []byte) error {
	if subtle.ConstantTimeCompare(derived, t.h.key) != 1 {
		v.cache.Put(t.key, cache.Mismatch)
		v.fails.mismatch(t.name)
		return ErrMismatchedHashAndPassword
	}
	v.recordMatch(t.name, t.stored, t.key, len(t.h.key))
	v.remember(t.name, t.stored, t.password)
	return nil
}
