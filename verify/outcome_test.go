package verify

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nodepass/nodepass/cache"
)

// TestKnownMatch: once a node's password is verified, guesses cost no
// scrypt; a rotated hash or another node is not covered by it; the
// record lasts as long as the verified tuple's own entry.
func TestKnownMatch(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "right"))
	s.Set("other", mustHash(t, "right"))
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	if err := v.Verify(ctx, "n", "right"); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := v.Verify(ctx, "n", fmt.Sprint("guess-", i)); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatal(err)
		}
	}
	if st := v.Stats(); st.ScryptRuns != 1 || st.KnownMatchRejects != 100 {
		t.Fatalf("stats %+v: want 1 scrypt run and 100 known-match rejects", st)
	}
	// Another node with its own hash: computed.
	if err := v.Verify(ctx, "other", "guess-0"); !errors.Is(err, ErrMismatchedHashAndPassword) || v.Stats().ScryptRuns != 2 {
		t.Fatalf("other node: %v, %+v", err, v.Stats())
	}
	// The verified tuple's own entry evicted: the pair's record goes with
	// it, and both come back with the password's next scrypt.
	stored, _ := s.Get(ctx, "n")
	evict(v.cache, v.cache.Key("n", stored, "right"))
	if err := v.Verify(ctx, "n", "guess-0"); !errors.Is(err, ErrMismatchedHashAndPassword) || v.Stats().ScryptRuns != 3 {
		t.Fatalf("a guess after eviction: %v, %+v: want it computed", err, v.Stats())
	}
	if err := v.Verify(ctx, "n", "right"); err != nil || v.Stats().ScryptRuns != 4 {
		t.Fatalf("verified password after eviction: %v, %+v: want it computed", err, v.Stats())
	}
	if err := v.Verify(ctx, "n", "guess-1"); !errors.Is(err, ErrMismatchedHashAndPassword) || v.Stats().ScryptRuns != 4 {
		t.Fatalf("a guess after the password again: %v, %+v: want it known", err, v.Stats())
	}
	// Rotation: the new hash has no verified password yet.
	s.Set("n", mustHash(t, "new"))
	if err := v.Verify(ctx, "n", "right"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	if err := v.Verify(ctx, "n", "new"); err != nil {
		t.Fatalf("new password after rotation: %v", err)
	}
	if st := v.Stats(); st.ScryptRuns != 6 {
		t.Fatalf("stats %+v: want the rotated hash computed twice", st)
	}
}

// TestQueuedGuessAnsweredByKnownMatch: a guess queued before the node's own
// password was verified costs no scrypt when its turn comes after.
func TestQueuedGuessAnsweredByKnownMatch(t *testing.T) {
	s := NewMemoryStore()
	s.Set("busy", mustHash(t, "pw"))
	s.Set("n", mustHash(t, "right"))
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1})
	g := newGate()
	g.install(t, v)
	ctx := context.Background()
	go v.Verify(ctx, "busy", "pw")
	<-g.entered
	guess := make(chan error, 1)
	go func() { guess <- v.Verify(ctx, "n", "guess") }()
	waitFor(t, "the guess to queue", func() bool { return v.Stats().Queued == 1 })
	right := make(chan error, 2)
	go func() { right <- v.Verify(ctx, "n", "right") }()
	waitFor(t, "the password to queue", func() bool { return v.Stats().Queued == 2 })
	go func() { right <- v.Verify(ctx, "n", "right") }() // the agent asks again
	waitFor(t, "the retry to join", func() bool { return v.Stats().Shared == 1 })
	g.open()
	for range 2 {
		if err := <-right; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-guess; !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	if st := v.Stats(); st.ScryptRuns != 2 || st.KnownMatchRejects != 1 {
		t.Fatalf("stats %+v: want 2 scrypt runs (busy, right) and the guess answered by the known match", st)
	}
}

// evict pushes k's own entry out of c, a cache with the default sizes,
// with matches of other tuples (no pair's): twice as many as it holds,
// since the cache is split by key into shards and k's shard must take
// more than its share of them (a Get would keep k, so k is read once).
func evict(c *cache.Cache, k cache.Key) {
	for i := range 2 * cache.DefaultMatchSize {
		c.Put(c.Key("filler", "", fmt.Sprint(i)), cache.Match)
	}
	if _, ok := c.Get(k); ok {
		panic("evict: still cached")
	}
}
