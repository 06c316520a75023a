package verify

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/scrypt"
)

// The scrypt memory budget (Options.ScryptMemory), in the order its
// parts run: the shape New chooses, the budget batches take bytes from,
// the lanes of each batch, and the release of idle buffers.

// DefaultScryptMemory binds past 2 cores with AVX-512, 8 with AVX2: New
// then takes the slots and lanes that compute fastest within it.
const DefaultScryptMemory int64 = 1 << 30

// slotsAndLanes chooses the Verifier's slots and lanes for its budget at
// Options.Params. Where the budget binds (it holds fewer than
// MaxConcurrent × scrypt.Lanes() lanes) and the widest batch it allows
// has not been measured in this process, it computes one such batch of
// throwaway hashes first (probe), so that the choice rests on this CPU's
// kernels rather than on an assumption.
func (v *Verifier) slotsAndLanes() (slots, lanes int) {
	p := v.opts.Params
	N := 1 << p.LogN
	buffers := v.mem.total / lane(p.LogN, p.R)
	widest := int(min(int64(v.lanes), buffers))
	for widest&(widest-1) != 0 {
		widest--
	}
	if _, measured := scrypt.PerHash(N, p.R, widest); !measured && buffers < int64(v.opts.MaxConcurrent*v.lanes) {
		v.probe(widest)
	}
	perHash := func(l int) (best time.Duration, ok bool) {
		for w := 1; w <= l; w *= 2 { // a batch of l can run any narrower kernel
			if d, measured := scrypt.PerHash(N, p.R, w); measured && (!ok || d < best) {
				best, ok = d, true
			}
		}
		return best, ok
	}
	return shape(buffers, v.opts.MaxConcurrent, v.lanes, perHash)
}

// probe computes n throwaway hashes at Options.Params in one batch, in
// the Verifier's pool and within its budget: the scrypt package times
// every kernel that fits on their first segments (about 0.2 s of one
// core at k3s's parameters). Their buffers are released after.
func (v *Verifier) probe(n int) {
	p := v.opts.Params
	jobs := make([]scrypt.Job, n)
	for i := range jobs {
		jobs[i] = scrypt.Job{Password: []byte{byte(i)}, Salt: []byte("nodepass probe"), N: 1 << p.LogN, R: p.R, P: 1, KeyLen: 16}
	}
	v.pool.KeyBatch(jobs, n)
	v.pool.Release()
}

// shape returns how a budget of buffers lanes' buffers is best spent:
// slots batches at once (at most maxSlots), each of at most lanes hashes
// (a power of two, at most maxLanes), the most hashes per second by the
// time per hash measured for each lane count (perHash, from the scrypt
// package's kernel measurements). Where nothing is measured, a wider
// kernel is taken to be no faster per hash: slots come first, then the
// widest lanes the budget leaves them. Ties go to more lanes.
func shape(buffers int64, maxSlots, maxLanes int, perHash func(lanes int) (time.Duration, bool)) (slots, lanes int) {
	best := -1.0
	for l := 1; l <= maxLanes; l *= 2 {
		s := min(int64(maxSlots), buffers/int64(l))
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

// memory is a Verifier's scrypt budget (Options.ScryptMemory): each batch
// takes the bytes of the buffers it will hold before it computes and
// gives them back after, so the bytes in use never pass the budget; its
// pool keeps idle no more than the most in use at once, so in use and
// idle together stay within it too. It is safe for concurrent use and
// takes no lock: free is taken by compare-and-swap, and a batch short of
// bytes waits for the next give.
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

// fits refuses a stored hash one job of which (one lane and its PBKDF2
// output) needs more than the budget, before anything is allocated.
func (v *Verifier) fits(h *hash) error {
	if b := jobBytes(h.logN, h.r, h.p); v.mem.total > 0 && b > v.mem.total {
		return fmt.Errorf("%w: one scrypt lane and PBKDF2's output count %d bytes, 128·r·N and 128·(r+1)·p past 256·r (logN=%d, r=%d, p=%d), over Options.ScryptMemory %d",
			ErrInvalidHash, b, h.logN, h.r, h.p, v.mem.total)
	}
	return nil
}

// take waits until n bytes (at most total) are free, takes them, and
// returns the call that gives them back. Every batch gives back what it
// took when it ends, so take waits for running batches only.
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

// reserve takes from the budget what keys, a batch of one class, hold at
// once, and returns how: lanes hashes mixed at a time, per jobs to
// scrypt.KeyBatch at a time (all of them, unless their PBKDF2 outputs
// would pass the budget), and release, which gives the bytes back.
func (v *Verifier) reserve(keys []scrypt.Job) (lanes, per int, release func()) {
	logN, r, p := log2(keys[0].N), keys[0].R, keys[0].P
	lanes, per = v.lanesFor(logN, r), len(keys)
	if v.mem.total == 0 {
		return lanes, per, func() {}
	}
	// What per jobs hold, mixed lanes at a time.
	need := func(per, lanes int) int64 {
		n := min(lanes, per*p)
		for n&(n-1) != 0 { // scrypt mixes a power of two at a time
			n--
		}
		return int64(n)*lane(logN, r) + int64(per)*pbkdf2Counted(r, p)
	}
	for need(per, lanes) > v.mem.total && (per > 1 || lanes > 1) { // fits let one job at one lane in
		if per > 1 {
			per--
		} else {
			lanes /= 2
		}
	}
	return lanes, per, v.mem.take(need(per, lanes))
}

// log2 is the exponent of n, a power of two.
func log2(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}

// lanesFor is how many lanes a batch at (N = 2^logN, r) computes at
// once: the Verifier's lanes, fewer when one slot's share of the budget
// holds fewer buffers of that size (hashes stored with larger
// parameters), at least one.
func (v *Verifier) lanesFor(logN, r int) int {
	l := v.lanes
	if v.mem.total > 0 {
		share := v.mem.total / int64(v.slots)
		for l > 1 && int64(l)*lane(logN, r) > share {
			l /= 2
		}
	}
	return l
}

// lane is what one scrypt lane at (N = 2^logN, r) counts against the
// budget: its V, 128·r·N bytes. Its buffer also holds two working blocks
// (256·r bytes: 0.006% more at k3s's parameters), which the budget leaves
// out so that a round budget holds round numbers of lanes (1 GiB: 32 of
// k3s's, not 31).
func lane(logN, r int) int64 { return 128 * int64(r) << logN }

// jobBytes is what the budget counts of one job at one lane: the lane and
// its PBKDF2 output.
func jobBytes(logN, r, p int) int64 { return lane(logN, r) + pbkdf2Counted(r, p) }

// pbkdf2Counted is what the budget counts of a job's PBKDF2 output
// (pbkdf2Bytes): what passes 256·r bytes, as much as the working blocks
// lane leaves out. At p = 1 that is nothing, so a budget of slots × lanes
// lanes lets every slot's batch run at once; a tampered hash's large p
// counts almost whole.
func pbkdf2Counted(r, p int) int64 { return max(0, pbkdf2Bytes(r, p)-256*int64(r)) }

// releaseLater releases the scrypt buffers once the Verifier has had
// nothing to compute for bufferIdle (see Options.MaxConcurrent).
func (v *Verifier) releaseLater() { v.quiet.Reset(bufferIdle) }

// bufferIdle is how long the Verifier keeps idle scrypt buffers.
const bufferIdle = 30 * time.Second

// releaseIfQuiet drops the idle scrypt buffers unless work is under way;
// then it looks again bufferIdle later, since that work may end without
// a batch to re-arm the timer (an enrollment whose read fails, say).
func (v *Verifier) releaseIfQuiet() {
	if running, waiting := v.sched.Load(); running == 0 && waiting == 0 {
		v.pool.Release()
		return
	}
	v.releaseLater()
}
