//go:build amd64 && gc && !purego

package scrypt

import "golang.org/x/sys/cpu"

// codes are the BlockMix codes this build can run, by name, for the tests
// and benchmarks to compare.
func codes() []codeName {
	var cs []codeName
	if cpu.X86.HasAVX2 {
		cs = append(cs, codeName{"avx2x4", codeAVX2x4}, codeName{"avx2x2", codeAVX2x2})
	}
	return append(cs,
		codeName{"sse2x2", codeSSE2x2},
		codeName{"sse2", codeSSE2},
		codeName{"purego", codeGeneric})
}

// setCode makes c the BlockMix code until restore is called.
func setCode(c int) (restore func()) {
	oldCode, oldLanes := code, lanes
	code, lanes = c, codeLanes(c)
	return func() { code, lanes = oldCode, oldLanes }
}
