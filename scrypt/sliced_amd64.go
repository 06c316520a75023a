//go:build amd64 && gc && !purego

package scrypt

// The word-sliced kernel (sliced16) runs SMix's loops for 16 hashes in
// assembly (slicedLoop1, slicedLoop2), with its working blocks in a
// scratch area where each 64-byte row holds one word of the 16 hashes.
// V stays one buffer per hash, in the permuted word order of the other
// kernels, so that the chooser can switch kernels between segments: a
// segment starts by slicing each hash's x into the scratch and ends by
// putting it back.

// slicedWords is the scratch of the word-sliced kernel at r, in words:
// the working blocks X and Y (2·r·256 words each), the state the second
// loop's BlockMix starts from (256 words) and 16 pointers (32 words).
func slicedWords(r int) int { return 4*r*256 + 256 + 32 }

// scratchFor returns w's scratch for the word-sliced kernel, taking it
// from w's pool on first use; mixAll gives it back.
func (w *work) scratchFor() []uint32 {
	if w.scratch == nil {
		w.scratch = w.pool.get(slicedWords(w.r))
	}
	return w.scratch
}

// vPointers returns the address of each hash's V, in w: a new array
// each call would be a heap allocation each smix.
func (w *work) vPointers() *[slicedHashes]*uint32 {
	for l := range slicedHashes {
		w.vp[l] = &w.v[l][0]
	}
	return &w.vp
}

// slicedHashes is how many hashes the word-sliced kernel computes at once.
const slicedHashes = 16

// sliceIn sets the word-sliced block X of s from the 16 blocks b (32·r
// words each): word k of 64-byte block i of hash h goes to row 16·i+k,
// lane h. sliceOut does the reverse.
func sliceIn(s []uint32, b *[maxLanes][]uint32, r int) {
	for h := range slicedHashes {
		src := b[h][:32*r]
		for i, w := range src {
			s[16*i+h] = w
		}
	}
}

func sliceOut(b *[maxLanes][]uint32, s []uint32, r int) {
	for h := range slicedHashes {
		dst := b[h][:32*r]
		for i := range dst {
			dst[i] = s[16*i+h]
		}
	}
}

// toSliced moves w's working blocks from x into the scratch, unless they
// are there; toHashes moves them back.
func (w *work) toSliced() {
	if !w.sliced {
		sliceIn(w.scratchFor(), &w.x, w.r)
		w.sliced = true
	}
}

func (w *work) toHashes() {
	if w.sliced {
		sliceOut(&w.x, w.scratch, w.r)
		w.sliced = false
	}
}

// slicedFirst runs SMix's first loop on w's 16 hashes: from V[0], it
// writes V[1] to V[N-1] and leaves BlockMix(V[N-1]) in the scratch.
func (w *work) slicedFirst() {
	s := w.scratchFor()
	sliceIn(s, &w.v, w.r)
	slicedLoop1(&s[0], w.vPointers(), w.r, w.N) // N is even: the result is in X
	w.sliced = true
}

// slicedSecond runs iters iterations of SMix's second loop (2·iters
// BlockMix calls) on w's 16 hashes, in the scratch (see kernel.enter).
func (w *work) slicedSecond(iters int) {
	slicedLoop2(&w.scratch[0], w.vPointers(), w.r, uint64(w.N-1), 2*iters)
}
