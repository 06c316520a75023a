package scrypt

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkMemoryFloor answers how close a kernel is to what this
// machine's memory allows: it does SMix's memory traffic at k3s's
// parameters (N = 2^15, r = 8) with no Salsa20/8. Each goroutine owns
// lanes buffers of 32 MiB (V), advanced in lockstep as a kernel of that
// many lanes advances them. Per hash, it writes V in order in 1 KiB
// blocks (the first loop), then reads 2^15 blocks at indices taken from
// the working block (the second loop, as Integerify), one word of every
// 64-byte line folded into the working block so that no read can be
// dropped and every line comes from memory. That is 64 MiB of traffic per
// hash. ns/hash is the wall time per hash of one goroutine; a kernel's
// time per hash (BenchmarkCode's cpu-ns/key) cannot fall below it with
// as many goroutines. The figure moves with the other work of a shared
// machine's memory system.
func BenchmarkMemoryFloor(b *testing.B) {
	const N, R = 1 << 15, 256 // R: words per 1 KiB block (r = 8)
	for _, lanes := range []int{8, 16} {
		for _, goroutines := range []int{1, 2} {
			b.Run(fmt.Sprintf("logN=15/r=8/lanes=%d/goroutines=%d", lanes, goroutines), func(b *testing.B) {
				floors := make([]*floor, goroutines)
				for g := range floors {
					floors[g] = newFloor(b, lanes, N, R)
				}
				var cpu cpuMeter
				for b.Loop() {
					if cpu == (cpuMeter{}) {
						cpu = newCPUMeter()
					}
					var wg sync.WaitGroup
					for _, f := range floors {
						wg.Go(f.hash)
					}
					wg.Wait()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lanes), "ns/hash")
				cpu.report(b, b.N*lanes*goroutines)
			})
		}
	}
}

// floor is one goroutine's share of BenchmarkMemoryFloor: lanes buffers
// of N blocks of R words, and a working block per lane.
type floor struct {
	n, r int
	v, x [][]uint32
}

func newFloor(tb testing.TB, lanes, n, r int) *floor {
	f := &floor{n: n, r: r}
	for l := range lanes {
		v := newWords(n * r) // as a Pool makes them
		tb.Cleanup(mappingOf(v).unmap)
		for i := range v { // map every page before the clock starts
			v[i] = uint32(i + l)
		}
		x := make([]uint32, r)
		for i := range x {
			x[i] = uint32(i*0x9e3779b9 + l)
		}
		f.v, f.x = append(f.v, v), append(f.x, x)
	}
	return f
}

// hash does one hash's traffic in every lane.
func (f *floor) hash() {
	r, mask := f.r, uint32(f.n-1)
	for i := range f.n {
		for l, v := range f.v {
			x := f.x[l]
			x[i%r]++
			copy(v[i*r:(i+1)*r], x)
		}
	}
	for range f.n {
		for l, v := range f.v {
			x := f.x[l]
			j := int(x[r-16] & mask)
			blk := v[j*r : (j+1)*r]
			for w := 0; w < r; w += 16 { // one word per 64-byte line
				x[w] ^= blk[w+(w/16)%16] + uint32(w)
			}
		}
	}
}
