//go:build amd64 && gc && !purego

package scrypt

import "golang.org/x/sys/cpu"

// hasAVX512 reports whether the AVX-512 BlockMix kernels (blockMix*AVX512,
// blockMix*ZMM) can run. They use AVX-512 F instructions on XMM and YMM
// registers as well as ZMM ones (VL), and the assembler encodes those on
// the first 16 registers with VEX, which is AVX2 (every AVX-512 processor
// has it; the check costs nothing). cpu.X86.HasAVX512F also tells that the
// OS saves the ZMM and mask state.
func hasAVX512() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX2
}
