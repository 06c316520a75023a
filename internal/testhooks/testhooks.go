// Package testhooks holds what the benchmark needs of the module's
// packages and a server author does not: the Verifier's default timings,
// which the benchmark scales for its fast in-process runs, and a clock of
// its own for a verified-tuple cache. Only this module can import it.
package testhooks

import "time"

// The Verifier's defaults for Options.MaxWait, Options.MaxFailDelay and
// Options.Agents.RetryDelay (package verify takes them from here).
const (
	MaxWait         = 9500 * time.Millisecond
	MaxFailDelay    = 2 * time.Second
	AgentRetryDelay = 5 * time.Second
)

// SetClock makes the caches made from opts (a *cache.Options) read now
// instead of time.Now: a benchmark moves a server's clock on hours.
// Package cache sets it when it loads.
var SetClock func(opts any, now func() time.Time)
