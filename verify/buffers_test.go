package verify

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// failingFresh is a store whose GetFresh blocks until released, then
// fails.
type failingFresh struct {
	*MemoryStore
	release chan struct{}
}

var errFreshRead = errors.New("fresh read failed")

func (s *failingFresh) GetFresh(ctx context.Context, node string) (string, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return "", errFreshRead
}

// TestIdleBuffersReleasedAfterWorkWithoutBatch: the quiet timer that
// fires while work is under way (an enrollment reading the store) comes
// back: when that work ends without a batch (its read failed), the
// Verifier's idle scrypt buffers are released bufferIdle later, not kept
// until the next computation.
func TestIdleBuffersReleasedAfterWorkWithoutBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &failingFresh{MemoryStore: NewMemoryStore(), release: make(chan struct{})}
		s.Set("known", mustHash(t, "pw"))
		v, err := New(s, &Options{Params: testParams, MaxFailDelay: -1, MaxWait: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		ctx := context.Background()
		if err := v.Verify(ctx, "known", "pw"); err != nil {
			t.Fatal(err)
		}
		if n := idleBuffers(v); n == 0 {
			t.Fatal("no idle buffers after a computation")
		}
		done := make(chan error, 1)
		go func() { done <- v.Ensure(ctx, "new", "pw") }()
		synctest.Wait()                      // the enrollment reads the store
		time.Sleep(bufferIdle + time.Second) // the quiet timer fires meanwhile
		close(s.release)
		if err := <-done; !errors.Is(err, errFreshRead) {
			t.Fatalf("enrollment: %v, want the read's error", err)
		}
		time.Sleep(10 * time.Minute)
		if n := idleBuffers(v); n != 0 {
			t.Fatalf("%d idle buffers kept 10 min after the last work", n)
		}
	})
}

// idleBuffers is how many idle scrypt buffers v keeps.
func idleBuffers(v *Verifier) int {
	n, _ := v.pool.Idle()
	return n
}
