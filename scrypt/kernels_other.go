//go:build !amd64 || purego || !gc

package scrypt

// Without SIMD kernels the pure-Go BlockMix is the only one; its methods
// do what kernels_amd64.go's do for it.
const (
	kernelGeneric kernel = iota
	numKernels
)

var kernelInfo = [numKernels]struct {
	name  string
	lanes int
}{
	kernelGeneric: {"purego", 1},
}

func (k kernel) supported() bool { return true }

func (k kernel) fits(N int) bool { return true }

func (k kernel) scratch(int) int { return 0 }

func (k kernel) mix(out, in, v *[maxLanes][]uint32, n, r int) { mixGeneric(out, in, v, n, r) }

func (k kernel) enter(w *work) {}

func (k kernel) first(w *work) { w.firstMix(k) }

func (k kernel) second(w *work, iters int) { w.secondMix(k, iters) }
