package httpauth

import (
	"sync"
	"time"
)

// Invalid node names and passwords are logged at most invalidLogBurst
// times per invalidLogEvery: a client chooses them, and a guesser could
// otherwise fill the log at the rate it sends requests.
const (
	invalidLogBurst = 10
	invalidLogEvery = time.Minute
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
