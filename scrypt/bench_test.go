package scrypt

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	xscrypt "golang.org/x/crypto/scrypt"
)

// benchParams are the parameter sets the benchmarks measure: k3s/RKE2's
// (N=2^15, r=8, p=1) and half its cost.
var benchParams = []struct{ logN, r, p int }{{15, 8, 1}, {14, 8, 1}}

type benchImpl struct {
	name  string
	batch func(jobs []Job) // computes every job's key
}

// benchImpls are x/crypto (one Key after the other) and this package
// (KeyBatch).
var benchImpls = []benchImpl{
	{"xcrypto", func(jobs []Job) {
		for i := range jobs {
			j := &jobs[i]
			j.Key, j.Err = xscrypt.Key(j.Password, j.Salt, j.N, j.R, j.P, j.KeyLen)
		}
	}},
	{"nodepass", KeyBatch},
}

func benchJobs(n, logN, r, p int) []Job {
	jobs := make([]Job, n)
	for i := range jobs {
		jobs[i] = Job{
			Password: []byte(fmt.Sprintf("node-password-%d", i)),
			Salt:     []byte(fmt.Sprintf("salt-%d", i)),
			N:        1 << logN, R: r, P: p, KeyLen: 64,
		}
	}
	return jobs
}

// cpuMeter reports the process's CPU time per key since it was made, as
// cpu-ns/key, where the platform tells it.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func newCPUMeter() cpuMeter {
	t, ok := cpuTime()
	return cpuMeter{t, ok}
}

func (m cpuMeter) report(b *testing.B, keys int) {
	if t, ok := cpuTime(); m.ok && ok && keys > 0 {
		b.ReportMetric(float64((t-m.start).Nanoseconds())/float64(keys), "cpu-ns/key")
	}
}

// warmParallel runs f on GOMAXPROCS goroutines at once, to fill the
// buffer pool as a parallel benchmark will use it.
func warmParallel(f func()) {
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(f)
	}
	wg.Wait()
}

// logChoice logs the kernel chosen for n hashes at (2^logN, r) and what
// it was chosen on (see Choices).
func logChoice(b *testing.B, logN, r, n int) {
	for _, c := range Choices() {
		if c.N == 1<<logN && c.R == r && c.Hashes == n {
			b.Logf("kernel for %d hash(es) at logN=%d r=%d: %q, measured per hash: %v", n, logN, r, c.Kernel, c.PerHash)
		}
	}
}

func benchName(logN, r, p int, impl string) string {
	return fmt.Sprintf("logN=%d/r=%d/p=%d/impl=%s", logN, r, p, impl)
}

// BenchmarkKey answers: how long does one key take, one call at a time in
// one goroutine, with x/crypto's Key and with this package's Key? (ns/op
// is per key; B/op shows the buffer reuse.)
func BenchmarkKey(b *testing.B) {
	pw, salt := []byte("node-password"), []byte("salt")
	for _, c := range benchParams {
		for _, im := range []struct {
			name string
			key  func(pw, salt []byte, N, r, p, keyLen int) ([]byte, error)
		}{{"xcrypto", xscrypt.Key}, {"nodepass", Key}} {
			b.Run(benchName(c.logN, c.r, c.p, im.name), func(b *testing.B) {
				im.key(pw, salt, 1<<c.logN, c.r, c.p, 64) // fill the pool
				b.ReportAllocs()
				for b.Loop() {
					if _, err := im.key(pw, salt, 1<<c.logN, c.r, c.p, 64); err != nil {
						b.Fatal(err)
					}
				}
				logChoice(b, c.logN, c.r, min(c.p, Lanes()))
			})
		}
	}
}

// BenchmarkBatch answers: how long do Lanes() independent keys take in one
// goroutine, as one KeyBatch against as many x/crypto Key calls? (ns/op is
// per batch; ns/key is the figure to compare with BenchmarkKey; cpu-ns/key
// the process's CPU time per key.)
func BenchmarkBatch(b *testing.B) {
	for _, c := range benchParams {
		for _, im := range benchImpls {
			b.Run(benchName(c.logN, c.r, c.p, im.name), func(b *testing.B) {
				jobs := benchJobs(Lanes(), c.logN, c.r, c.p)
				im.batch(jobs) // fill the pool
				b.ReportAllocs()
				var cpu cpuMeter
				for b.Loop() {
					if cpu == (cpuMeter{}) {
						cpu = newCPUMeter()
					}
					im.batch(jobs)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(jobs)), "ns/key")
				cpu.report(b, b.N*len(jobs))
			})
		}
	}
}

// BenchmarkThroughput answers the herd's question: how many keys per second
// does the machine derive with GOMAXPROCS goroutines busy, each taking
// batches of Lanes() keys (x/crypto: Lanes() Key calls in turn)? hashes/s
// is the figure; ns/op is per batch of Lanes() keys, wall clock; cpu-ns/key
// is the process's CPU time per key, less disturbed by other processes.
func BenchmarkThroughput(b *testing.B) {
	for _, c := range benchParams {
		for _, im := range benchImpls {
			b.Run(benchName(c.logN, c.r, c.p, im.name), func(b *testing.B) {
				var keys atomic.Int64
				warmParallel(func() { im.batch(benchJobs(Lanes(), c.logN, c.r, c.p)) })
				b.ReportAllocs()
				b.ResetTimer()
				start, cpu := time.Now(), newCPUMeter()
				b.RunParallel(func(pb *testing.PB) {
					jobs := benchJobs(Lanes(), c.logN, c.r, c.p)
					for pb.Next() {
						im.batch(jobs)
						keys.Add(int64(len(jobs)))
					}
				})
				b.ReportMetric(float64(keys.Load())/time.Since(start).Seconds(), "hashes/s")
				cpu.report(b, int(keys.Load()))
				b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "goroutines")
				logChoice(b, c.logN, c.r, Lanes())
			})
		}
	}
}

// BenchmarkCode answers which BlockMix kernel of this CPU (see the
// package doc) is fastest for each class the chooser decides, where the
// package measures and chooses one itself: every op is a KeyBatch of
// batch keys at (2^15, 8, 1), one class of batch hashes, forced onto each
// kernel whose lanes divide batch in turn. ns/key is the time per key in
// one goroutine, cpu-ns/key the process's CPU time per key, which a
// shared machine disturbs less; for batch=16, goroutines=max runs
// GOMAXPROCS goroutines at once (hashes/s).
func BenchmarkCode(b *testing.B) {
	for batch := 1; batch <= maxLanes; batch *= 2 {
		for _, k := range kernels {
			if batch%k.lanes() != 0 || batch > lanes {
				continue
			}
			name := fmt.Sprintf("logN=15/r=8/p=1/batch=%d/code=%s", batch, k)
			b.Run(name+"/goroutines=1", func(b *testing.B) {
				defer forceClass(k)()
				jobs := benchJobs(batch, 15, 8, 1)
				KeyBatch(jobs) // fill the pool
				b.ReportAllocs()
				var cpu cpuMeter
				for b.Loop() {
					if cpu == (cpuMeter{}) {
						cpu = newCPUMeter()
					}
					KeyBatch(jobs)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(jobs)), "ns/key")
				cpu.report(b, b.N*len(jobs))
			})
			if batch != maxLanes {
				continue
			}
			b.Run(name+"/goroutines=max", func(b *testing.B) {
				defer forceClass(k)()
				warmParallel(func() { KeyBatch(benchJobs(batch, 15, 8, 1)) })
				b.ReportAllocs()
				b.ResetTimer()
				start, cpu := time.Now(), newCPUMeter()
				b.RunParallel(func(pb *testing.PB) {
					jobs := benchJobs(batch, 15, 8, 1)
					for pb.Next() {
						KeyBatch(jobs)
					}
				})
				b.ReportMetric(float64(batch*b.N)/time.Since(start).Seconds(), "hashes/s")
				cpu.report(b, batch*b.N)
			})
		}
	}
}

// forceClass makes every class whose hashes k's lanes divide run k, all
// of the class's hashes in lockstep as the chooser runs them, until
// restore is called.
func forceClass(k kernel) (restore func()) {
	restore = forceKernel(k)
	lanes = maxLanes
	return restore
}

// BenchmarkShapes answers whether a parameter set other than k3s's, or a
// batch of another size, runs as fast as before: every op is a KeyBatch
// of batch keys at (2^logN, r, p) in one goroutine (batch=1: one key
// alone), with the kernel the package chooses. cpu-ns/key is the
// process's CPU time per key.
func BenchmarkShapes(b *testing.B) {
	for _, c := range []struct{ logN, r, p int }{
		{10, 8, 1}, {12, 1, 1}, {12, 16, 1}, {13, 8, 4}, {14, 3, 2}, {16, 8, 1},
	} {
		for batch := 1; batch <= 16; batch *= 2 {
			b.Run(fmt.Sprintf("logN=%d/r=%d/p=%d/batch=%d", c.logN, c.r, c.p, batch), func(b *testing.B) {
				jobs := benchJobs(batch, c.logN, c.r, c.p)
				KeyBatch(jobs) // fill the pool
				var cpu cpuMeter
				for b.Loop() {
					if cpu == (cpuMeter{}) {
						cpu = newCPUMeter()
					}
					KeyBatch(jobs)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
				cpu.report(b, b.N*batch)
			})
		}
	}
}
