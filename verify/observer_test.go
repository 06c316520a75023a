package verify

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// panickyObserver panics when told of the computation for one node,
// in ObserveQueueWait or in ObserveScrypt.
type panickyObserver struct {
	inScrypt bool
	node     string
}

type nodeKey struct{}

func (o panickyObserver) ObserveQueueWait(ctx context.Context, d time.Duration) {
	if !o.inScrypt && ctx.Value(nodeKey{}) == o.node {
		panic("observer broke")
	}
}

func (o panickyObserver) ObserveScrypt(ctx context.Context, d time.Duration) {
	if o.inScrypt && ctx.Value(nodeKey{}) == o.node {
		panic("observer broke")
	}
}

// TestObserverPanicKeepsErrorContract: a panic in the Observer is
// recovered and counted in Stats.Panics; every job of the batch, the
// observed one's included, gets its own answer, and any error starts
// with "verify: ".
func TestObserverPanicKeepsErrorContract(t *testing.T) {
	for _, inScrypt := range []bool{false, true} {
		t.Run(fmt.Sprint("scrypt=", inScrypt), func(t *testing.T) {
			s := NewMemoryStore()
			const n = 4
			for i := range n {
				s.Set(fmt.Sprint("n", i), mustHash(t, "pw"))
			}
			v, g := occupied(t, s, &Options{Observer: panickyObserver{inScrypt, "n0"}})
			errs := make(chan error, n)
			for i := range n {
				node := fmt.Sprint("n", i)
				go func() { errs <- v.Verify(context.WithValue(context.Background(), nodeKey{}, node), node, "pw") }()
			}
			waitFor(t, "the jobs to queue", func() bool { return v.Stats().Queued == n })
			g.open()
			failed := 0
			for range n {
				if err := <-errs; err != nil {
					failed++
					if !strings.HasPrefix(err.Error(), "verify: ") {
						t.Errorf("error %q does not start with \"verify: \"", err)
					}
				}
			}
			if failed > 0 {
				t.Errorf("%d of %d verifications failed for the Observer's panic, want none", failed, n)
			}
			if p := v.Stats().Panics; p == 0 {
				t.Error("the Observer's panic is not counted in Stats.Panics")
			}
		})
	}
}
