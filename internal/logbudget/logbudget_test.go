package logbudget

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lockedBuffer is a log destination safe for the timer's goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) count(s string) int { return strings.Count(b.String(), s) }

// TestBudget: burst lines at once, then one per every; the lines held
// back are counted, and the count comes before the next line let
// through.
func TestBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		b := New(slog.New(slog.NewTextHandler(&out, nil)), "test: guesses", 10, 6*time.Second)
		logN := func(n int) {
			for i := range n {
				b.Log(context.Background(), slog.LevelInfo, "guess", "i", i)
			}
		}
		logN(1000)
		if n := out.count(`msg=guess`); n != 10 {
			t.Fatalf("1,000 lines at once: %d written, want the burst, 10", n)
		}
		time.Sleep(6*time.Second - time.Nanosecond)
		logN(1)
		if n := out.count(`msg=guess`); n != 10 {
			t.Fatalf("a line before a token was earned was written")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait() // the budget's timer fires now too: its count is written
		logN(1)
		if n, c := out.count(`msg=guess`), out.count(`msg="test: guesses: lines not logged, over the log budget" suppressed=991`); n != 11 || c != 1 {
			t.Fatalf("one interval later: %d lines (want 11), %d counts of 991 (want 1):\n%s", n, c, out.String())
		}
		// A minute of silence fills the bucket again: a burst, no more.
		time.Sleep(time.Minute)
		logN(11)
		if n := out.count(`msg=guess`); n != 21 {
			t.Fatalf("after a minute, 11 lines: %d written in all, want 21", n)
		}
	})
}

// TestBudgetCountAfterFlood: a flood that stops is reported once no line
// has been held back for one interval, with no line let through to carry
// it; a flood that goes on carries its counts on the lines let through
// and writes no extra one.
func TestBudgetCountAfterFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		b := New(slog.New(slog.NewTextHandler(&out, nil)), "test: guesses", 10, 6*time.Second)
		// A sustained flood: 4 lines a second for a minute (0 to 59.75 s).
		for range 240 {
			b.Log(context.Background(), slog.LevelWarn, "guess")
			time.Sleep(250 * time.Millisecond)
		}
		lines, counts := out.count("msg=guess"), out.count("lines not logged")
		if lines != 19 || counts != 9 {
			t.Fatalf("a one-minute flood: %d lines, %d counts; want 19 (the burst, then one at 6 s, 12 s ... 54 s) and 9 (one before each of those):\n%s", lines, counts, out.String())
		}
		time.Sleep(6*time.Second - 250*time.Millisecond - time.Nanosecond)
		if n := out.count("lines not logged"); n != counts {
			t.Fatalf("a count written before the flood had stopped for 6 s")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := out.count("lines not logged"); n != counts+1 || !strings.Contains(out.String(), `level=WARN msg="test: guesses: lines not logged, over the log budget" suppressed=23`+"\n") {
			t.Fatalf("6 s after the flood: %d counts, want %d, at WARN:\n%s", n, counts+1, out.String())
		}
		time.Sleep(time.Hour)
		if n := out.count("lines not logged"); n != counts+1 {
			t.Fatalf("an hour of silence wrote %d more counts", n-counts-1)
		}
	})
}

// TestBudgetConcurrent: under -race, lines from many goroutines are
// either written or counted, never both, never lost.
func TestBudgetConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		b := New(slog.New(slog.NewTextHandler(&out, nil)), "test", 5, time.Second)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 100 {
					b.Log(context.Background(), slog.LevelInfo, "line")
				}
			})
		}
		wg.Wait()
		time.Sleep(2 * time.Second)
		if n := out.count("msg=line"); n != 5 || out.count("suppressed=795") != 1 {
			t.Fatalf("800 lines at once: %d written, want 5, and one count of 795:\n%s", n, out.String())
		}
	})
}

func TestClip(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"worker-1", "worker-1"},
		{strings.Repeat("b", MaxValue), strings.Repeat("b", MaxValue)},
		{long, strings.Repeat("a", MaxValue) + "... (1048576 bytes)"},
		// Cut at a character boundary: "é" is 2 bytes.
		{strings.Repeat("a", MaxValue-1) + "é", strings.Repeat("a", MaxValue-1) + "... (65 bytes)"},
	} {
		if got := Clip(c.in); got != c.want || !utf8.ValidString(got) {
			t.Errorf("Clip(%.20q, %d bytes) = %.90q, want %.90q", c.in, len(c.in), got, c.want)
		}
	}
	if got := ClipError(fmt.Errorf("verify: invalid input: node name %q", long)); len(got) > MaxError+len("... (1048604 bytes)") || !strings.HasPrefix(got, `verify: invalid input: node name "aaa`) {
		t.Errorf("ClipError of a 1 MiB message: %d bytes, %.60q", len(got), got)
	}
	if got := ClipError(errors.New("short")); got != "short" {
		t.Errorf("ClipError(short) = %q", got)
	}
	if got := ClipError(nil); got != "" {
		t.Errorf("ClipError(nil) = %q", got)
	}
}
