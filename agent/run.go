package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Get runs attempts until the node holds all four certificates, valid,
// and returns what the last attempt left. If an attempt fails while the
// certificates on disk are valid, Get returns them with Result.Offline
// set. When ctx ends, Get returns ctx's error and the last attempt's.
func (c *Client) Get(ctx context.Context) (*Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prelude = nil
	res, err := c.retry(ctx, c.attempt, true)
	if err == nil {
		c.last = res
	}
	return res, err
}

// Renew keeps the certificates renewed until ctx ends, then returns
// ctx's error. It sleeps until the first renewal time and runs attempts
// until one renews what is due. A failed renewal is retried after the
// backoff's wait. Renew also learns the servers. Call it after Get.
func (c *Client) Renew(ctx context.Context) error {
	c.mu.Lock()
	res := c.last
	c.mu.Unlock()
	for {
		c.mu.Lock()
		renewAt := time.Now().Add(c.untilRenewal(res))
		c.mu.Unlock()
		for {
			c.mu.Lock()
			learn := c.untilLearn()
			c.mu.Unlock()
			renew := time.Until(renewAt)
			c.log.Debug("agent: next renewal", "in", renew, "servers_asked_in", learn)
			if err := sleep(ctx, min(renew, learn)); err != nil {
				return err
			}
			if !time.Now().Before(renewAt) {
				break // the certificates first; the servers after
			}
			c.mu.Lock()
			c.learn(ctx)
			c.mu.Unlock()
		}
		c.mu.Lock()
		c.prelude = nil
		var err error
		res, err = c.retry(ctx, c.attempt, false)
		c.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// untilRenewal is how long Renew sleeps after an attempt that left res
// (nil: no Get before; the files on disk are checked). Called with c.mu
// held.
func (c *Client) untilRenewal(res *Result) time.Duration {
	if res == nil {
		res = c.onDisk(time.Now())
	}
	if !res.usable() {
		return 0
	}
	at, failed := res.renewAt()
	if failed {
		return c.backoff.Next(0) // not reset by the attempt
	}
	return time.Until(at)
}

// retry runs attempt until it succeeds (see Get), waiting between
// attempts with c.backoff. offline lets it settle for the certificates on
// disk when no server answers. Called with c.mu held.
func (c *Client) retry(ctx context.Context, attempt func(context.Context) (*Result, error), offline bool) (*Result, error) {
	var last error // the last attempt that ctx's end did not cut
	wl := waitLog{info: time.Now()}
	for {
		res, err := attempt(ctx)
		if err == nil {
			c.lastErr = ""
			if _, failed := res.renewAt(); !failed {
				c.backoff.Reset()
			}
			return res, nil
		}
		if ended(ctx) {
			if last == nil {
				last = err
			}
			return res, fmt.Errorf("agent: giving up (%w); the last attempt: %w", endErr(ctx), inner{last})
		}
		last = err
		doubted := c.caDoubted
		if doubted {
			c.trust, c.diskCAStale = nil, true // the next attempt fetches the CA
		}
		rejected := errors.Is(err, ErrTokenRejected) || errors.Is(err, ErrCARejected) ||
			errors.Is(err, ErrNodePasswordRejected) || errors.Is(err, ErrRefused)
		if rejected && c.opts.StopOnRejection {
			return res, err
		}
		// A node without an address cannot tell whether its serving
		// certificate names it (see addresses): no certificate on disk
		// stands in.
		if offline && !rejected && !doubted && !errors.Is(err, errNoAddress) {
			if disk := c.onDisk(time.Now()); disk.usable() {
				c.log.Warn("agent: no server answered; going on with the certificates on disk", "err", err)
				disk.Offline = err
				return disk, nil
			}
		}
		// The servers' Retry-After is a floor; a server left out for its
		// RecoveryDelay is not: when every server failed (an agent with one
		// server, or a load balancer's address, say), the one back first is
		// asked again after the backoff's wait (rotation.order).
		floor := time.Until(c.askedUntil)
		if rejected {
			floor = c.backoff.ceiling()
		}
		d := c.backoff.Next(floor)
		c.logWait(ctx, &wl, err, d)
		if err := sleep(ctx, d); err != nil {
			return res, fmt.Errorf("agent: giving up (%w); the last attempt: %w", err, inner{last})
		}
	}
}

// stillWaitingEvery spaces the lines that say the agent still tries.
const stillWaitingEvery = time.Minute

// waitLog is what one retry has logged of its failures.
type waitLog struct {
	failed int       // attempts failed
	info   time.Time // when the last line at Info was written
}

// logWait logs a failed attempt and the wait d that follows: at Info
// when the failure changes, at Debug while it repeats, so that a server
// down for minutes does not log a line per attempt. While it repeats, a
// line at Info every stillWaitingEvery says the agent still tries, with
// the attempts so far. Called with c.mu held.
func (c *Client) logWait(ctx context.Context, wl *waitLog, err error, d time.Duration) {
	wl.failed++
	msg, level := "agent: waiting to retrieve the certificates", slog.LevelInfo
	switch now := time.Now(); {
	case err.Error() != c.lastErr:
		wl.info = now
	case now.Sub(wl.info) >= stillWaitingEvery:
		msg, wl.info = "agent: still waiting to retrieve the certificates", now
	default:
		level = slog.LevelDebug
	}
	c.lastErr = err.Error()
	c.log.Log(ctx, level, msg, "attempts", wl.failed, "retry_in", d.Round(time.Millisecond), "err", err)
}

// maxSleep bounds one timer of a long wait: the wait is measured again
// on the wall clock after each, so that a suspended machine does not
// sleep past a renewal.
const maxSleep = time.Hour

// sleep waits d, or until ctx ends (returning its error).
func sleep(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d).Round(0) // wall clock
	for {
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(min(left, maxSleep))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// ended reports whether ctx has ended, or its deadline has passed: a
// dial cut by the deadline can fail before ctx's own timer fires.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// endErr is ctx's error once ended(ctx).
func endErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}
