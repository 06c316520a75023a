package verify

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// TestCloseDuringCreate: an enrollment whose Store.Create Close cuts short
// answers ErrClosed, not the store's context error; with FailOpen it is
// not let in either (issue 23 D).
func TestCloseDuringCreate(t *testing.T) {
	for _, c := range []struct {
		name string
		opts *Options
	}{{"plain", nil}, {"failopen", &Options{FailOpen: &FailOpen{}}}} {
		t.Run(c.name, func(t *testing.T) {
			s := newCountingStore()
			entered := make(chan struct{})
			s.createHook = func(ctx context.Context) error {
				close(entered)
				<-ctx.Done()
				return ctx.Err()
			}
			v := newTestVerifier(t, s, c.opts)
			got := make(chan error, 1)
			go func() { got <- v.Ensure(context.Background(), "n", "pw") }()
			<-entered
			v.Close()
			if err := <-got; err != ErrClosed {
				t.Fatalf("enrollment cut short by Close: %v, want ErrClosed", err)
			}
			if st := v.Stats(); st.FailOpenEnrollments != 0 || st.Enrollments != 0 {
				t.Fatalf("stats %+v: let in", st)
			}
		})
	}
}

// TestNamesAreCaseInsensitive: names that differ only in case are one
// node for every defence: the store, the cache, known-match rejects and
// the failure count.
func TestNamesAreCaseInsensitive(t *testing.T) {
	s := NewMemoryStore()
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	if err := v.Ensure(ctx, "Node-1", "right"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "node-1"); err != nil {
		t.Fatalf("stored under %v, want the lower-case name", err)
	}
	if err := v.Verify(ctx, "NODE-1", "right"); err != nil {
		t.Fatalf("upper case: %v", err)
	}
	for i, n := range []string{"Node-1", "NODE-1", "node-1", "nOdE-1"} {
		if err := v.Ensure(ctx, n, fmt.Sprint("guess-", i)); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("%s: %v", n, err)
		}
	}
	if st := v.Stats(); st.ScryptRuns != 1 || st.KnownMatchRejects != 4 {
		t.Fatalf("stats %+v: want 1 scrypt (the enrollment) and every case variant's guess a known-match reject", st)
	}
	if !v.fails.failing("node-1") || v.fails.delay("node-1") == 0 && v.opts.MaxFailDelay > 0 {
		t.Fatal("the mismatches of the case variants were not counted against one name")
	}
}

// slowReadStore blocks every Get of one node after its first (the
// enrollment's re-read) until released.
type slowReadStore struct {
	*MemoryStore
	node    string
	reads   atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func (s *slowReadStore) Get(ctx context.Context, node string) (string, error) {
	if node == s.node && s.reads.Add(1) == 2 {
		close(s.entered)
		select {
		case <-s.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return s.MemoryStore.Get(ctx, node)
}

// TestEnrollmentReadHoldsNoSlot: while an enrollment reads the store, its
// job holds no scrypt slot, so another node's verification runs on the
// only slot meanwhile.
func TestEnrollmentReadHoldsNoSlot(t *testing.T) {
	s := &slowReadStore{MemoryStore: NewMemoryStore(), node: "new", entered: make(chan struct{}), release: make(chan struct{})}
	s.Set("known", mustHash(t, "pw"))
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1})
	ctx := context.Background()
	enrolled := make(chan error, 1)
	go func() { enrolled <- v.Ensure(ctx, "new", "pw") }()
	<-s.entered
	if st := v.Stats(); st.InFlight != 0 {
		t.Fatalf("stats %+v: the enrollment holds a slot while it reads the store", st)
	}
	if err := v.Verify(ctx, "known", "pw"); err != nil {
		t.Fatalf("another node's verification during the enrollment's read: %v", err)
	}
	close(s.release)
	if err := <-enrolled; err != nil {
		t.Fatal(err)
	}
}
