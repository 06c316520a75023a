//go:build !amd64 || purego || !gc

package scrypt

// Without SIMD kernels the pure-Go BlockMix is the only one.
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

// scratch is how many words of working memory k needs besides the
// hashes' buffers: none.
func (k kernel) scratch(int) int { return 0 }

// mix sets out[k] to BlockMix(in[k]), or BlockMix(in[k] ⊕ v[k]) when v is
// not nil, for the n lanes k < n.
func (k kernel) mix(out, in, v *[maxLanes][]uint32, n, r int) { mixGeneric(out, in, v, n, r) }

// enter puts w's working blocks where k works on them: in x.
func (k kernel) enter(w *work) {}

// first runs SMix's first loop of w (see work.firstMix).
func (k kernel) first(w *work) { w.firstMix(k) }

// second runs iters iterations of SMix's second loop of w (see
// work.secondMix), after k.enter(w).
func (k kernel) second(w *work, iters int) { w.secondMix(k, iters) }
