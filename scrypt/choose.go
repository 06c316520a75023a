package scrypt

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Which kernel runs is measured, not assumed: the fastest kernel differs
// between CPUs (a single SSE2 chain is twice as fast as pure Go on some,
// slower on others), and between parameters (whether V fits in a cache).
// For each class of work, (N, r) and the number n of hashes mixed
// together, the first computations time every kernel that fits (lanes
// dividing n, pure Go always among them) on short segments of SMix's
// second loop, the one that reads V at random, and keep the fastest:
// segmentsPerKernel segments each, the fastest segment per kernel. Load
// only ever slows a segment (a preemption, another thread on the core),
// so a kernel's fastest segment is the one least disturbed: a server that
// starts in a herd, its CPU busy with TLS, still finds the kernel that is
// fastest when undisturbed. A kernel whose fastest segment is slower than
// slowFactor times the leader's stops being tried early. Segments cost what the work costs anyway (every
// kernel gives the same bytes), so measuring delays nothing: the first
// hashes of a class run at about the speed of the kernels tried.
const (
	segmentsPerKernel = 5
	slowFactor        = 1.5
	// segmentCores sets a segment's length: about this many Salsa20/8
	// cores (4·r·n per iteration of the second loop), 0.1-1 ms of work.
	segmentCores = 16384
	// maxClasses bounds the classes kept. A new class past it replaces
	// the class least used (the oldest of those), so that classes seen
	// first (parameters an attacker chose, say) cannot keep the class
	// that carries the work from being measured.
	maxClasses = 64
)

// class is what the choice of a kernel depends on.
type class struct{ N, r, n int }

// choice is a class's kernel: chosen once decided, measured until then.
type choice struct {
	class
	cands  []kernel     // the kernels that fit, in order of preference
	chosen atomic.Int32 // the kernel + 1, 0 until decided
	uses   int          // computations that asked for it; guarded by choices.mu

	mu       sync.Mutex
	fastest  [numKernels]float64 // ns per iteration and lane, the least of its segments
	segments [numKernels]int     // segments timed
	dropped  [numKernels]bool
}

var choices struct {
	mu      sync.Mutex
	classes map[class]*choice
	order   []*choice                  // in order of creation, for Choices
	forced  func(class) (kernel, bool) // tests: the kernel to run, if any
}

// choiceFor returns class c's choice, counting a use. A class not kept
// yet is measured afresh; past maxClasses it takes the place of the
// class least used so far.
func choiceFor(c class) *choice {
	choices.mu.Lock()
	defer choices.mu.Unlock()
	if ch := choices.classes[c]; ch != nil {
		ch.uses++
		return ch
	}
	ch := &choice{class: c, uses: 1}
	for _, k := range kernels {
		if c.n%k.lanes() == 0 && k.fits(c.N) {
			ch.cands = append(ch.cands, k)
		}
	}
	if choices.classes == nil { // whole: a batch's memory counts one class's record (batchState), not a map's growth
		choices.classes = make(map[class]*choice, maxClasses)
		choices.order = make([]*choice, 0, maxClasses)
	}
	if len(choices.order) >= maxClasses {
		least := 0
		for i, o := range choices.order {
			if o.uses < choices.order[least].uses {
				least = i
			}
		}
		delete(choices.classes, choices.order[least].class)
		choices.order = slices.Delete(choices.order, least, least+1)
	}
	choices.classes[c] = ch
	choices.order = append(choices.order, ch)
	return ch
}

// segment returns the kernel for the next segment of c's second loop, and
// whether that segment is to be timed and reported with record.
func (ch *choice) segment() (kernel, bool) {
	if k, ok := forced(ch.class); ok {
		return k, false
	}
	if k := ch.chosen.Load(); k > 0 {
		return kernel(k - 1), false
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var next kernel
	fewest := -1
	for _, k := range ch.cands {
		if n := ch.segments[k]; !ch.dropped[k] && (fewest < 0 || n < fewest) {
			next, fewest = k, n
		}
	}
	return next, true
}

// best returns the kernel for work that is not measured (the first loop):
// the chosen one, the fastest measured so far, or the preferred one.
func (ch *choice) best() kernel {
	if k, ok := forced(ch.class); ok {
		return k
	}
	if k := ch.chosen.Load(); k > 0 {
		return kernel(k - 1)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if k, _, ok := ch.leaderLocked(); ok {
		return k
	}
	return ch.cands[0]
}

// record reports that a segment of iters iterations took d on kernel k.
// A zero d says nothing (a fake clock, as under testing/synctest) and is
// dropped.
func (ch *choice) record(k kernel, iters int, d time.Duration) {
	if d <= 0 || iters <= 0 {
		return
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.chosen.Load() > 0 {
		return
	}
	if v := float64(d) / float64(iters*ch.n); ch.segments[k] == 0 || v < ch.fastest[k] {
		ch.fastest[k] = v
	}
	ch.segments[k]++
	lead, best, ok := ch.leaderLocked()
	if !ok {
		return
	}
	done := true
	for _, c := range ch.cands {
		if c != lead && ch.segments[c] >= 2 && ch.fastest[c] > slowFactor*best {
			ch.dropped[c] = true
		}
		if !ch.dropped[c] && ch.segments[c] < segmentsPerKernel {
			done = false
		}
	}
	if !done {
		return
	}
	ch.chosen.Store(int32(lead) + 1)
}

// leaderLocked returns the kernel with the fastest segment among those
// measured at least twice, and that segment's time.
func (ch *choice) leaderLocked() (lead kernel, best float64, found bool) {
	for _, c := range ch.cands {
		if m := ch.fastest[c]; !ch.dropped[c] && ch.segments[c] >= 2 && (!found || m < best) {
			lead, best, found = c, m, true
		}
	}
	return lead, best, found
}

func forced(c class) (kernel, bool) {
	if f := choices.forced; f != nil {
		return f(c)
	}
	return 0, false
}

// Choice is the BlockMix kernel the package runs for one class of work,
// and what it measured to choose it.
type Choice struct {
	// N and R are the scrypt parameters; Hashes is how many hashes are
	// mixed together: 1 for a Key with p = 1, up to Lanes() in a batch.
	N, R, Hashes int
	// Kernel names the kernel chosen ("avx2x4", "sse2", "purego", ...),
	// or is empty while the kernels are still being measured.
	Kernel string
	// PerHash is, for each kernel measured, the time one hash would take
	// on it: its fastest segment's (of two, for a kernel left out early
	// as too slow).
	PerHash map[string]time.Duration
}

// Choices returns the kernel chosen for each class of work this process
// has computed and keeps (at most 64: a class used least makes room for a
// new one), in the order the classes first came. See the package doc
// ("Kernels") for how they are chosen.
func Choices() []Choice {
	choices.mu.Lock()
	order := slices.Clone(choices.order)
	choices.mu.Unlock()
	out := make([]Choice, 0, len(order))
	for _, ch := range order {
		c := Choice{N: ch.N, R: ch.r, Hashes: ch.n, PerHash: make(map[string]time.Duration)}
		if k := ch.chosen.Load(); k > 0 {
			c.Kernel = kernel(k - 1).String()
		}
		ch.mu.Lock()
		for _, k := range ch.cands {
			if ch.segments[k] > 0 {
				// A hash is N/2 iterations of each loop.
				c.PerHash[k.String()] = time.Duration(ch.fastest[k] * float64(ch.N))
			}
		}
		ch.mu.Unlock()
		out = append(out, c)
	}
	return out
}

// PerHash returns the least time per hash measured at (N, r) on a kernel
// of lanes lanes, over every class this process keeps (see [Choices]),
// and whether one was measured: what a batch of lanes hashes of (N, r)
// may expect per hash of one core on that width. The classes of lanes
// hashes or more measure it (every kernel whose lanes divide theirs).
func PerHash(N, r, lanes int) (d time.Duration, ok bool) {
	for _, c := range Choices() {
		if c.N != N || c.R != r {
			continue
		}
		for name, t := range c.PerHash {
			if k, found := kernelNamed(name); found && k.lanes() == lanes && (!ok || t < d) {
				d, ok = t, true
			}
		}
	}
	return d, ok
}

func kernelNamed(name string) (kernel, bool) {
	for k := range kernel(numKernels) {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}
