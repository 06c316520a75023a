package scrypt

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkKernel answers how long one BlockMix takes per hash with each
// kernel, in each loop of SMix at r=8, one V per hash. With loop=first,
// every op is the whole first loop (V[1] to V[N-1] written in order); with
// loop=second, every op is 64 iterations of the second loop (128 BlockMix
// calls reading a block of V that Integerify picks). logN=15 is k3s's N
// (32 MiB per V, out of every cache); logN=6 keeps V in the caches, for
// the kernel's compute alone. ns/hash is the time per hash and BlockMix;
// cpu-ns/hash the process's CPU time per hash and BlockMix, which a
// shared machine's other work disturbs less. A key takes 2N BlockMix
// calls per hash.
func BenchmarkKernel(b *testing.B) {
	const r = 8
	const R = 32 * r
	for _, logN := range []int{15, 6} {
		N := 1 << logN
		// One V per lane, filled so that its pages are mapped and distinct.
		rng := rand.New(rand.NewPCG(15, 8))
		var bufs [maxLanes][]uint32
		for l := range lanes {
			bufs[l] = newWords(R * (N + 2)) // as a Pool makes them
			b.Cleanup(mappingOf(bufs[l]).unmap)
			for i := range bufs[l] {
				bufs[l][i] = rng.Uint32()
			}
		}
		for _, loop := range []string{"first", "second"} {
			for _, k := range kernels {
				b.Run(fmt.Sprintf("logN=%d/loop=%s/kernel=%s", logN, loop, k), func(b *testing.B) {
					w := work{n: k.lanes(), r: r, N: N}
					for l := range w.n {
						w.v[l], w.x[l], w.y[l] = bufs[l][:R*N], bufs[l][R*N:R*N+R], bufs[l][R*N+R:]
					}
					calls := N - 1 // BlockMix calls per op
					if loop == "second" {
						calls = 128
						k.enter(&w)
					}
					var cpu cpuMeter
					for b.Loop() {
						if cpu == (cpuMeter{}) {
							cpu = newCPUMeter()
						}
						if loop == "first" {
							k.first(&w)
						} else {
							k.second(&w, calls/2)
						}
					}
					per := float64(b.N * calls * w.n)
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/hash")
					if t, ok := cpuTime(); cpu.ok && ok {
						b.ReportMetric(float64((t-cpu.start).Nanoseconds())/per, "cpu-ns/hash")
					}
				})
			}
		}
	}
}
