package verify

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/cache"
	"github.com/nodepass/nodepass/verify/internal/sched"
)

// An enrollment's steps off its slot, each on a goroutine of its own.

// prepare is an enrollment's first step, before its slot: a read past the
// store's cache, as k3s reads the API before it creates, so that a node
// another server enrolled a moment ago costs no scrypt.
func (v *Verifier) prepare(j *sched.Job) {
	ctx := j.Context()
	pprof.SetGoroutineLabels(ctx)
	t := taskOf(j)
	_, err := v.getFresh(ctx, t.name)
	switch f := v.createFailed.Load(); {
	case err == nil:
		v.sched.Finish(j, fmt.Errorf("%w: %q enrolled meanwhile", ErrExists, t.name))
	case errors.Is(err, ErrNotFresh) && f != nil && time.Since(f.at) < createFailingFor:
		// No fresh read and a Create failed moments ago (an outage):
		// hashing would cost a scrypt for a Create that fails too.
		v.sched.Finish(j, fmt.Errorf("verify: not enrolling %q: the store's last Create failed %v ago: %w", t.name, time.Since(f.at).Round(time.Millisecond), f.err))
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

// finishEnroll is an enrollment's last step, after its slot: the Create
// of the hash made, and the outcome published.
func (v *Verifier) finishEnroll(j *sched.Job, t *task, made string) {
	defer v.wg.Done()
	ctx := j.Context()
	pprof.SetGoroutineLabels(ctx)
	v.sched.Finish(j, v.create(ctx, t.name, t.key, made, t.password))
}

// create stores made as node's new hash and records the enrollment; when
// the store fails, failOpen may let the node in.
func (v *Verifier) create(ctx context.Context, node string, key cache.Key, made, password string) error {
	err := v.storeCreate(ctx, node, made)
	switch {
	case errors.Is(err, ErrExists):
		return err
	case err != nil:
		err = v.cut(ctx, err)
		if !errors.Is(err, ErrClosed) {
			v.createFailed.Store(&createFailure{at: time.Now(), err: err})
		}
		if err := v.failOpen(ctx, node, key, made, err); err != nil {
			return err
		} // let in: the node's requests are cache hits
	}
	v.recordMatch(node, made, v.cache.Key(node, made, password), v.opts.Params.KeyLen)
	if err == nil {
		v.createFailed.Store(nil)
		v.remember(node, made, password)
		atomic.AddUint64(&v.stats.Enrollments, 1)
	}
	return nil
}

// cut returns ErrClosed for err when Close cut ctx's work short.
func (v *Verifier) cut(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), sched.ErrClosed) {
		return ErrClosed
	}
	return err
}
