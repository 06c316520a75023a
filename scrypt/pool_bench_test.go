package scrypt

import (
	"testing"
	"time"
)

// BenchmarkKeyAfterHerd answers: what does a lone key cost when it comes
// just after a herd, while the pool clears the herd's buffers (the scrub
// starts scrubAfter after they went idle)? Each op computes a herd of
// Lanes() keys at k3s's parameters on one Pool (untimed), waits until
// its scrub is under way, then times a lone key on that Pool and one on
// a Pool of its own that has a buffer idle and clean, in turn first.
// ms/key is the first's time, key-ms the second's, x-key the first over
// the second (1: the scrub costs the lone key nothing).
func BenchmarkKeyAfterHerd(b *testing.B) {
	herd := benchJobs(Lanes(), 15, 8, 1)
	var p, own Pool
	defer p.Release()
	defer own.Release()
	lone := func(pool *Pool) time.Duration {
		start := time.Now()
		pool.KeyBatch(benchJobs(1, 15, 8, 1), 1)
		return time.Since(start)
	}
	lone(&own)
	var afterHerd, alone time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		p.KeyBatch(herd, Lanes())
		time.Sleep(scrubAfter + time.Millisecond)
		b.StartTimer()
		if i%2 == 0 {
			afterHerd += lone(&p)
			alone += lone(&own)
		} else {
			alone += lone(&own)
			afterHerd += lone(&p)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(b.N) }
	b.ReportMetric(ms(afterHerd), "ms/key")
	b.ReportMetric(ms(alone), "key-ms")
	b.ReportMetric(float64(afterHerd)/float64(alone), "x-key")
}
