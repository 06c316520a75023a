//go:build !amd64 || purego || !gc

package scrypt

// lanes is how many SMix computations mixAll runs together.
const lanes = 1

func blockMix(out, in, v []uint32, r int) { blockMixGeneric(out, in, v, r) }

func blockMix2(out0, in0, v0, out1, in1, v1 []uint32, r int) {
	blockMixGeneric(out0, in0, v0, r)
	blockMixGeneric(out1, in1, v1, r)
}
