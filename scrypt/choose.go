package scrypt

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The chooser (see the package doc, "Kernels and lanes"): for each class
// of work, every kernel that fits runs segmentsPerKernel timed segments
// of SMix's second loop, and the kernel with the fastest segment, the
// least disturbed by load, is kept. A kernel slower than slowFactor times
// the leader, once measured twice, stops being tried.
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
	if k, ok := ch.decided(); ok {
		return k, false
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
	if k, ok := ch.decided(); ok {
		return k
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
	if done {
		ch.chosen.Store(int32(lead) + 1)
	}
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

// decided returns ch's kernel once there is no more to measure: the one
// a test forces, or the one chosen.
func (ch *choice) decided() (kernel, bool) {
	if f := choices.forced; f != nil {
		if k, ok := f(ch.class); ok {
			return k, true
		}
	}
	k := ch.chosen.Load()
	return kernel(k - 1), k > 0
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
// new one), in the order the classes first came.
func Choices() []Choice {
	order := kept()
	out := make([]Choice, 0, len(order))
	for _, ch := range order {
		c := Choice{N: ch.N, R: ch.r, Hashes: ch.n, PerHash: make(map[string]time.Duration)}
		if k := ch.chosen.Load(); k > 0 {
			c.Kernel = kernel(k - 1).String()
		}
		ch.measured(func(k kernel, d time.Duration) { c.PerHash[k.String()] = d })
		out = append(out, c)
	}
	return out
}

// PerHash returns the least time per hash measured at (N, r) on a kernel
// of lanes lanes, over every class this process keeps (see [Choices]),
// and whether one was measured: what a batch of lanes hashes of (N, r)
// may expect per hash of one core on that width.
func PerHash(N, r, lanes int) (d time.Duration, ok bool) {
	for _, ch := range kept() {
		if ch.N == N && ch.r == r {
			ch.measured(func(k kernel, t time.Duration) {
				if k.lanes() == lanes && (!ok || t < d) {
					d, ok = t, true
				}
			})
		}
	}
	return d, ok
}

// kept returns the classes kept, in the order they first came.
func kept() []*choice {
	choices.mu.Lock()
	defer choices.mu.Unlock()
	return slices.Clone(choices.order)
}

// measured calls f with each kernel of ch measured so far and the time
// one hash would take on it: its fastest segment's, over the N/2
// iterations of each loop.
func (ch *choice) measured(f func(k kernel, perHash time.Duration)) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, k := range ch.cands {
		if ch.segments[k] > 0 {
			f(k, time.Duration(ch.fastest[k]*float64(ch.N)))
		}
	}
}
