//go:build amd64 && gc && !purego

package scrypt

import "golang.org/x/sys/cpu"

// The SIMD BlockMix: SSE2 (part of amd64) for one hash, and for two hashes
// at once AVX2 (both in one YMM register, one per 128-bit half) where the
// CPU has it, else SSE2 with the two hashes' instructions interleaved.

// lanes is how many SMix computations mixAll runs together.
var lanes = 2

// pairImpl selects blockMix2's code: the tests and benchmarks switch it.
var pairImpl = defaultPair()

const (
	pairAVX2    = iota // both hashes in one YMM chain
	pairSSE2           // two interleaved XMM chains
	pairSingle         // one blockMixSSE2 after the other
	pairGeneric        // pure Go, one after the other
)

func defaultPair() int {
	if cpu.X86.HasAVX2 {
		return pairAVX2
	}
	return pairSSE2
}

func blockMix(out, in, v []uint32, r int) {
	n := 32 * r
	_, _ = out[n-1], in[n-1]
	if v == nil {
		blockMixSSE2(&out[0], &in[0], r)
		return
	}
	_ = v[n-1]
	blockMixXorSSE2(&out[0], &in[0], &v[0], r)
}

func blockMix2(out0, in0, v0, out1, in1, v1 []uint32, r int) {
	n := 32 * r
	_, _, _, _ = out0[n-1], in0[n-1], out1[n-1], in1[n-1]
	switch pairImpl {
	case pairSingle:
		blockMix(out0, in0, v0, r)
		blockMix(out1, in1, v1, r)
		return
	case pairGeneric:
		blockMixGeneric(out0, in0, v0, r)
		blockMixGeneric(out1, in1, v1, r)
		return
	}
	avx2 := pairImpl == pairAVX2
	if v0 == nil {
		if avx2 {
			blockMix2AVX2(&out0[0], &in0[0], &out1[0], &in1[0], r)
		} else {
			blockMix2SSE2(&out0[0], &in0[0], &out1[0], &in1[0], r)
		}
		return
	}
	_, _ = v0[n-1], v1[n-1]
	if avx2 {
		blockMixXor2AVX2(&out0[0], &in0[0], &v0[0], &out1[0], &in1[0], &v1[0], r)
	} else {
		blockMixXor2SSE2(&out0[0], &in0[0], &v0[0], &out1[0], &in1[0], &v1[0], r)
	}
}
