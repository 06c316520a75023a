package scrypt

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"iter"
	"math"
	"time"

	"golang.org/x/crypto/pbkdf2"
)

const maxInt = math.MaxInt

// check returns the error golang.org/x/crypto/scrypt.Key returns for these
// parameters, in the same order of tests, or nil.
func check(N, r, p int) error {
	if N <= 1 || N&(N-1) != 0 {
		return errBadN
	}
	if r <= 0 || p <= 0 {
		return errNotPositive
	}
	if uint64(r)*uint64(p) >= 1<<30 || r > maxInt/128/p || r > maxInt/256 || N > maxInt/128/r {
		return errTooLarge
	}
	return nil
}

var (
	errBadN        = errors.New("scrypt: N must be > 1 and a power of 2")
	errNotPositive = errors.New("scrypt: parameters must be > 0")
	errTooLarge    = errors.New("scrypt: parameters are too large")
)

// Key derives a key from the password, salt, and cost parameters, returning
// a byte slice of length keyLen that can be used as cryptographic key.
//
// N is a CPU/memory cost parameter, which must be a power of two greater
// than 1. r and p must satisfy r * p < 2³⁰. If the parameters do not satisfy
// the limits, the function returns a nil byte slice and an error (also
// for r or p ≤ 0, on which x/crypto v0.47.0 panics). A keyLen ≤ 0 goes to
// x/crypto's PBKDF2 as in golang.org/x/crypto/scrypt.Key: at v0.47.0 it
// gives an empty key for 0 and panics below; newer releases panic on both.
//
// Key takes its working memory from the package's Pool, one buffer of
// 128·r·(N+2) bytes per lane: with p ≥ 2 it computes up to [Lanes] of
// the p independent mixes at a time.
func Key(password, salt []byte, N, r, p, keyLen int) ([]byte, error) {
	if err := check(N, r, p); err != nil {
		return nil, err
	}
	b := pbkdf2.Key(password, salt, 1, p*128*r, sha256.New)
	mixAll(&shared, lanes, N, r, appendBlocks(make([][]byte, 0, p), b, r))
	k := pbkdf2.Key(password, b, 1, keyLen, sha256.New)
	clear(b)
	return k, nil
}

// Job is one key derivation for [KeyBatch]: the inputs of [Key], and the
// fields KeyBatch fills in.
type Job struct {
	Password, Salt  []byte
	N, R, P, KeyLen int

	// Key and Err are the results: what Key(Password, Salt, N, R, P, KeyLen)
	// returns.
	Key []byte
	Err error
}

// KeyBatch computes every job's key in the calling goroutine, as [Key]
// would, and stores it in the job's Key and Err fields. Jobs are
// independent and may have different parameters; the mixes of jobs that
// share N and R are computed [Lanes] at a time, which is where the batch is
// faster than as many calls to Key. A job whose parameters Key rejects gets
// Key's error and does not affect the others; a KeyLen ≤ 0 does what it
// does in Key.
//
// KeyBatch holds at most [Lanes] buffers of 128·R·(N+2) bytes at a time,
// from the package's Pool, taking the (N, R) groups in turn, and
// allocates at most [KeyBatchBytes] in all.
func KeyBatch(jobs []Job) { shared.KeyBatch(jobs, lanes) }

// KeyBatch is the package's KeyBatch with p's buffers, computing at most
// maxLanes mixes at a time (at least 1, at most [Lanes]; a power of two
// below it is taken): it holds at most that many buffers of 128·R·(N+2)
// bytes at once, whatever the jobs' P, and allocates at most
// KeyBatchBytes(jobs, maxLanes). Fewer lanes than Lanes() give the same
// keys, at the speed of the narrower kernels.
func (p *Pool) KeyBatch(jobs []Job, maxLanes int) {
	maxLanes = min(max(maxLanes, 1), lanes)
	for i := range jobs {
		j := &jobs[i]
		j.Key, j.Err = nil, check(j.N, j.R, j.P)
	}
	defer p.hold(heldBytes(jobs))()
	bs := make([][]byte, len(jobs))
	for i := range jobs {
		if j := &jobs[i]; j.Err == nil {
			bs[i] = pbkdf2.Key(j.Password, j.Salt, 1, j.P*128*j.R, sha256.New)
		}
	}
	for first, n := range groups(jobs) {
		N, r := jobs[first].N, jobs[first].R
		blocks := make([][]byte, 0, n)
		for k := first; k < len(jobs); k++ {
			if j := &jobs[k]; j.Err == nil && j.N == N && j.R == r {
				blocks = appendBlocks(blocks, bs[k], r)
			}
		}
		mixAll(p, maxLanes, N, r, blocks)
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Err == nil {
			j.Key = pbkdf2.Key(j.Password, bs[i], 1, j.KeyLen, sha256.New)
			clear(bs[i])
		}
	}
}

// KeyBatchBytes returns the most bytes of memory that
// p.KeyBatch(jobs, maxLanes) allocates, on any Pool, with no idle buffer
// to reuse: each group's buffers, and the scratch of any kernel that may
// run on them, PBKDF2's outputs and the keys, with what the Go heap
// rounds each allocation up to (see [Pool] for what it bounds).
func KeyBatchBytes(jobs []Job, maxLanes int) int64 {
	maxLanes = min(max(maxLanes, 1), lanes)
	n := heldBytes(jobs)
	for first, blocks := range groups(jobs) {
		n = addBytes(n, mixBytes(jobs[first].N, jobs[first].R, blocks, maxLanes))
	}
	return n
}

// groups yields each group of valid jobs that share (N, R), in order of
// first appearance, as the index of its first job and its number of
// blocks (the sum of its jobs' P).
func groups(jobs []Job) iter.Seq2[int, int] {
	return func(yield func(first, blocks int) bool) {
	next:
		for i := range jobs {
			j := &jobs[i]
			if check(j.N, j.R, j.P) != nil {
				continue
			}
			for k := range i {
				if o := &jobs[k]; o.N == j.N && o.R == j.R && check(o.N, o.R, o.P) == nil {
					continue next // not the first of its group
				}
			}
			blocks := 0
			for k := i; k < len(jobs); k++ {
				if o := &jobs[k]; o.N == j.N && o.R == j.R && check(o.N, o.R, o.P) == nil {
					blocks += o.P
				}
			}
			if !yield(i, blocks) {
				return
			}
		}
	}
}

// heldBytes is what KeyBatch allocates for jobs besides its Pool's
// buffers and scratch: each valid job's PBKDF2 output, key and HMAC
// states, the slices of jobs and blocks, and a batch's own state.
func heldBytes(jobs []Job) int64 {
	n := batchState + heapBytes(24*int64(len(jobs)))
	for _, blocks := range groups(jobs) {
		n = addBytes(n, heapBytes(24*int64(blocks)))
	}
	for i := range jobs {
		j := &jobs[i]
		if check(j.N, j.R, j.P) != nil {
			continue
		}
		keyLen := int64(max(j.KeyLen, 0)+31) &^ 31 // PBKDF2 makes whole 32-byte blocks
		n = addBytes(n, heapBytes(128*int64(j.R)*int64(j.P))+heapBytes(keyLen)+2*hmacState)
	}
	return n
}

// hmacState bounds what one PBKDF2 call allocates besides its output
// (HMAC-SHA256's state: about 850 bytes with Go 1.26), and batchState
// what a batch allocates once besides its jobs: its work, the timer that
// clears its buffers, and the record of a class of work seen for the
// first time (with the process's first, the table of all 64).
const (
	hmacState  = 1 << 10
	batchState = 8 << 10
)

// mixBytes is what mixAll takes from its Pool for a group of blocks
// blocks at (N, r), at most most at a time: a buffer per block mixed at
// once, and the scratch of the kernel that needs the most of any that
// may run on them.
func mixBytes(N, r, blocks, most int) int64 {
	n := min(most, blocks)
	for n&(n-1) != 0 {
		n--
	}
	var scratch int64
	for _, k := range kernels {
		if n%k.lanes() == 0 && k.fits(N) && k.scratch(r) > 0 {
			scratch = max(scratch, bufferBytes(int64(k.scratch(r))))
		}
	}
	words := mulBytes(32*int64(r), int64(N)+2)
	if words > math.MaxInt64/8 { // past any machine's memory, and 4·words with it
		return math.MaxInt64
	}
	return addBytes(mulBytes(int64(n), bufferBytes(words)), scratch)
}

// addBytes and mulBytes add and multiply byte counts, at most
// math.MaxInt64: a count that large is past any budget.
func addBytes(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func mulBytes(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// appendBlocks appends the 128·r-byte blocks of b to blocks.
func appendBlocks(blocks [][]byte, b []byte, r int) [][]byte {
	for off := 0; off < len(b); off += 128 * r {
		blocks = append(blocks, b[off:off+128*r])
	}
	return blocks
}

// mixAll runs SMix on every 128·r-byte block of blocks in place, up to
// most blocks at a time (1 to Lanes()), with at most that many buffers
// from pool, and the scratch of the kernel that runs.
func mixAll(pool *Pool, most, N, r int, blocks [][]byte) {
	R := 32 * r
	size := R * (N + 2)
	var bufs [maxLanes][]uint32
	var set [maxLanes][]byte
	w := &work{r: r, N: N, pool: pool} // one for every smix of the call, and its scratch with it
	// The buffers go back even after a panic: the pool counts them in use
	// until then.
	defer func() {
		for _, b := range bufs {
			if b != nil {
				pool.put(b)
			}
		}
		if w.scratch != nil {
			pool.put(w.scratch)
		}
	}()
	for len(blocks) > 0 {
		n := min(most, len(blocks))
		for n&(n-1) != 0 { // the kernels take a power of two
			n--
		}
		for k := range n {
			if bufs[k] == nil {
				bufs[k] = pool.get(size)
			}
			set[k] = blocks[k]
		}
		w.smix(&set, &bufs, n)
		blocks = blocks[n:]
	}
}

// load sets the permuted words of dst from the little-endian block b.
func load(dst []uint32, b []byte) {
	for k := 0; k < len(dst); k += 16 {
		d := dst[k : k+16]
		s := b[4*k : 4*k+64]
		for i, w := range layout {
			d[i] = binary.LittleEndian.Uint32(s[4*w:])
		}
	}
}

// store writes the permuted words of src to b as a little-endian block.
func store(b []byte, src []uint32) {
	for k := 0; k < len(src); k += 16 {
		s := src[k : k+16]
		d := b[4*k : 4*k+64]
		for i, w := range layout {
			binary.LittleEndian.PutUint32(d[4*w:], s[i])
		}
	}
}

// smix runs SMix (ROMix with BlockMix over Salsa20/8) in place on each of
// the n ≤ maxLanes 128·r-byte blocks bs[:n], in lockstep; bufs[k]
// (32·r·(N+2) words) holds V and the two working blocks of bs[k]. While
// the class's kernel is being chosen, the second loop runs in segments,
// each timed on one candidate (see choose.go).
func (w *work) smix(bs *[maxLanes][]byte, bufs *[maxLanes][]uint32, n int) {
	r, N := w.r, w.N
	R := 32 * r
	w.n = n
	for k := range maxLanes {
		if k >= n {
			w.v[k], w.x[k], w.y[k] = nil, nil, nil
			continue
		}
		w.v[k] = bufs[k][:R*N]
		w.x[k] = bufs[k][R*N : R*N+R]
		w.y[k] = bufs[k][R*N+R : R*N+2*R]
		load(w.v[k][:R], bs[k])
	}
	ch := choiceFor(class{N: N, r: r, n: n})
	ch.best().first(w)
	seg := max(1, segmentCores/(4*r*n)) // iterations of the second loop per timed segment
	for i := 0; i < N/2; {
		kern, timed := ch.segment()
		iters := N/2 - i
		if timed {
			iters = min(iters, seg)
		}
		kern.enter(w) // untimed: the kernel's layout is no part of its speed
		var start time.Time
		if timed {
			start = time.Now()
		}
		kern.second(w, iters)
		if timed {
			ch.record(kern, iters, time.Since(start))
		}
		i += iters
	}
	kernelGeneric.enter(w) // the working blocks back in x, where store reads them
	for k := range n {
		store(bs[k], w.x[k])
	}
}

// work is one smix computation of n hashes: each hash's V and working
// blocks x and y (its buffer), and the scratch where a kernel may keep
// the working blocks instead (sliced set; see kernel.enter). Kept from
// one smix to the next, it allocates nothing per call.
type work struct {
	pool    *Pool // where the scratch comes from
	n, r, N int
	v, x, y [maxLanes][]uint32
	scratch []uint32
	sliced  bool
	vp      [maxLanes]*uint32 // the word-sliced kernel's pointers to V (vPointers)
}

// firstMix runs SMix's first loop with kernel k's BlockMix: V[i+1] =
// BlockMix(V[i]) written straight into V, then x = BlockMix(V[N-1]).
func (w *work) firstMix(k kernel) {
	R := 32 * w.r
	var out, in [maxLanes][]uint32
	for i := 0; i < w.N-1; i++ {
		for l := range w.n {
			out[l], in[l] = w.v[l][(i+1)*R:(i+2)*R], w.v[l][i*R:(i+1)*R]
		}
		k.mix(&out, &in, nil, w.n, w.r)
	}
	for l := range w.n {
		in[l] = w.v[l][(w.N-1)*R:]
	}
	k.mix(&w.x, &in, nil, w.n, w.r)
}

// secondMix runs iters iterations of SMix's second loop with kernel k's
// BlockMix, two BlockMix calls each: y = BlockMix(x ⊕ V[j]), then x =
// BlockMix(y ⊕ V[j']), j and j' from Integerify.
func (w *work) secondMix(k kernel, iters int) {
	R, mask := 32*w.r, uint64(w.N-1)
	var xv [maxLanes][]uint32
	for range iters {
		for l := range w.n {
			j := int(integerify(w.x[l], w.r) & mask)
			xv[l] = w.v[l][j*R : (j+1)*R]
		}
		k.mix(&w.y, &w.x, &xv, w.n, w.r)
		for l := range w.n {
			j := int(integerify(w.y[l], w.r) & mask)
			xv[l] = w.v[l][j*R : (j+1)*R]
		}
		k.mix(&w.x, &w.y, &xv, w.n, w.r)
	}
}

// Lanes returns how many independent SMix computations (one per
// 128·r-byte block: p per key) the widest kernel of this CPU computes
// together: 16 on amd64 with AVX-512, 4 with AVX2, 2 on other amd64, 1
// with pure Go (other architectures, gccgo, -tags purego).
func Lanes() int { return lanes }
