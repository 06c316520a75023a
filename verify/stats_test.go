package verify

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// occupied returns a Verifier over s (opts' MaxConcurrent made 1) whose
// one slot a computation for the node "busy" holds at a shut gate.
func occupied(t *testing.T, s *MemoryStore, opts *Options) (*Verifier, *gate) {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	o.MaxConcurrent = 1
	s.Set("busy", mustHash(t, "pw"))
	v := newTestVerifier(t, s, &o)
	g := newGate()
	g.install(t, v)
	go v.Verify(context.Background(), "busy", "pw")
	<-g.entered
	return v, g
}

// TestKnownMatchRejectsPerCaller: KnownMatchRejects counts callers, as
// Mismatches does, so it is never more than its share of them: three
// callers of one guess answered without scrypt (their node's password
// verified while the guess was queued) are three of each.
func TestKnownMatchRejectsPerCaller(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "right"))
	v, g := occupied(t, s, nil)
	var wg sync.WaitGroup
	call := func(password string, want error) {
		wg.Go(func() {
			if err := v.Verify(context.Background(), "n", password); !errors.Is(err, want) && err != want {
				t.Errorf("%s: %v, want %v", password, err, want)
			}
		})
	}
	// The password asked twice, then a guess asked three times: the
	// password runs first, and answers the guess.
	call("right", nil)
	waitFor(t, "the password to queue", func() bool { return v.Stats().Queued == 1 })
	call("right", nil)
	waitFor(t, "its second caller", func() bool { return v.Stats().Shared == 1 })
	for range 3 {
		call("guess", ErrMismatchedHashAndPassword)
	}
	waitFor(t, "the guess's callers", func() bool { return v.Stats().Shared == 3 })
	g.open()
	wg.Wait()
	if st := v.Stats(); st.Mismatches != 3 || st.KnownMatchRejects != 3 || st.ScryptRuns != 2 {
		t.Fatalf("stats %+v: want 3 mismatches, all 3 known-match rejects, 2 scrypt runs", st)
	}
}

// TestStatsTable: every field of Stats has its metric's name (unique, a
// counter's ending in _total) and help in its tags, and Stats reports
// every counter the Verifier counted, so that a counter is added in one
// place: its field.
func TestStatsTable(t *testing.T) {
	v := newTestVerifier(t, NewMemoryStore(), nil)
	gauges := map[string]bool{"FailOpenPending": true, "InFlight": true, "Queued": true}
	names := map[string]bool{}
	counters := reflect.ValueOf(v.stats).Elem()
	ty := counters.Type()
	for i := range ty.NumField() {
		f := ty.Field(i)
		name, help := f.Tag.Get("stat"), f.Tag.Get("help")
		if name == "" || help == "" || names[name] {
			t.Errorf("%s: stat %q, help %q: want both, the name unique", f.Name, name, help)
		}
		names[name] = true
		if strings.HasSuffix(name, "_total") == gauges[f.Name] {
			t.Errorf("%s: stat %q: a counter's name ends in _total, a gauge's does not", f.Name, name)
		}
		if !gauges[f.Name] {
			atomic.AddUint64(counters.Field(i).Addr().Interface().(*uint64), uint64(i+1))
		}
	}
	got := reflect.ValueOf(v.Stats())
	for i := range ty.NumField() {
		if f := ty.Field(i); !gauges[f.Name] && got.Field(i).Uint() != uint64(i+1) {
			t.Errorf("Stats().%s = %d, want %d", f.Name, got.Field(i).Uint(), i+1)
		}
	}
}
