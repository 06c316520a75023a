package verify

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/scrypt"
)

// The scrypt memory budget (Options.ScryptMemory), in the order its
// parts run: its default (sized), the batches' shape (reshape), the
// budget (memory), each batch's lanes (reserve), and the idle buffers'
// release.

// DefaultScryptMemory caps the default budget: two batches of 16 lanes at
// k3s's parameters.
const DefaultScryptMemory int64 = 1<<30 + 1<<20

// defaultScryptMemory is the default budget: a memoryShare-th of the
// lower of the cgroup's limit and the machine's memory (0: unknown;
// unknownMemory if neither is known), from least to DefaultScryptMemory.
func defaultScryptMemory(cgroup, physical, least int64) int64 {
	limit := physical
	if cgroup > 0 && (limit <= 0 || cgroup < limit) {
		limit = cgroup
	}
	if limit <= 0 {
		limit = unknownMemory
	}
	return max(least, min(limit/memoryShare, DefaultScryptMemory))
}

// memoryShare sizes the default budget: a twelfth of a 2 GiB server,
// where k3s itself takes about 1.6 GB (docs.k3s.io, resource profiling),
// is 171 MiB, four lanes at k3s's parameters. unknownMemory, what the
// rule assumes where the memory cannot be read, is the least k3s asks of
// a server.
const (
	memoryShare   = 12
	unknownMemory = 2 << 30
)

// sized resolves the budget at the first computation and shapes the
// batches for it.
func (v *Verifier) sized() *memory {
	total := v.opts.ScryptMemory
	if total == 0 {
		cgroup, physical := machineMemory()
		p := v.opts.Params
		total = defaultScryptMemory(cgroup, physical, jobBytes(p.LogN, p.R, p.P, p.KeyLen))
	}
	m := newMemory(max(total, 0))
	v.reshape(m)
	return m
}

// shaping is how a Verifier's batches at Options.Params spend the
// budget: slots batches at once of lanes hashes; final once the shape
// needs no measurement more (reserve says what a batch may take).
type shaping struct {
	slots, lanes int
	final        bool
}

// reshape chooses the slots and lanes of batches at Options.Params for
// budget m, and gives them to the scheduler: MaxConcurrent batches of
// scrypt.Lanes() where the budget holds them; where it binds, the fastest
// by this CPU's kernels (shape), once a batch as wide as the budget
// allows has timed them. Until then every slot takes batches of that
// width, each free to take the whole budget, and runBatch calls reshape
// after each batch.
func (v *Verifier) reshape(m *memory) {
	p := v.opts.Params
	N := 1 << p.LogN
	sh := shaping{slots: v.opts.MaxConcurrent, lanes: scrypt.Lanes(), final: true}
	batches := func(l int) int64 { return m.total / batchBytes(p, l) }
	perHash := func(l int) (best time.Duration, ok bool) {
		for w := 1; w <= l; w *= 2 { // a batch of l can run any narrower kernel
			if d, measured := scrypt.PerHash(N, p.R, w); measured && (!ok || d < best) {
				best, ok = d, true
			}
		}
		return best, ok
	}
	widest := sh.lanes
	for widest > 1 && batches(widest) < 1 {
		widest /= 2
	}
	_, measured := scrypt.PerHash(N, p.R, widest)
	switch {
	case m.total > 0 && v.fixedShape != nil: // tests'
		sh.slots, sh.lanes = v.fixedShape()
	case m.total == 0 || batches(sh.lanes) >= int64(sh.slots): // the budget does not bind
	case measured || widest == 1:
		sh.slots, sh.lanes = shape(batches, sh.slots, sh.lanes, perHash)
	default:
		sh.lanes, sh.final = widest, false
	}
	v.shape.Store(&sh)
	v.sched.Reshape(sh.slots, sh.lanes, int64(sh.lanes)*v.enrollWork)
}

// batchBytes is what a batch of lanes hashes at p takes of the budget,
// computed lanes at a time; jobBytes what one takes at one lane, the
// least a budget must hold for it.
func batchBytes(p Params, lanes int) int64 {
	return scrypt.KeyBatchBytes(slices.Repeat([]scrypt.Job{{N: 1 << p.LogN, R: p.R, P: p.P, KeyLen: p.KeyLen}}, lanes), lanes)
}

func jobBytes(logN, r, p, keyLen int) int64 { // per request: no allocation
	return scrypt.KeyBatchBytes([]scrypt.Job{{N: 1 << logN, R: r, P: p, KeyLen: keyLen}}, 1)
}

// shape returns how a budget is best spent: slots batches at once (at
// most maxSlots) of lanes hashes (a power of two, at most maxLanes), the
// most hashes per second by perHash, the measured time per hash at each
// width; batches(l) is how many batches of l the budget holds. A width
// not measured is taken to be no faster: slots first, then the widest
// lanes they leave. Ties go to more lanes.
func shape(batches func(lanes int) int64, maxSlots, maxLanes int, perHash func(lanes int) (time.Duration, bool)) (slots, lanes int) {
	best := -1.0
	for l := 1; l <= maxLanes; l *= 2 {
		s := min(int64(maxSlots), batches(l))
		if s < 1 {
			break
		}
		score := float64(s)
		if d, ok := perHash(l); ok && d > 0 {
			score /= float64(d)
		}
		if score >= best {
			best, slots, lanes = score, int(s), l
		}
	}
	return slots, lanes
}

// memory is a Verifier's scrypt budget: each batch takes every byte its
// KeyBatch will allocate before it computes and gives them back after,
// and the pool keeps idle no more than the most in use at once, so in
// use and idle stay within it. It takes no lock.
type memory struct {
	total int64 // the budget; 0: none (nothing taken)
	free  atomic.Int64
	freed atomic.Pointer[chan struct{}] // closed by a give, then replaced
}

func newMemory(total int64) *memory {
	m := &memory{total: total}
	m.free.Store(total)
	freed := make(chan struct{})
	m.freed.Store(&freed)
	return m
}

// fits refuses a stored hash one job of which, computed at one lane,
// takes more than the budget, before anything is allocated.
func (v *Verifier) fits(h *hash) error {
	if b, total := jobBytes(h.logN, h.r, h.p, len(h.key)), v.mem().total; total > 0 && b > total {
		return fmt.Errorf("%w: one scrypt job at logN=%d, r=%d, p=%d takes %d bytes, over Options.ScryptMemory %d",
			ErrInvalidHash, h.logN, h.r, h.p, b, total)
	}
	return nil
}

// take waits until n bytes (at most total) are free, takes them, and
// returns the call that gives them back.
func (m *memory) take(n int64) (give func()) {
	for {
		// The channel before the count: a give that comes after the count
		// was read closes this channel, or one replaced meanwhile.
		freed := *m.freed.Load()
		free := m.free.Load()
		if free < n {
			<-freed
			continue
		}
		if m.free.CompareAndSwap(free, free-n) {
			return func() {
				m.free.Add(n)
				next := make(chan struct{})
				close(*m.freed.Swap(&next))
			}
		}
	}
}

// reserve takes from the budget what keys, a batch of one class, take
// (scrypt.KeyBatchBytes), and returns how: lanes mixed at a time, per
// jobs to KeyBatch at a time, and release, which gives the bytes back.
// The lanes are the shape's, fewer where its share holds fewer of the
// class's; per is all the jobs unless their PBKDF2 outputs would pass
// the budget.
func (v *Verifier) reserve(keys []scrypt.Job) (lanes, per int, release func()) {
	m := v.mem() // sizes, and shapes, at the first computation
	sh := v.shape.Load()
	lanes, per = sh.lanes, len(keys)
	if m.total == 0 {
		return lanes, per, func() {}
	}
	share := m.total // what one batch may take: a slot's share once final
	if sh.final {
		share /= int64(sh.slots)
	}
	need := func(per, lanes int) int64 { return scrypt.KeyBatchBytes(keys[:per], lanes) }
	for lanes > 1 && need(min(per, lanes), lanes) > share {
		lanes /= 2
	}
	n := need(per, lanes)
	for n > m.total && (per > 1 || lanes > 1) { // fits let one job at one lane in
		if per > 1 {
			per--
		} else {
			lanes /= 2
		}
		n = need(per, lanes)
	}
	return lanes, per, m.take(n)
}

// releaseLater releases the scrypt buffers once the Verifier has had
// nothing to compute for bufferIdle (see Options.MaxConcurrent).
func (v *Verifier) releaseLater() { v.quiet.Reset(bufferIdle) }

// bufferIdle is how long the Verifier keeps idle scrypt buffers.
const bufferIdle = 30 * time.Second

// releaseIfQuiet drops the idle scrypt buffers unless work is under way,
// and then looks again later: that work may end without a batch.
func (v *Verifier) releaseIfQuiet() {
	if running, waiting := v.sched.Load(); running == 0 && waiting == 0 {
		v.pool.Release()
		return
	}
	v.releaseLater()
}
