package scrypt

// A kernel is one implementation of SMix's loops: the pure-Go BlockMix, a
// SIMD one (kernels_amd64.go) that computes lanes() independent hashes per
// call, or the word-sliced kernel that runs whole loops. Every kernel
// gives the same words for the same input, so a hash may switch kernels
// between two segments of the second loop (the chooser does, while it
// measures them).
type kernel uint8

func (k kernel) String() string { return kernelInfo[k].name }

// lanes is how many hashes k computes per call.
func (k kernel) lanes() int { return kernelInfo[k].lanes }

// maxLanes bounds the lanes of every kernel.
const maxLanes = 16

// kernels are the kernels this CPU runs, widest first and, among kernels
// of one width, the newest instruction set first: the order of preference
// before anything is measured.
var kernels = supportedKernels()

func supportedKernels() []kernel {
	var ks []kernel
	for w := maxLanes; w >= 1; w /= 2 {
		for i := numKernels; i > 0; i-- {
			if k := i - 1; k.lanes() == w && k.supported() {
				ks = append(ks, i-1)
			}
		}
	}
	return ks
}

// lanes is the most hashes a kernel of this CPU computes at once.
var lanes = kernels[0].lanes()

// mixGeneric is kernel.mix for the pure-Go kernel.
func mixGeneric(out, in, v *[maxLanes][]uint32, n, r int) {
	for k := range n {
		var vk []uint32
		if v != nil {
			vk = v[k]
		}
		blockMixGeneric(out[k], in[k], vk, r)
	}
}
