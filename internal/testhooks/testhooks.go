// Package testhooks holds what the benchmark needs of the module's
// packages and a server author does not: the Verifier's default timings,
// which the benchmark scales for its fast in-process runs, and a clock of
// its own for a verified-tuple cache. Only this module can import it.
package testhooks

import (
	"sync"
	"time"
)

// The Verifier's defaults for Options.MaxWait, Options.MaxFailDelay and
// Options.Agents.RetryDelay (package verify takes them from here).
const (
	MaxWait         = 9500 * time.Millisecond
	MaxFailDelay    = 2 * time.Second
	AgentRetryDelay = 5 * time.Second
)

var clocks sync.Map // key → func() time.Time

// SetClock makes the caches made from options key (a *cache.Options) read
// now instead of time.Now: a benchmark moves a server's clock on hours.
func SetClock(key any, now func() time.Time) { clocks.Store(key, now) }

// Clock returns the clock SetClock set for key, if any.
func Clock(key any) (func() time.Time, bool) {
	f, ok := clocks.Load(key)
	if !ok {
		return nil, false
	}
	return f.(func() time.Time), true
}
