package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func testDigestKey(b byte) []byte { return bytes.Repeat([]byte{b}, MinDigestKeyLen) }

// enrollAll enrolls n nodes through v and closes it, which flushes the
// digests it recorded.
func enrollAll(t *testing.T, v *Verifier, n int) {
	t.Helper()
	for i := range n {
		if err := v.Ensure(context.Background(), fmt.Sprint("node-", i), fmt.Sprint("pw-", i)); err != nil {
			t.Fatal(err)
		}
	}
	v.Close()
	if st := v.Stats(); st.DigestWrites != uint64(n) || st.DigestWriteFailures != 0 {
		t.Fatalf("stats %+v: want %d digests written", st, n)
	}
}

// TestRestartLosesNothing: a new Verifier over the same store and key
// verifies every node with no scrypt at all.
func TestRestartLosesNothing(t *testing.T) {
	s := NewMemoryStore()
	enrollAll(t, newTestVerifier(t, s, &Options{DigestKey: testDigestKey(1)}), 20)
	v := newTestVerifier(t, s, &Options{DigestKey: testDigestKey(1)})
	for i := range 20 {
		if err := v.Verify(context.Background(), fmt.Sprint("node-", i), fmt.Sprint("pw-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := v.Stats(); st.ScryptRuns != 0 || st.DigestHits != 20 {
		t.Fatalf("stats %+v: want 0 scrypt runs and 20 digest hits", st)
	}
	// Answered from the cache from then on.
	if err := v.Verify(context.Background(), "node-0", "pw-0"); err != nil || v.Stats().CacheHits != 1 {
		t.Fatalf("second request: %v, %+v", err, v.Stats())
	}
}

// digestOverride serves a chosen digest for every node, whatever was
// remembered, and counts the writes.
type digestOverride struct {
	*MemoryStore
	digest func(node, hash string) []byte
	writes atomic.Int64
	fail   error
}

func (s *digestOverride) GetWithDigest(ctx context.Context, node string) (string, []byte, error) {
	h, err := s.Get(ctx, node)
	if err != nil {
		return "", nil, err
	}
	return h, s.digest(node, h), nil
}

func (s *digestOverride) RememberDigest(ctx context.Context, node, hash string, d []byte) error {
	s.writes.Add(1)
	if s.fail != nil {
		return s.fail
	}
	return s.MemoryStore.RememberDigest(ctx, node, hash, d)
}

// TestBadDigestsCostOneScrypt: a digest under another key, one bound to an
// older stored hash, and garbage each cost one scrypt; the right password
// is still accepted and a wrong one still refused; the scrypt match
// replaces the digest.
func TestBadDigestsCostOneScrypt(t *testing.T) {
	key := testDigestKey(1)
	for _, tt := range []struct {
		name   string
		digest func(node, hash string) []byte
	}{
		{"wrong key", func(node, hash string) []byte { return digest(testDigestKey(2), node, hash, "right") }},
		{"old stored hash", func(node, _ string) []byte { return digest(key, node, "$1:old", "right") }},
		{"garbage", func(string, string) []byte { return []byte("not a digest at all") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &digestOverride{MemoryStore: NewMemoryStore(), digest: tt.digest}
			s.Set("n", mustHash(t, "right"))
			v := newTestVerifier(t, s, &Options{DigestKey: key})
			ctx := context.Background()
			if err := v.Verify(ctx, "n", "wrong"); !errors.Is(err, ErrMismatchedHashAndPassword) {
				t.Fatalf("wrong password: %v", err)
			}
			if err := v.Verify(ctx, "n", "right"); err != nil {
				t.Fatalf("right password: %v", err)
			}
			v.Close()
			if st := v.Stats(); st.ScryptRuns != 2 || st.DigestHits != 0 || st.DigestWrites != 1 {
				t.Fatalf("stats %+v: want one scrypt each, no digest hit, one digest written", st)
			}
			if _, d, _ := s.MemoryStore.GetWithDigest(ctx, "n"); !bytes.Equal(d, digest(key, "n", mustGet(t, s, "n"), "right")) {
				t.Fatal("the scrypt match did not replace the digest")
			}
		})
	}
}

func mustGet(t *testing.T, s Store, node string) string {
	t.Helper()
	h, err := s.Get(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestDigestOfRotatedHashIgnored: a node whose stored hash was replaced
// (a new password) is not matched by the digest of its old one.
func TestDigestOfRotatedHashIgnored(t *testing.T) {
	s := NewMemoryStore()
	enrollAll(t, newTestVerifier(t, s, &Options{DigestKey: testDigestKey(1)}), 1)
	s.Set("node-0", mustHash(t, "new"))
	v := newTestVerifier(t, s, &Options{DigestKey: testDigestKey(1)})
	if err := v.Verify(context.Background(), "node-0", "pw-0"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatalf("old password after rotation: %v", err)
	}
	if st := v.Stats(); st.DigestHits != 0 || st.ScryptRuns != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestFailedDigestWritesHarmless: writes that fail are counted and cost
// nothing else.
func TestFailedDigestWritesHarmless(t *testing.T) {
	s := &digestOverride{MemoryStore: NewMemoryStore(), fail: errors.New("apiserver: 429"),
		digest: func(string, string) []byte { return nil }}
	v := newTestVerifier(t, s, &Options{DigestKey: testDigestKey(1)})
	for i := range 3 {
		if err := v.Ensure(context.Background(), "n", "right"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	v.Close()
	if st := v.Stats(); st.DigestWriteFailures != 1 || st.DigestWrites != 0 || st.ScryptRuns != 1 {
		t.Fatalf("stats %+v: want one failed write, one scrypt", st)
	}
}

// TestTokenDigestNotRecorded: with a DigestKey, a join token's scrypt
// match records no digest, as the Store holds nodes' hashes only (k3s
// keeps the tokens in its passwd file, pkg/authenticator/passwordfile):
// kube's Store has no secret for the token's name, and each such write
// failed, once per token per process. A node's match still records one.
func TestTokenDigestNotRecorded(t *testing.T) {
	s := &digestOverride{MemoryStore: NewMemoryStore(), digest: func(string, string) []byte { return nil }}
	v, _ := newTokenVerifier(t, s, &Options{DigestKey: testDigestKey(1)})
	for range 2 {
		if err := v.VerifyToken(context.Background(), "node", joinToken); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Ensure(context.Background(), "n", "right"); err != nil {
		t.Fatal(err)
	}
	v.Close()
	st := v.Stats()
	if n := s.writes.Load(); n != 1 || st.DigestWrites != 1 || st.DigestWriteFailures != 0 || st.ScryptRuns != 2 {
		t.Fatalf("%d digest writes, stats %+v: want the node's write only, and 2 scrypt runs", n, st)
	}
}

// TestNoDigestKeyWritesNothing: without a DigestKey nothing is recorded.
func TestNoDigestKeyWritesNothing(t *testing.T) {
	s := &digestOverride{MemoryStore: NewMemoryStore(), digest: func(string, string) []byte { return nil }}
	v := newTestVerifier(t, s, nil)
	if err := v.Ensure(context.Background(), "n", "right"); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(context.Background(), "n", "right"); err != nil {
		t.Fatal(err)
	}
	v.Close()
	if n := s.writes.Load(); n != 0 {
		t.Fatalf("%d digests written without a DigestKey", n)
	}
}

func TestShortDigestKeyRefused(t *testing.T) {
	if _, err := New(NewMemoryStore(), &Options{DigestKey: make([]byte, MinDigestKeyLen-1)}); err == nil {
		t.Fatal("a 31-byte DigestKey was accepted")
	}
}

// hangingDigests is a DigestStore whose RememberDigest blocks until its
// context ends.
type hangingDigests struct {
	*MemoryStore
	entered chan struct{}
}

func (s *hangingDigests) RememberDigest(ctx context.Context, node, hash string, digest []byte) error {
	close(s.entered)
	<-ctx.Done()
	return ctx.Err()
}

// TestCloseBoundedWithDigestWriteInFlight: Close returns within 5 s
// (digestFlushTimeout) even with a digest write in flight.
func TestCloseBoundedWithDigestWriteInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingDigests{MemoryStore: NewMemoryStore(), entered: make(chan struct{})}
		s.Set("n", mustHash(t, "pw"))
		key := make([]byte, MinDigestKeyLen)
		v, err := New(s, &Options{Params: testParams, DigestKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(context.Background(), "n", "pw"); err != nil {
			t.Fatal(err)
		}
		<-s.entered
		start := time.Now()
		v.Close()
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("Close took %v with a digest write in flight, want at most 5 s", took)
		}
		if st := v.Stats(); st.DigestWriteFailures != 1 {
			t.Fatalf("stats %+v: the cut write is not counted as failed", st)
		}
	})
}

// TestConcurrentCloseWithDigests: the digest recorder closed from two
// goroutines at once (two concurrent Verifier.Close calls) returns in
// both once its digests are flushed, and panics in neither: it closed
// its queue twice.
func TestConcurrentCloseWithDigests(t *testing.T) {
	for range 20000 {
		r := newRecorder(NewMemoryStore(), new(Stats))
		var ready atomic.Int32
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				ready.Add(1)
				for ready.Load() < 2 { // both start at once
					runtime.Gosched()
				}
				r.close()
			})
		}
		wg.Wait()
	}
}
