package scrypt

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"time"

	"golang.org/x/crypto/pbkdf2"
)

const maxInt = math.MaxInt

// check returns the error golang.org/x/crypto/scrypt.Key returns for these
// parameters, in the same order of tests, or nil.
func check(N, r, p int) error {
	if N <= 1 || N&(N-1) != 0 {
		return errors.New("scrypt: N must be > 1 and a power of 2")
	}
	if r <= 0 || p <= 0 {
		return errors.New("scrypt: parameters must be > 0")
	}
	if uint64(r)*uint64(p) >= 1<<30 || r > maxInt/128/p || r > maxInt/256 || N > maxInt/128/r {
		return errors.New("scrypt: parameters are too large")
	}
	return nil
}

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
// Key and golang.org/x/crypto/scrypt.Key have the same contract: the same
// output for every input and the same errors for the same parameters. Key
// takes its working memory (128·r·(N+2) bytes per lane, see [Lanes]) from
// the package's buffer pool (see the package doc for when it is cleared); with
// p ≥ 2 it computes up to Lanes() of the p independent mixes at a time
// (holding as many buffers). It is safe for concurrent use.
func Key(password, salt []byte, N, r, p, keyLen int) ([]byte, error) {
	if err := check(N, r, p); err != nil {
		return nil, err
	}
	b := pbkdf2.Key(password, salt, 1, p*128*r, sha256.New)
	mixAll(&shared, lanes, N, r, [][]byte{b})
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
// KeyBatch holds at most [Lanes] buffers of 128·R·(N+2) bytes at a time
// (fewer when the group has fewer blocks; the (N, R) groups are taken in
// turn), from the package's buffer pool (cleared as the package doc says). It
// is safe for concurrent use with other calls on other jobs.
func KeyBatch(jobs []Job) { shared.KeyBatch(jobs, lanes) }

// KeyBatch is the package's KeyBatch with p's buffers, computing at most
// maxLanes mixes at a time (at least 1, at most [Lanes]; a power of two
// below it is taken): it holds at most that many buffers of 128·R·(N+2)
// bytes at once, whatever the jobs' P. Fewer lanes than Lanes() give the
// same keys, at the speed of the narrower kernels.
func (p *Pool) KeyBatch(jobs []Job, maxLanes int) {
	maxLanes = min(max(maxLanes, 1), lanes)
	bs := make([][]byte, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		j.Key, j.Err = nil, check(j.N, j.R, j.P)
		if j.Err == nil {
			bs[i] = pbkdf2.Key(j.Password, j.Salt, 1, j.P*128*j.R, sha256.New)
		}
	}
	// Group the jobs by (N, r), in order of first appearance.
	done := make([]bool, len(jobs))
	var group [][]byte
	for i := range jobs {
		if done[i] || jobs[i].Err != nil {
			continue
		}
		N, r := jobs[i].N, jobs[i].R
		group = group[:0]
		for k := i; k < len(jobs); k++ {
			if !done[k] && jobs[k].Err == nil && jobs[k].N == N && jobs[k].R == r {
				done[k] = true
				group = append(group, bs[k])
			}
		}
		mixAll(p, maxLanes, N, r, group)
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Err == nil {
			j.Key = pbkdf2.Key(j.Password, bs[i], 1, j.KeyLen, sha256.New)
			clear(bs[i])
		}
	}
}

// mixAll runs SMix on every 128·r-byte block of every b in place, up to
// most blocks at a time (1 to Lanes()), with at most that many buffers
// from pool.
func mixAll(pool *Pool, most, N, r int, bs [][]byte) {
	R := 32 * r
	var blocks [][]byte
	for _, b := range bs {
		for off := 0; off < len(b); off += 4 * R {
			blocks = append(blocks, b[off:off+4*R])
		}
	}
	size := R * (N + 2)
	var bufs [maxLanes][]uint32
	var set [maxLanes][]byte
	w := &work{r: r, N: N} // one for every smix of the call, and its scratch with it
	defer clear(w.scratch)
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
	for _, b := range bufs {
		if b != nil {
			pool.put(b)
		}
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
// the n ≤ maxLanes 128·r-byte blocks bs[:n], in lockstep so that a kernel
// computes them together; bufs[k] (32·r·(N+2) words) holds V and the two
// working blocks of bs[k]. The kernel is the one chosen for the class
// (N, r, n); while it is being chosen, the second loop runs in segments,
// each timed on one candidate (see choose.go). w keeps its r, N and
// scratch from one call to the next, so that a key of many blocks
// allocates nothing per call.
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
// blocks x and y (its buffer), and the scratch a kernel may keep its own
// working blocks in. Between two loop calls, the working block of each
// hash is in x, or in the scratch with sliced set; a kernel's enter puts
// it where the kernel works on it.
type work struct {
	n, r, N int
	v, x, y [maxLanes][]uint32
	scratch []uint32
	sliced  bool
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
// with the pure-Go code (other architectures, gccgo, -tags purego). Each lane needs its
// own buffer of 128·r·(N+2) bytes while it runs, so a call to [Key] or
// [KeyBatch] holds at most Lanes() buffers.
func Lanes() int { return lanes }
