package scrypt

import "math/bits"

// Blocks live in memory in a permuted word order so that SIMD code can run
// Salsa20 on whole registers: the 64-byte block of Salsa20 words x0..x15 is
// stored as the four diagonals of its 4×4 matrix,
//
//	x0 x5 x10 x15 | x4 x9 x14 x3 | x8 x13 x2 x7 | x12 x1 x6 x11
//
// so stored word k is Salsa20 word layout[k]. The permutation is applied
// when a block enters smix and undone when it leaves; BlockMix, the XOR with
// V and the copies do not care about word order, and integerify reads
// stored words 0 (x0) and 13 (x1) of the last block.
var layout = [16]int{0, 5, 10, 15, 4, 9, 14, 3, 8, 13, 2, 7, 12, 1, 6, 11}

// integerify returns Integerify(B) of a permuted 32·r-word block.
func integerify(b []uint32, r int) uint64 {
	last := b[(2*r-1)*16:]
	return uint64(last[0]) | uint64(last[13])<<32
}

// blockMixGeneric sets out to BlockMix(in), or to BlockMix(in ⊕ v) when v is
// not nil; all three hold 32·r words in permuted order and out overlaps
// neither in nor v.
func blockMixGeneric(out, in, v []uint32, r int) {
	n := 32 * r
	in = in[:n]
	out = out[:n]
	var t [16]uint32
	copy(t[:], in[n-16:])
	if v != nil {
		v = v[:n]
		for k, w := range v[n-16:] {
			t[k] ^= w
		}
	}
	for i := 0; i < 2*r; i++ {
		// Even input blocks go to the first half of out, odd ones to the
		// second half.
		o := (i / 2) * 16
		if i&1 == 1 {
			o += 16 * r
		}
		var vb []uint32
		if v != nil {
			vb = v[i*16 : i*16+16]
		}
		salsaXOR(&t, in[i*16:i*16+16], vb, out[o:o+16])
	}
}

// salsaXOR sets t to Salsa20/8(t ⊕ in ⊕ v) (v may be nil) and copies it to
// out; every block is in permuted order.
func salsaXOR(t *[16]uint32, in, v, out []uint32) {
	_ = in[15]
	_ = out[15]
	// Stored word k is Salsa20 word layout[k].
	w0, w5, w10, w15 := t[0]^in[0], t[1]^in[1], t[2]^in[2], t[3]^in[3]
	w4, w9, w14, w3 := t[4]^in[4], t[5]^in[5], t[6]^in[6], t[7]^in[7]
	w8, w13, w2, w7 := t[8]^in[8], t[9]^in[9], t[10]^in[10], t[11]^in[11]
	w12, w1, w6, w11 := t[12]^in[12], t[13]^in[13], t[14]^in[14], t[15]^in[15]
	if v != nil {
		_ = v[15]
		w0, w5, w10, w15 = w0^v[0], w5^v[1], w10^v[2], w15^v[3]
		w4, w9, w14, w3 = w4^v[4], w9^v[5], w14^v[6], w3^v[7]
		w8, w13, w2, w7 = w8^v[8], w13^v[9], w2^v[10], w7^v[11]
		w12, w1, w6, w11 = w12^v[12], w1^v[13], w6^v[14], w11^v[15]
	}
	x0, x1, x2, x3 := w0, w1, w2, w3
	x4, x5, x6, x7 := w4, w5, w6, w7
	x8, x9, x10, x11 := w8, w9, w10, w11
	x12, x13, x14, x15 := w12, w13, w14, w15
	for range 4 {
		// Columns.
		x4 ^= bits.RotateLeft32(x0+x12, 7)
		x8 ^= bits.RotateLeft32(x4+x0, 9)
		x12 ^= bits.RotateLeft32(x8+x4, 13)
		x0 ^= bits.RotateLeft32(x12+x8, 18)

		x9 ^= bits.RotateLeft32(x5+x1, 7)
		x13 ^= bits.RotateLeft32(x9+x5, 9)
		x1 ^= bits.RotateLeft32(x13+x9, 13)
		x5 ^= bits.RotateLeft32(x1+x13, 18)

		x14 ^= bits.RotateLeft32(x10+x6, 7)
		x2 ^= bits.RotateLeft32(x14+x10, 9)
		x6 ^= bits.RotateLeft32(x2+x14, 13)
		x10 ^= bits.RotateLeft32(x6+x2, 18)

		x3 ^= bits.RotateLeft32(x15+x11, 7)
		x7 ^= bits.RotateLeft32(x3+x15, 9)
		x11 ^= bits.RotateLeft32(x7+x3, 13)
		x15 ^= bits.RotateLeft32(x11+x7, 18)

		// Rows.
		x1 ^= bits.RotateLeft32(x0+x3, 7)
		x2 ^= bits.RotateLeft32(x1+x0, 9)
		x3 ^= bits.RotateLeft32(x2+x1, 13)
		x0 ^= bits.RotateLeft32(x3+x2, 18)

		x6 ^= bits.RotateLeft32(x5+x4, 7)
		x7 ^= bits.RotateLeft32(x6+x5, 9)
		x4 ^= bits.RotateLeft32(x7+x6, 13)
		x5 ^= bits.RotateLeft32(x4+x7, 18)

		x11 ^= bits.RotateLeft32(x10+x9, 7)
		x8 ^= bits.RotateLeft32(x11+x10, 9)
		x9 ^= bits.RotateLeft32(x8+x11, 13)
		x10 ^= bits.RotateLeft32(x9+x8, 18)

		x12 ^= bits.RotateLeft32(x15+x14, 7)
		x13 ^= bits.RotateLeft32(x12+x15, 9)
		x14 ^= bits.RotateLeft32(x13+x12, 13)
		x15 ^= bits.RotateLeft32(x14+x13, 18)
	}
	x0 += w0
	x1 += w1
	x2 += w2
	x3 += w3
	x4 += w4
	x5 += w5
	x6 += w6
	x7 += w7
	x8 += w8
	x9 += w9
	x10 += w10
	x11 += w11
	x12 += w12
	x13 += w13
	x14 += w14
	x15 += w15
	t[0], t[1], t[2], t[3] = x0, x5, x10, x15
	t[4], t[5], t[6], t[7] = x4, x9, x14, x3
	t[8], t[9], t[10], t[11] = x8, x13, x2, x7
	t[12], t[13], t[14], t[15] = x12, x1, x6, x11
	copy(out, t[:])
}
