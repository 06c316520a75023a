package scrypt

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkKernel answers how long one BlockMix takes per hash with each
// kernel, as in SMix's second loop: every op is one BlockMixXor call (all
// of a kernel's lanes) at r=8, from the working block x to y and back,
// XORed with the block of a 32 MiB V (N=2^15, as k3s's logN 15) that
// Integerify of the previous output picks, one V per hash. ns/hash is the
// time per hash and BlockMix; cpu-ns/hash the process's CPU time per hash
// and BlockMix, which a shared machine's other work disturbs less. A key at
// logN 15 takes 2N = 65536 BlockMix calls per hash (the first N without
// the random read of V). "purego" is blockMixGeneric, one hash per call.
func BenchmarkKernel(b *testing.B) {
	const r, N = 8, 1 << 15
	const R = 32 * r
	// One V per lane, filled so that its pages are mapped and distinct.
	rng := rand.New(rand.NewPCG(15, 8))
	var vs, xs, ys [maxLanes][]uint32
	for l := range lanes {
		vs[l] = make([]uint32, N*R)
		for i := range vs[l] {
			vs[l][i] = uint32(rng.Uint64())
		}
		xs[l], ys[l] = make([]uint32, R), make([]uint32, R)
		for i := range xs[l] {
			xs[l][i] = rng.Uint32()
		}
	}
	for _, k := range kernels {
		b.Run("kernel="+k.String(), func(b *testing.B) {
			n := k.lanes()
			x, y := xs, ys
			var v [maxLanes][]uint32
			var cpu cpuMeter
			for b.Loop() {
				if cpu == (cpuMeter{}) {
					cpu = newCPUMeter()
				}
				for l := range n {
					j := int(integerify(x[l], r) & (N - 1))
					v[l] = vs[l][j*R : (j+1)*R]
				}
				k.mix(&y, &x, &v, n, r)
				x, y = y, x
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/hash")
			if t, ok := cpuTime(); cpu.ok && ok {
				b.ReportMetric(float64((t-cpu.start).Nanoseconds())/float64(b.N*n), "cpu-ns/hash")
			}
		})
	}
}
