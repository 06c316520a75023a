//go:build amd64 && gc && !purego

package scrypt

import "golang.org/x/sys/cpu"

// The SIMD BlockMix: with AVX2, four hashes at once in two interleaved
// chains of YMM registers (two hashes per register, one per 128-bit half),
// or two in one chain; without AVX2, two hashes in interleaved SSE2 chains;
// one hash alone in SSE2 (part of amd64).

// The BlockMix codes blockMixN can run, for the tests and benchmarks to
// compare; code is the one in use and lanes how many hashes it takes.
const (
	codeAVX2x4  = iota // two interleaved YMM chains of two hashes each
	codeAVX2x2         // both hashes in one YMM chain
	codeSSE2x2         // two interleaved XMM chains
	codeSSE2           // one XMM chain
	codeGeneric        // pure Go
)

var (
	code  = defaultCode()
	lanes = codeLanes(code)
)

func defaultCode() int {
	if cpu.X86.HasAVX2 {
		return codeAVX2x4
	}
	return codeSSE2x2
}

func codeLanes(c int) int {
	switch c {
	case codeAVX2x4:
		return 4
	case codeAVX2x2, codeSSE2x2:
		return 2
	}
	return 1
}

// blockMixN sets out[k] to BlockMix(in[k]), or BlockMix(in[k] ⊕ v[k]) when
// v is not nil, for k < n; n is lanes, or less at the end of a batch.
func blockMixN(out, in, v *[maxLanes][]uint32, n, r int) {
	w := 32 * r
	var o, i, x [maxLanes]*uint32
	for k := range n {
		o[k], i[k] = &out[k][:w][0], &in[k][:w][0]
		if v != nil {
			x[k] = &v[k][:w][0]
		}
	}
	switch {
	case n == 4 && v == nil:
		blockMix4AVX2(o[0], i[0], o[1], i[1], o[2], i[2], o[3], i[3], r)
	case n == 4:
		blockMixXor4AVX2(o[0], i[0], x[0], o[1], i[1], x[1], o[2], i[2], x[2], o[3], i[3], x[3], r)
	case n == 2 && code <= codeAVX2x2 && v == nil:
		blockMix2AVX2(o[0], i[0], o[1], i[1], r)
	case n == 2 && code <= codeAVX2x2:
		blockMixXor2AVX2(o[0], i[0], x[0], o[1], i[1], x[1], r)
	case n == 2 && code == codeSSE2x2 && v == nil:
		blockMix2SSE2(o[0], i[0], o[1], i[1], r)
	case n == 2 && code == codeSSE2x2:
		blockMixXor2SSE2(o[0], i[0], x[0], o[1], i[1], x[1], r)
	case code == codeGeneric:
		for k := range n {
			var vk []uint32
			if v != nil {
				vk = v[k]
			}
			blockMixGeneric(out[k], in[k], vk, r)
		}
	default:
		for k := range n {
			if v == nil {
				blockMixSSE2(o[k], i[k], r)
			} else {
				blockMixXorSSE2(o[k], i[k], x[k], r)
			}
		}
	}
}
