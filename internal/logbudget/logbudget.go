// Package logbudget bounds what a client can make a server write to its
// log: the lines of each kind (Budget) and the bytes of each value the
// client sent (Clip, ClipError). httpauth and the example server use it
// for every line a client's request can cause.
package logbudget

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"
)

// Budget bounds the lines of one kind: Burst at once, then one per Every
// (rate.Limiter's token bucket, which starts full). A line past the
// budget is held back and counted. The count is written as one line of
// its own before the next line let through or, if none comes, once Every
// has passed without a line held back: a flood that stops is still
// reported. A timer runs only while lines are held back. It is safe for
// concurrent use; make one with New.
type Budget struct {
	// Set by New and never changed.
	log   *slog.Logger
	kind  string // names the lines in the count's line
	every time.Duration
	lines *rate.Limiter

	mu    sync.Mutex  // guards the fields below, and orders lines.Allow with them
	held  int         // lines held back since the last count written
	level slog.Level  // of the last line held back
	timer *time.Timer // writes the count (flush); armed while held > 0
}

// New returns a Budget of burst lines at once, then one per every, whose
// count lines go to log naming kind ("httpauth: invalid node names").
func New(log *slog.Logger, kind string, burst int, every time.Duration) *Budget {
	every = max(every, time.Nanosecond)
	return &Budget{log: log, kind: kind, every: every, lines: rate.NewLimiter(rate.Every(every), max(burst, 1))}
}

// Log writes msg at level with args if the budget allows it, after the
// count of the lines held back before it, if any.
func (b *Budget) Log(ctx context.Context, level slog.Level, msg string, args ...any) {
	ok, held, heldLevel := b.take(level)
	if !ok {
		return
	}
	if held > 0 {
		b.writeCount(ctx, heldLevel, held)
	}
	b.log.Log(ctx, level, msg, args...)
}

// take spends one line of the budget, or holds it back. When it lets the
// line through, it returns the lines held back before it, and their
// level.
func (b *Budget) take(level slog.Level) (ok bool, held int, heldLevel slog.Level) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.lines.Allow() {
		b.held++
		b.level = level
		if b.timer == nil {
			b.timer = time.AfterFunc(b.every, b.flush)
		} else {
			b.timer.Reset(b.every)
		}
		return false, 0, 0
	}
	held, b.held = b.held, 0
	if held > 0 {
		b.timer.Stop()
	}
	return true, held, b.level
}

// flush writes the count of the lines held back, if any: the timer
// calls it once no line has been held back for every.
func (b *Budget) flush() {
	b.mu.Lock()
	held, level := b.held, b.level
	b.held = 0
	b.mu.Unlock()
	if held > 0 {
		b.writeCount(context.Background(), level, held)
	}
}

func (b *Budget) writeCount(ctx context.Context, level slog.Level, held int) {
	b.log.Log(ctx, level, b.kind+": lines not logged, over the log budget", "suppressed", held)
}

// The bytes of a client-sent value a log line keeps: MaxValue of a name,
// an address or a header value, MaxError of an error message, which may
// quote such values.
const (
	MaxValue = 64
	MaxError = 512
)

// Clip returns s, a value a client sent (a node or user name, an
// address, a header's value), cut to MaxValue bytes for a log line.
func Clip(s string) string { return clip(s, MaxValue) }

// ClipError returns err's message cut to MaxError bytes for a log line,
// or "" for a nil err.
func ClipError(err error) string {
	if err == nil {
		return ""
	}
	return clip(err.Error(), MaxError)
}

// clip cuts s to at most n bytes, at a character boundary, and says how
// long it was: "abc... (1048576 bytes)".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
