package verify

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/nodepass/nodepass/verify/internal/sched"
)

// share runs work once for every concurrent caller with the same r.Key and
// waits for its result within ctx and Options.MaxWait. The first caller
// starts the job in a goroutine of its own, detached from ctx (its values
// and pprof labels kept), under Options.WorkTimeout; work caches its
// outcome itself, before the job ends.
func (v *Verifier) share(ctx context.Context, r sched.Request, work func(context.Context, *sched.Job) error) error {
	node := r.Name
	r.Failing = r.Failing || v.fails.failing(node)
	j, created, err := v.sched.Join(ctx, r)
	switch {
	case err != nil: // closed, or the whole queue full
		return v.result(err)
	case created:
		v.wg.Add(1)
		go v.run(j, work)
	default:
		v.stats.shared.Add(1)
	}
	err = v.sched.Wait(ctx, j)
	if cause := context.Cause(ctx); cause != nil && err == cause {
		return fmt.Errorf("verify: waiting for result: %w", err)
	}
	return v.result(err)
}

// run does job j's work and publishes its result. A panic becomes the
// result, not a dead process.
func (v *Verifier) run(j *sched.Job, work func(context.Context, *sched.Job) error) {
	defer v.wg.Done()
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(j.Context()))
	defer cancel(nil)
	stop := context.AfterFunc(v.base, func() { cancel(ErrClosed) })
	defer stop()
	ctx, cancelTimeout := context.WithTimeout(ctx, v.opts.WorkTimeout)
	defer cancelTimeout()

	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				v.stats.panics.Add(1)
				err = fmt.Errorf("verify: panic in shared work: %v", r)
			}
		}()
		pprof.Do(ctx, scryptLabels, func(ctx context.Context) { err = work(ctx, j) })
	}()
	if err != nil && errors.Is(context.Cause(ctx), ErrClosed) {
		err = ErrClosed // cut short by Close, wherever it was
	}
	v.sched.Finish(j, err)
}

// acquire waits for j's slot. On a nil return j holds one until runSlot
// or the end of the job gives it back.
func (v *Verifier) acquire(ctx context.Context, j *sched.Job) error {
	waited, err := v.sched.Acquire(ctx, j)
	if err != nil {
		var o *sched.Overload
		if errors.As(err, &o) || errors.Is(err, ErrClosed) {
			return err // displaced, or closed: the callers are told so
		}
		return fmt.Errorf("verify: waiting for a scrypt slot: %w", err)
	}
	if o := v.opts.Observer; o != nil {
		o.ObserveQueueWait(ctx, waited)
	}
	return nil
}

// runSlot runs one scrypt computation fn on j's slot and gives the slot
// back, with the computation's wall and CPU time for the estimates.
func (v *Verifier) runSlot(ctx context.Context, j *sched.Job, fn func() error) error {
	// The goroutine keeps its thread so that the thread's CPU clock
	// measures this computation alone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, cpu0 := time.Now(), threadCPU()
	v.stats.scryptRuns.Add(1)
	var wall, cpu time.Duration
	defer func() { v.sched.Release(j, wall, cpu) }()
	err := fn()
	wall = time.Since(start)
	if cpu0 > 0 {
		cpu = time.Duration(threadCPU() - cpu0)
	}
	if o := v.opts.Observer; o != nil {
		o.ObserveScrypt(ctx, wall)
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
	case errors.As(err, &o):
		v.stats.shed.Add(1)
		if o.Held {
			v.stats.shedAfterWait.Add(1)
		}
		return &OverloadError{After: o.After, Queued: o.Queued, reason: o.Reason}
	case errors.Is(err, sched.ErrClosed):
		return ErrClosed
	}
	return err
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
