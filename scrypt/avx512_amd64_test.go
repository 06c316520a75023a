//go:build amd64 && gc && !purego

package scrypt

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAVX512Kernels compares each AVX-512 kernel, BlockMix and
// BlockMixXor, with blockMixGeneric for r in {1, 2, 3, 8, 16}, every hash
// with its own random blocks. The blocks sit one to three words past
// 16-byte boundaries, with guard words around each output; every output is
// computed twice, over two different fillings, so that a word the kernel
// does not write cannot match, and the inputs and guards must come out
// unchanged.
func TestAVX512Kernels(t *testing.T) {
	if !hasAVX512() {
		t.Skip("this CPU (or OS) lacks AVX-512 F/VL: the AVX-512 kernels cannot run here and are not tested")
	}
	const guard = 5 // words on either side of an output
	for _, k := range kernels {
		if !k.avx512() {
			continue
		}
		t.Run("kernel="+k.String(), func(t *testing.T) {
			n := k.lanes()
			rng := rand.New(rand.NewPCG(512, uint64(n)))
			words := func(n int) []uint32 {
				w := make([]uint32, n)
				for i := range w {
					w[i] = rng.Uint32()
				}
				return w
			}
			for _, r := range []int{1, 2, 3, 8, 16} {
				R := 32 * r
				for _, xor := range []bool{false, true} {
					name := fmt.Sprintf("r=%d xor=%v", r, xor)
					var in, v, outs [maxLanes][]uint32
					bufs := make([][]uint32, n)
					for l := range n {
						// Offsets of 1-3 words: no block is 16-byte aligned.
						skew := 1 + l%3
						in[l] = words(R + skew)[skew:]
						v[l] = words(R + skew)[skew:]
						bufs[l] = make([]uint32, skew+guard+R+guard)[skew:]
						outs[l] = bufs[l][guard : guard+R]
					}
					in0, v0 := deepClone(in[:n]), deepClone(v[:n])
					for _, fill := range []uint32{0x5a5a5a5a, 0xa5a5a5a5} {
						for l := range bufs {
							for i := range bufs[l] {
								bufs[l][i] = fill ^ uint32(i)
							}
						}
						vp := &v
						if !xor {
							vp = nil
						}
						mixOf(k)(&outs, &in, vp, n, r)
						for l := range n {
							want := make([]uint32, R)
							var vl []uint32
							if xor {
								vl = v0[l]
							}
							blockMixGeneric(want, in0[l], vl, r)
							if !slices.Equal(outs[l], want) {
								t.Fatalf("%s fill=%#x: hash %d differs from blockMixGeneric", name, fill, l)
							}
							for i, w := range bufs[l] {
								if (i < guard || i >= guard+R) && w != fill^uint32(i) {
									t.Fatalf("%s: hash %d: the kernel wrote word %d outside its output", name, l, i-guard)
								}
							}
						}
						for l := range n {
							if !slices.Equal(in[l], in0[l]) || !slices.Equal(v[l], v0[l]) {
								t.Fatalf("%s: hash %d: the kernel changed its input", name, l)
							}
						}
					}
				}
			}
		})
	}
}

func deepClone(s [][]uint32) [][]uint32 {
	c := make([][]uint32, len(s))
	for i := range s {
		c[i] = slices.Clone(s[i])
	}
	return c
}
