package verify

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/cache"
)

// deferredEnrollment is a node let in by Options.FailOpen whose hash
// is not stored yet. Set once, then read-only.
type deferredEnrollment struct {
	key  cache.Key // the enrollment key of the password let in
	hash string    // its hash, retried with Store.Create
}

// Retry schedule of a deferred enrollment's Create.
const (
	enrollRetryFirst = 5 * time.Second
	enrollRetryMax   = time.Minute
)

// deferred answers a request for a node whose enrollment was let in and
// is still being retried: the password let in passes, any other fails.
func (v *Verifier) deferred(node, password string) (known bool, err error) {
	d, ok := v.pending.Load(node)
	if !ok {
		return false, nil
	}
	key := v.cache.Key(node, "", password)
	if subtle.ConstantTimeCompare(key[:], d.(*deferredEnrollment).key[:]) == 1 {
		return true, nil
	}
	v.fails.mismatch(node)
	return true, ErrMismatchedHashAndPassword
}

// failOpen lets in an enrollment whose Create failed with createErr, if
// Options.FailOpen allows it, and starts its retry. It returns createErr
// when Close cut the Create short, at FailOpen.MaxPending, or when a
// fresh read does not confirm that the node has no hash (an admission
// policy refuses with Forbidden, not ErrExists); ErrExists when that read
// finds a hash, which the node is verified against.
func (v *Verifier) failOpen(ctx context.Context, node string, key cache.Key, stored string, createErr error) error {
	if v.opts.FailOpen == nil || errors.Is(createErr, ErrClosed) {
		return createErr
	}
	switch _, err := v.getFresh(ctx, node); {
	case err == nil:
		return fmt.Errorf("%w: %q (Create failed: %v)", ErrExists, node, createErr)
	case !errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotFresh):
		return createErr // no fresh read: not sure the node is new
	}
	for n := v.pendingCount.Load(); ; n = v.pendingCount.Load() {
		if n >= int64(v.opts.FailOpen.MaxPending) {
			return createErr
		}
		if v.pendingCount.CompareAndSwap(n, n+1) {
			break
		}
	}
	d := &deferredEnrollment{key: key, hash: stored}
	if first, loaded := v.pending.LoadOrStore(node, d); loaded { // only the first one's password passes
		v.pendingCount.Add(-1)
		if subtle.ConstantTimeCompare(key[:], first.(*deferredEnrollment).key[:]) == 1 {
			return nil
		}
		return ErrMismatchedHashAndPassword
	}
	atomic.AddUint64(&v.stats.FailOpenEnrollments, 1)
	v.wg.Add(1)
	go v.retryEnrollment(node, d, createErr)
	return nil
}

// retryEnrollment retries a deferred enrollment's Create until it is
// stored, another hash is, the retries run out or the Verifier closes.
func (v *Verifier) retryEnrollment(node string, d *deferredEnrollment, lastErr error) {
	defer v.wg.Done()
	ctx, cancel := context.WithTimeout(v.base, v.opts.FailOpen.RetryFor)
	defer cancel()
	err := lastErr
	for wait := enrollRetryFirst; ; wait = min(2*wait, enrollRetryMax) {
		sleep(ctx, wait)
		if ctx.Err() != nil {
			err = fmt.Errorf("verify: enrollment of %q let in but never stored: %w", node, err)
			break
		}
		err = v.storeCreate(ctx, node, d.hash)
		if errors.Is(err, ErrExists) {
			if stored, gerr := v.get(ctx, node); gerr == nil && stored != d.hash {
				err = fmt.Errorf("%w: another hash was stored for %q while its enrollment was let in", ErrMismatchedHashAndPassword, node)
				break
			}
			err = nil // ours, stored by an attempt whose answer was lost
		}
		if err == nil {
			atomic.AddUint64(&v.stats.Enrollments, 1)
			break
		}
	}
	v.pending.Delete(node)
	v.pendingCount.Add(-1)
	if err != nil {
		atomic.AddUint64(&v.stats.FailOpenFailures, 1)
	}
	if f := v.opts.FailOpen.OnDeferred; f != nil {
		f(node, err)
	}
}
