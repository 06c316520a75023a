//go:build amd64 && gc && !purego

package scrypt

import "golang.org/x/sys/cpu"

// The SIMD BlockMix kernels (see the package doc): SSE2 (part of amd64)
// with one hash, or two in interleaved chains; AVX2 with two hashes in one
// chain of YMM registers (one per 128-bit half), or four in two
// interleaved chains; AVX-512 with the same layouts and VPROLD for the
// rotates, with four hashes per ZMM register (one per 128-bit lane), in
// one chain or two, and word-sliced: 16 hashes, one word of each per
// 32-bit lane (sliced_amd64.go).
const (
	kernelGeneric kernel = iota
	kernelSSE2
	kernelSSE2x2
	kernelAVX2x2
	kernelAVX2x4
	kernelAVX512
	kernelAVX512x2
	kernelAVX512x4
	kernelZMMx4
	kernelZMMx8
	kernelSliced16
	numKernels
)

var kernelInfo = [numKernels]struct {
	name  string
	lanes int
}{
	kernelGeneric:  {"purego", 1},
	kernelSSE2:     {"sse2", 1},
	kernelSSE2x2:   {"sse2x2", 2},
	kernelAVX2x2:   {"avx2x2", 2},
	kernelAVX2x4:   {"avx2x4", 4},
	kernelAVX512:   {"avx512", 1},
	kernelAVX512x2: {"avx512x2", 2},
	kernelAVX512x4: {"avx512x4", 4},
	kernelZMMx4:    {"zmmx4", 4},
	kernelZMMx8:    {"zmmx8", 8},
	kernelSliced16: {"sliced16", 16},
}

// supported reports whether this CPU runs k.
func (k kernel) supported() bool {
	switch {
	case k.avx512():
		return hasAVX512()
	case k == kernelAVX2x2 || k == kernelAVX2x4:
		return cpu.X86.HasAVX2
	}
	return true
}

// hasAVX512 reports whether the AVX-512 BlockMix kernels (blockMix*AVX512,
// blockMix*ZMM) can run. They use AVX-512 F instructions on XMM and YMM
// registers as well as ZMM ones (VL), and the assembler encodes those on
// the first 16 registers with VEX, which is AVX2 (every AVX-512 processor
// has it; the check costs nothing). cpu.X86.HasAVX512F also tells that the
// OS saves the ZMM and mask state.
func hasAVX512() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX2
}

// fits reports whether k computes SMix at N: the word-sliced kernel
// takes Integerify's low 32 bits only.
func (k kernel) fits(N int) bool { return k != kernelSliced16 || uint64(N) <= 1<<32 }

// scratch is how many words of working memory k needs besides the
// hashes' buffers (work.scratch): the word-sliced kernel's, at r.
func (k kernel) scratch(r int) int {
	if k == kernelSliced16 {
		return slicedWords(r)
	}
	return 0
}

// avx512 reports whether k needs AVX-512.
func (k kernel) avx512() bool { return k >= kernelAVX512 }

// enter puts w's working blocks where k works on them: in the scratch for
// the word-sliced kernel, in x for the others.
func (k kernel) enter(w *work) {
	if k == kernelSliced16 {
		w.toSliced()
	} else {
		w.toHashes()
	}
}

// first runs SMix's first loop of w (see work.firstMix).
func (k kernel) first(w *work) {
	if k == kernelSliced16 {
		w.slicedFirst()
		return
	}
	w.firstMix(k)
}

// second runs iters iterations of SMix's second loop of w (see
// work.secondMix), after k.enter(w).
func (k kernel) second(w *work, iters int) {
	if k == kernelSliced16 {
		w.slicedSecond(iters)
		return
	}
	w.secondMix(k, iters)
}

// mix sets out[k] to BlockMix(in[k]), or BlockMix(in[k] ⊕ v[k]) when v is
// not nil, for the n lanes k < n, with kernel k taking k.lanes() of them
// at a time; n is a multiple of k.lanes(). The word-sliced kernel runs
// whole loops only (kernel.first, kernel.second), never mix.
func (k kernel) mix(out, in, v *[maxLanes][]uint32, n, r int) {
	if k == kernelGeneric {
		mixGeneric(out, in, v, n, r)
		return
	}
	w := 32 * r
	var o, i, x [maxLanes]*uint32
	for l := range n {
		o[l], i[l] = &out[l][:w][0], &in[l][:w][0]
		if v != nil {
			x[l] = &v[l][:w][0]
		}
	}
	for l := 0; l < n; l += k.lanes() {
		o, i, x := o[l:], i[l:], x[l:]
		switch {
		case k == kernelSSE2 && v == nil:
			blockMixSSE2(o[0], i[0], r)
		case k == kernelSSE2:
			blockMixXorSSE2(o[0], i[0], x[0], r)
		case k == kernelSSE2x2 && v == nil:
			blockMix2SSE2(o[0], i[0], o[1], i[1], r)
		case k == kernelSSE2x2:
			blockMixXor2SSE2(o[0], i[0], x[0], o[1], i[1], x[1], r)
		case k == kernelAVX2x2 && v == nil:
			blockMix2AVX2(o[0], i[0], o[1], i[1], r)
		case k == kernelAVX2x2:
			blockMixXor2AVX2(o[0], i[0], x[0], o[1], i[1], x[1], r)
		case k == kernelAVX2x4 && v == nil:
			blockMix4AVX2(o[0], i[0], o[1], i[1], o[2], i[2], o[3], i[3], r)
		case k == kernelAVX2x4:
			blockMixXor4AVX2(o[0], i[0], x[0], o[1], i[1], x[1], o[2], i[2], x[2], o[3], i[3], x[3], r)
		case k == kernelAVX512 && v == nil:
			blockMixAVX512(o[0], i[0], r)
		case k == kernelAVX512:
			blockMixXorAVX512(o[0], i[0], x[0], r)
		case k == kernelAVX512x2 && v == nil:
			blockMix2AVX512(o[0], i[0], o[1], i[1], r)
		case k == kernelAVX512x2:
			blockMixXor2AVX512(o[0], i[0], x[0], o[1], i[1], x[1], r)
		case k == kernelAVX512x4 && v == nil:
			blockMix4AVX512(o[0], i[0], o[1], i[1], o[2], i[2], o[3], i[3], r)
		case k == kernelAVX512x4:
			blockMixXor4AVX512(o[0], i[0], x[0], o[1], i[1], x[1], o[2], i[2], x[2], o[3], i[3], x[3], r)
		case k == kernelZMMx4 && v == nil:
			blockMix4ZMM(o[0], i[0], o[1], i[1], o[2], i[2], o[3], i[3], r)
		case k == kernelZMMx4:
			blockMixXor4ZMM(o[0], i[0], x[0], o[1], i[1], x[1], o[2], i[2], x[2], o[3], i[3], x[3], r)
		case k == kernelZMMx8 && v == nil:
			blockMix8ZMM(o[0], i[0], o[1], i[1], o[2], i[2], o[3], i[3],
				o[4], i[4], o[5], i[5], o[6], i[6], o[7], i[7], r)
		case k == kernelZMMx8:
			blockMixXor8ZMM(o[0], i[0], x[0], o[1], i[1], x[1], o[2], i[2], x[2], o[3], i[3], x[3],
				o[4], i[4], x[4], o[5], i[5], x[5], o[6], i[6], x[6], o[7], i[7], x[7], r)
		default:
			panic("scrypt: kernel " + k.String() + " has no BlockMix of its own")
		}
	}
}
