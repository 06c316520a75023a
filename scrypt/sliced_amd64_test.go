//go:build amd64 && gc && !purego

package scrypt

func init() { loopMixes[kernelSliced16] = mixSliced }

// mixSliced is one BlockMix call of the word-sliced kernel for each
// group of 16 hashes, as kernel.mix is for the others.
func mixSliced(out, in, v *[maxLanes][]uint32, n, r int) {
	s := alignedWords(slicedWords(r))
	for l := 0; l < n; l += slicedHashes {
		var i, o [maxLanes][]uint32
		var p [16]*uint32
		copy(i[:], in[l:])
		copy(o[:], out[l:])
		sliceIn(s, &i, r)
		if v == nil {
			for h := range p {
				p[h] = &i[h][0] // not written: one call writes no V
			}
			slicedLoop1(&s[0], &p, r, 1)
		} else {
			for h := range p {
				p[h] = &v[l+h][0]
			}
			slicedLoop2(&s[0], &p, r, 0, 1) // j = 0: V[0] is v
		}
		sliceOut(&o, s[2*r*256:], r) // one call: the result is in Y
	}
	clear(s)
}
