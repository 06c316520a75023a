package sched

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkBacklog answers: what does a request cost the scheduler's lock
// when guesses have piled up? earned is how many guesses for one name are
// queued, earned past its places, and names how many other names have a
// job queued; each op is a new guess for the attacked name and another
// node's request, each joined, estimated as Wait would and ended. The
// cost should not grow with the backlog (issue 23 C measured 9 µs with 2k
// earned, 141 µs with 16k, 376 µs with 32k before the queue's treaps).
func BenchmarkBacklog(b *testing.B) {
	for _, earned := range []int{1000, 16000, 64000} {
		b.Run(fmt.Sprintf("earned=%d", earned), func(b *testing.B) {
			block := make(chan struct{})
			defer close(block)
			var s *Scheduler
			s = New(Config{Slots: 1, Lanes: 1, MaxQueue: 1 << 20, PerName: 4, MaxWait: time.Hour,
				Run: func(jobs []*Job) (int, time.Duration, time.Duration) {
					<-block
					for _, j := range jobs {
						s.Finish(j, nil)
					}
					return 0, 0, 0
				}})
			ctx := context.Background()
			s.Join(ctx, Request{Key: keyOf("running"), Name: "running", Work: 1 << 20})
			for i := range earned {
				j, _, _ := s.Join(ctx, Request{Key: keyOf(fmt.Sprint("g", i)), Name: "attacked", Work: 1 << 20, Doubted: true})
				s.mu.Lock()
				s.earnLocked(j)
				s.watchLocked(j, 1)
				s.watchLocked(j, -1)
				s.unlock()
			}
			for i := range earned / 4 {
				s.Join(ctx, Request{Key: keyOf(fmt.Sprint("o", i)), Name: fmt.Sprint("node-", i), Work: 1 << 20})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				for _, r := range []Request{
					{Key: keyOf(fmt.Sprint("new-guess-", i)), Name: "attacked", Work: 1 << 20, Doubted: true},
					{Key: keyOf(fmt.Sprint("node-", i)), Name: fmt.Sprint("new-node-", i), Work: 1 << 20},
				} {
					j, _, err := s.Join(ctx, r)
					if err != nil {
						b.Fatal(err)
					}
					s.mu.Lock()
					s.watchLocked(j, 1)
					s.decideLocked(j, time.Now(), time.Hour)
					s.watchLocked(j, -1)
					s.unlock()
					s.Finish(j, nil)
				}
			}
		})
	}
}
