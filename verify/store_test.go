package verify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStoreErrorsWrappedAndNotCached(t *testing.T) {
	s := newCountingStore()
	s.Set("n", mustHash(t, "pw"))
	boom := errors.New("apiserver unavailable")
	s.getErr = func(n int64) error {
		if n <= 2 {
			return boom
		}
		return nil
	}
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	for _, call := range []func(context.Context, string, string) error{v.Verify, v.Ensure} {
		err := call(ctx, "n", "pw")
		if !errors.Is(err, boom) || errors.Is(err, ErrMismatchedHashAndPassword) || errors.Is(err, ErrNotFound) {
			t.Fatalf("err %v: want the store error, not a mismatch", err)
		}
		if !strings.HasPrefix(err.Error(), `verify: store Get("n")`) {
			t.Fatalf("err %q does not say what failed", err)
		}
	}
	if err := v.Verify(ctx, "n", "pw"); err != nil {
		t.Fatalf("after the store recovered: %v", err)
	}
	if st := v.Stats(); st.StoreErrors != 2 || st.ScryptRuns != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestStoreFaultsNeverCached: a store failing at random never causes an
// accept of a wrong password, never a mismatch for the right one, and
// every error it causes is retried afresh.
func TestStoreFaultsNeverCached(t *testing.T) {
	s := newCountingStore()
	boom := errors.New("injected store fault")
	// 30 % of store calls fail, at random: a fixed pattern could line up
	// with one node's calls and starve it.
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	fault := func() error {
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() < 0.3 {
			return boom
		}
		return nil
	}
	s.getErr = func(int64) error { return fault() }
	s.createHook = func(context.Context) error { return fault() }
	v := newTestVerifier(t, s, nil)
	var wg sync.WaitGroup
	for node := range 20 {
		wg.Go(func() {
			name := fmt.Sprint("node-", node)
			joined := false
			for attempt := 0; attempt < 50 && !joined; attempt++ {
				if err := v.Ensure(context.Background(), name, "right"); err == nil {
					joined = true
				} else if !errors.Is(err, boom) {
					t.Errorf("%s: %v", name, err)
				}
				if err := v.Verify(context.Background(), name, "wrong"); err == nil {
					t.Errorf("%s: wrong password accepted", name)
				} else if !errors.Is(err, boom) && !errors.Is(err, ErrMismatchedHashAndPassword) && !errors.Is(err, ErrNotFound) {
					t.Errorf("%s: %v", name, err)
				}
			}
			if !joined {
				t.Errorf("%s never joined", name)
			}
		})
	}
	wg.Wait()
	if st := v.Stats(); st.Enrollments != 20 || st.StoreErrors == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestHangingStoreTimesOut: shared work (here an enrollment's Create) is
// bounded by WorkTimeout even though no caller waits for it.
func TestHangingStoreTimesOut(t *testing.T) {
	s := newCountingStore()
	s.createHook = func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	v := newTestVerifier(t, s, &Options{WorkTimeout: 50 * time.Millisecond})
	err := v.Ensure(context.Background(), "n", "pw")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "store Create") {
		t.Fatalf("err %v", err)
	}
	if st := v.Stats(); st.StoreErrors != 1 || st.Enrollments != 0 {
		t.Fatalf("stats %+v", st)
	}
}
