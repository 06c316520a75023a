//go:build !amd64 || purego || !gc

package scrypt

// lanes is how many SMix computations mixAll runs together.
const lanes = 1

// blockMixN sets out[k] to BlockMix(in[k]), or BlockMix(in[k] ⊕ v[k]) when
// v is not nil, for k < n.
func blockMixN(out, in, v *[maxLanes][]uint32, n, r int) {
	for k := range n {
		var vk []uint32
		if v != nil {
			vk = v[k]
		}
		blockMixGeneric(out[k], in[k], vk, r)
	}
}
