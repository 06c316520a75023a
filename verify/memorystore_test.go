package verify

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestMemoryStore: MemoryStore's contract as a DigestStore. Create takes
// a node once, however many ask at once; a digest is remembered only for
// the node's hash as it is, kept when Set stores that same hash again
// and dropped with any other; Delete drops both.
func TestMemoryStore(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a node never stored: %v", err)
	}
	var created atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			switch err := s.Create(ctx, "a", "h1"); {
			case err == nil:
				created.Add(1)
			case !errors.Is(err, ErrExists):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Fatalf("%d concurrent Creates of one node succeeded", created.Load())
	}
	digest := func() []byte {
		t.Helper()
		_, d, err := s.GetWithDigest(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	_ = s.RememberDigest(ctx, "a", "other", []byte("d0"))
	if d := digest(); d != nil {
		t.Fatalf("digest %q remembered for a hash not the node's", d)
	}
	in := []byte("d1")
	_ = s.RememberDigest(ctx, "a", "h1", in)
	in[0] = 'X' // the store keeps its own copy
	if d := digest(); string(d) != "d1" {
		t.Fatalf("digest %q, want d1", d)
	}
	s.Set("a", "h1")
	if d := digest(); string(d) != "d1" {
		t.Fatalf("digest %q after Set of the same hash, want d1", d)
	}
	s.Set("a", "h2")
	if h, d, _ := s.GetWithDigest(ctx, "a"); h != "h2" || d != nil {
		t.Fatalf("after Set of another hash: %q, digest %q", h, d)
	}
	s.Set("a", "h1")
	if d := digest(); d != nil {
		t.Fatalf("the digest of h1 came back with h1: %q", d)
	}
	s.Delete("a")
	if _, _, err := s.GetWithDigest(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetWithDigest after Delete: %v", err)
	}
	s.Set("b", "h")
	if h, err := s.Get(ctx, "b"); err != nil || h != "h" {
		t.Fatalf("Get after Set of a new node: %q, %v", h, err)
	}
}

// TestMemoryStoreSetConcurrent: Sets of different hashes racing with
// RememberDigest never leave a digest beside a hash it was not
// remembered for, and a new node's Set racing with Create leaves one
// hash or the other.
func TestMemoryStoreSetConcurrent(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				h := []string{"h1", "h2", "h3"}[(g+i)%3]
				s.Set("a", h)
				_ = s.RememberDigest(ctx, "a", h, []byte("d:"+h))
				_ = s.Create(ctx, "b", "created")
				s.Set("b", "set")
			}
		})
	}
	wg.Wait()
	if h, d, err := s.GetWithDigest(ctx, "a"); err != nil || d != nil && string(d) != "d:"+h {
		t.Fatalf("after racing Sets: hash %q with digest %q (%v)", h, d, err)
	}
	if h, err := s.Get(ctx, "b"); err != nil || h != "set" {
		t.Fatalf("Set after Create: %q, %v; want the Set's hash", h, err)
	}
}
