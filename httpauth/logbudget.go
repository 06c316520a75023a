package httpauth

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Invalid node names and passwords are logged at most invalidLogBurst
// times per invalidLogEvery: a client chooses them, and a guesser could
// otherwise fill the log at the rate it sends requests. Server-side
// failures (store errors, corrupt stored hashes) are logged at most
// failureLogBurst times per failureLogEvery: in a store outage every
// request of a herd fails alike, and the operator needs the first lines
// and the count, not one line per request.
const (
	invalidLogBurst = 10
	invalidLogEvery = time.Minute
	failureLogBurst = 10
	failureLogEvery = 10 * time.Second
)

// logBudget bounds the lines of one kind a client can cause: burst per
// interval. The lines past it are counted, and the count is logged with
// the next line let through. The zero value is ready to use; it is safe
// for concurrent use.
type logBudget struct {
	mu         sync.Mutex
	start      time.Time // the current interval's
	logged     int       // lines let through in it
	suppressed int       // lines held back since the last one let through
}

// allow reports whether a line may be logged at now and, if so, how many
// were held back before it.
func (b *logBudget) allow(now time.Time, burst int, every time.Duration) (ok bool, suppressed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.start) >= every || now.Before(b.start) {
		b.start, b.logged = now, 0
	}
	if b.logged >= burst {
		b.suppressed++
		return false, 0
	}
	b.logged++
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}

// logWithin logs msg at level if b allows it (burst per every), after a
// line saying how many of its kind were held back since the last one.
func logWithin(ctx context.Context, log *slog.Logger, b *logBudget, burst int, every time.Duration, level slog.Level, msg string, args ...any) {
	ok, suppressed := b.allow(time.Now(), burst, every)
	if !ok {
		return
	}
	if suppressed > 0 {
		log.Log(ctx, level, msg+" (and more not logged, over the budget)", "suppressed", suppressed)
	}
	log.Log(ctx, level, msg, args...)
}
