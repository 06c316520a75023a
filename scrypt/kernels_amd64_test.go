//go:build amd64 && gc && !purego

package scrypt

import "golang.org/x/sys/cpu"

// kernel is one BlockMix assembly function pair, called directly (not
// through blockMixN) for the kernel tests and benchmarks: mix and mixXor
// take lanes out, in (and v) pointers to the first word of 32·r-word
// permuted blocks.
type kernel struct {
	name   string
	lanes  int
	isa    string // "sse2", "avx2" or "avx512": what the processor needs
	mix    func(out, in []*uint32, r int)
	mixXor func(out, in, v []*uint32, r int)
}

// can reports whether this machine runs k.
func (k kernel) can() bool {
	switch k.isa {
	case "avx2":
		return cpu.X86.HasAVX2
	case "avx512":
		return hasAVX512()
	}
	return true
}

// kernels are every BlockMix assembly function of the package, the SSE2
// and AVX2 ones first.
var kernels = []kernel{
	{"sse2", 1, "sse2",
		func(o, i []*uint32, r int) { blockMixSSE2(o[0], i[0], r) },
		func(o, i, v []*uint32, r int) { blockMixXorSSE2(o[0], i[0], v[0], r) }},
	{"sse2x2", 2, "sse2",
		func(o, i []*uint32, r int) { blockMix2SSE2(o[0], i[0], o[1], i[1], r) },
		func(o, i, v []*uint32, r int) { blockMixXor2SSE2(o[0], i[0], v[0], o[1], i[1], v[1], r) }},
	{"avx2x2", 2, "avx2",
		func(o, i []*uint32, r int) { blockMix2AVX2(o[0], i[0], o[1], i[1], r) },
		func(o, i, v []*uint32, r int) { blockMixXor2AVX2(o[0], i[0], v[0], o[1], i[1], v[1], r) }},
	{"avx2x4", 4, "avx2",
		func(o, i []*uint32, r int) { blockMix4AVX2(o[0], i[0], o[1], i[1], o[2], i[2], o[3], i[3], r) },
		func(o, i, v []*uint32, r int) {
			blockMixXor4AVX2(o[0], i[0], v[0], o[1], i[1], v[1], o[2], i[2], v[2], o[3], i[3], v[3], r)
		}},
	{"avx512", 1, "avx512",
		func(o, i []*uint32, r int) { blockMixAVX512(o[0], i[0], r) },
		func(o, i, v []*uint32, r int) { blockMixXorAVX512(o[0], i[0], v[0], r) }},
	{"avx512x2", 2, "avx512",
		func(o, i []*uint32, r int) { blockMix2AVX512(o[0], i[0], o[1], i[1], r) },
		func(o, i, v []*uint32, r int) { blockMixXor2AVX512(o[0], i[0], v[0], o[1], i[1], v[1], r) }},
	{"avx512x4", 4, "avx512",
		func(o, i []*uint32, r int) { blockMix4AVX512(o[0], i[0], o[1], i[1], o[2], i[2], o[3], i[3], r) },
		func(o, i, v []*uint32, r int) {
			blockMixXor4AVX512(o[0], i[0], v[0], o[1], i[1], v[1], o[2], i[2], v[2], o[3], i[3], v[3], r)
		}},
	{"zmmx4", 4, "avx512",
		func(o, i []*uint32, r int) { blockMix4ZMM(o[0], i[0], o[1], i[1], o[2], i[2], o[3], i[3], r) },
		func(o, i, v []*uint32, r int) {
			blockMixXor4ZMM(o[0], i[0], v[0], o[1], i[1], v[1], o[2], i[2], v[2], o[3], i[3], v[3], r)
		}},
	{"zmmx8", 8, "avx512",
		func(o, i []*uint32, r int) {
			blockMix8ZMM(o[0], i[0], o[1], i[1], o[2], i[2], o[3], i[3],
				o[4], i[4], o[5], i[5], o[6], i[6], o[7], i[7], r)
		},
		func(o, i, v []*uint32, r int) {
			blockMixXor8ZMM(o[0], i[0], v[0], o[1], i[1], v[1], o[2], i[2], v[2], o[3], i[3], v[3],
				o[4], i[4], v[4], o[5], i[5], v[5], o[6], i[6], v[6], o[7], i[7], v[7], r)
		}},
}
