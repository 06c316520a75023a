package scrypt

import (
	"testing"
	"time"
)

// BenchmarkKeyAfterHerd answers: what does a lone key cost when it comes
// while the pool clears a herd's buffers (100 ms after they went idle)?
// Each op computes a herd of Lanes() keys at k3s's parameters on one Pool
// (untimed), waits until its scrub is under way, then times a lone key on
// that Pool and one on a Pool of its own, in turn first. ms/key is the
// first's time, key-ms the second's, x-key the first over the second (1:
// the scrub costs the lone key nothing).
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
		for !scrubbing(&p) {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		if i%2 == 0 {
			afterHerd += lone(&p)
			alone += lone(&own)
		} else {
			alone += lone(&own)
			afterHerd += lone(&p)
		}
		b.StopTimer()
		p.Release() // the next herd finds no scrub under way
		b.StartTimer()
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(b.N) }
	b.ReportMetric(ms(afterHerd), "ms/key")
	b.ReportMetric(ms(alone), "key-ms")
	b.ReportMetric(float64(afterHerd)/float64(alone), "x-key")
}

// scrubbing reports whether p's scrub is clearing a buffer.
func scrubbing(p *Pool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.scrubDone != nil
}
