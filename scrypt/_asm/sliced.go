package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The word-sliced kernel runs whole loops of SMix for 16 hashes at once,
// one 32-bit word of each hash per lane of a ZMM register: register k
// holds stored word k (see layout in salsa_generic.go) of the 16 hashes,
// so a Salsa20/8 round is adds, rotates and XORs of whole registers, with
// no shuffle at all. Its working blocks live in a scratch area in that
// form (a row of 64 bytes per word, 16 rows per 64-byte block of each
// hash):
//
//	X   2·r blocks of 1 KiB: the working block
//	Y   2·r blocks of 1 KiB: BlockMix's output, then swapped with X
//	X0  1 KiB: the state BlockMix starts from, in the second loop
//	tbl 16 pointers: each hash's V[j], in the second loop
//
// V stays one buffer per hash in the permuted word order of the other
// kernels: each 64-byte line of 16 hashes is transposed (4 stages of 16
// two-register shuffles) on its way in or out, and the other kernels can
// take over between two calls.
const (
	slicedHashes = 16
	// slicedPrefetch is how many lines of each hash's V[j] the second
	// loop prefetches ahead: at a call's start, the last line and the
	// first slicedPrefetch; at each pair, the pair slicedPrefetch lines
	// on. 4, 6, or all 16 at the start measured no faster (r = 8).
	slicedPrefetch = 2
)

// transpose16 returns the transpose of the 16×16 matrix of words in z:
// word w of register h becomes word h of register w.
func transpose16(z []VecVirtual) []VecVirtual {
	// Stage 1: pairs of dwords; stage 2: pairs of qwords. q[g][c] holds,
	// in 128-bit lane L, word 4·L+c of rows 4·g to 4·g+3.
	var q [4][4]VecVirtual
	for g := range 4 {
		var lo, hi [2]VecVirtual
		for p := range 2 {
			a, b := z[4*g+2*p], z[4*g+2*p+1]
			lo[p], hi[p] = ZMM(), ZMM()
			VPUNPCKLDQ(b, a, lo[p])
			VPUNPCKHDQ(b, a, hi[p])
		}
		for c, src := range [][2]VecVirtual{lo, lo, hi, hi} {
			q[g][c] = ZMM()
			if c%2 == 0 {
				VPUNPCKLQDQ(src[1], src[0], q[g][c])
			} else {
				VPUNPCKHQDQ(src[1], src[0], q[g][c])
			}
		}
	}
	// Stages 3 and 4: a 4×4 transpose of 128-bit lanes for each c.
	out := make([]VecVirtual, 16)
	for c := range 4 {
		var u [4]VecVirtual
		for i := range u {
			u[i] = ZMM()
		}
		VSHUFI32X4(U8(0x44), q[1][c], q[0][c], u[0])
		VSHUFI32X4(U8(0xee), q[1][c], q[0][c], u[1])
		VSHUFI32X4(U8(0x44), q[3][c], q[2][c], u[2])
		VSHUFI32X4(U8(0xee), q[3][c], q[2][c], u[3])
		for i, s := range []struct {
			imm  uint8
			a, b VecVirtual
		}{{0x88, u[0], u[2]}, {0xdd, u[0], u[2]}, {0x88, u[1], u[3]}, {0xdd, u[1], u[3]}} {
			out[4*i+c] = ZMM()
			VSHUFI32X4(U8(s.imm), s.b, s.a, out[4*i+c])
		}
	}
	return out
}

// slicedSalsa emits the eight rounds of Salsa20/8 on x, the registers of
// stored words 0-15 (stored word k is Salsa20 word layout[k]).
func slicedSalsa(x []VecVirtual) {
	layout := [16]int{0, 5, 10, 15, 4, 9, 14, 3, 8, 13, 2, 7, 12, 1, 6, 11}
	var w [16]VecVirtual // by Salsa20 word
	for k, s := range layout {
		w[s] = x[k]
	}
	t := [4]VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}
	// Each quarter round is four steps b ^= (a + d) <<< rot; the four
	// quarter rounds of a half round are independent and go step by step.
	type step struct{ b, a, d int }
	quarter := func(qs [4][4]step) {
		for s, rot := range []uint8{7, 9, 13, 18} {
			for q := range qs {
				st := qs[q][s]
				VPADDD(w[st.d], w[st.a], t[q])
				VPROLD(U8(rot), t[q], t[q])
				VPXORD(t[q], w[st.b], w[st.b])
			}
		}
	}
	col := func(a, b, c, d int) [4]step {
		return [4]step{{b, a, d}, {c, b, a}, {d, c, b}, {a, d, c}}
	}
	for range 4 {
		quarter([4][4]step{col(0, 4, 8, 12), col(5, 9, 13, 1), col(10, 14, 2, 6), col(15, 3, 7, 11)})
		quarter([4][4]step{col(0, 1, 2, 3), col(5, 6, 7, 4), col(10, 11, 8, 9), col(15, 12, 13, 14)})
	}
}

// row is the address of row k (stored word k) of the word-sliced block
// at p+d.
func row(p GPVirtual, d, k int) Mem { return Mem{Base: p, Disp: d + 64*k} }

// slicedLoop emits one of the two word-sliced loop functions: the first
// loop of SMix (second false) or the second.
func slicedLoop(second bool) {
	name := "slicedLoop1"
	sig := "func(s *uint32, v *[16]*uint32, r int, n int)"
	doc := []string{
		"slicedLoop1 runs n BlockMix calls of SMix's first loop on 16 hashes:",
		"the word-sliced block X of scratch s becomes BlockMix(X) n times, each",
		"result but the last written to V[1], V[2], ... of each hash (v[h] is",
		"hash h's V, 64-byte aligned), with non-temporal stores. The result is",
		"in X when n is even, in Y when n is odd (X and Y swap at each call).",
	}
	if second {
		name = "slicedLoop2"
		sig = "func(s *uint32, v *[16]*uint32, r int, mask uint64, n int)"
		doc = []string{
			"slicedLoop2 runs n BlockMix calls of SMix's second loop on 16 hashes:",
			"the word-sliced block X of scratch s becomes BlockMix(X ⊕ V[j]) n",
			"times, where j is Integerify(X) & mask for each hash and v[h] is hash",
			"h's V (mask must be below 2³²). The result is in X when n is even, in",
			"Y when n is odd (X and Y swap at each call).",
		}
	}
	TEXT(name, NOSPLIT, sig)
	Doc(doc...)

	xp := Load(Param("s"), GP64()).(GPVirtual)
	yp := GP64().(GPVirtual)
	blk := GP64().(GPVirtual) // 1024·r: half of a word-sliced block
	Load(Param("r"), blk)
	SHLQ(U8(10), blk)
	LEAQ(Mem{Base: xp, Index: blk, Scale: 2}, yp)
	n := Load(Param("n"), GP64()).(GPVirtual)
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))

	var vout GPVirtual // first loop: the offset of V[i] in each V, 128·r·i
	if !second {
		vout = GP64().(GPVirtual)
		MOVQ(blk, vout)
		SHRQ(U8(3), vout)
	}

	var tbl GPVirtual
	if second {
		// tbl: X0, then the pointers, past X and Y (which swap).
		tbl = Load(Param("s"), GP64()).(GPVirtual)
		LEAQ(Mem{Base: tbl, Index: blk, Scale: 4}, tbl)
		// The first call's pointers; each call makes the next one's as
		// soon as its last block's word 0 is known.
		slicedPointers(Mem{Base: xp, Index: blk, Scale: 2, Disp: -1024}, tbl, blk)
	}

	Label(name + "_call")
	// last is X's last block.
	last := GP64().(GPVirtual)
	LEAQ(Mem{Base: xp, Index: blk, Scale: 2, Disp: -1024}, last)
	prev := GP64().(GPVirtual) // the block the chain continues from
	if second {
		lastLine := GP64()
		MOVQ(blk, lastLine)
		SHRQ(U8(3), lastLine)
		Comment("X0 = X[2r-1] ⊕ V[j][2r-1], where the chain starts.")
		z := loadLines(tbl, Mem{Index: lastLine, Scale: 1, Disp: -64})
		x := transpose16(z)
		for k := range x {
			VPXORD(row(last, 0, k), x[k], x[k])
			VMOVDQU32(x[k], row(tbl, 0, k))
		}
		MOVQ(tbl, prev)
	} else {
		MOVQ(last, prev)
	}

	// The chain: block i of X (with V's line i) makes block i/2 of Y when
	// i is even, block r + i/2 when odd; in and lo walk the pairs, and
	// lo+blk is the odd block's output. In the second loop, the last
	// block's W is prev ⊕ X0, which holds X[2r-1] ⊕ V[j][2r-1] already:
	// the last pair is emitted apart, and the loop takes the others.
	in, lo := GP64().(GPVirtual), GP64().(GPVirtual)
	MOVQ(xp, in)
	MOVQ(yp, lo)
	line := GP64().(GPVirtual) // second loop: 128·(pair), the offset of the pair's lines in V[j]; first loop: 64·(pair)
	XORQ(line, line)
	pairs := Load(Param("r"), GP64()).(GPVirtual)
	if second {
		DECQ(pairs)
		JZ(LabelRef(name + "_last"))
	}
	Label(name + "_pair")
	for half := range 2 {
		slicedBlock(name, second, half, false, blockRegs{prev, in, lo, blk, line, pairs, tbl, vout, n})
	}
	ADDQ(U32(2048), in)
	ADDQ(U32(1024), lo)
	if second {
		ADDQ(U8(128), line)
	} else {
		ADDQ(U8(64), line)
	}
	DECQ(pairs)
	JNZ(LabelRef(name + "_pair"))
	if second {
		Label(name + "_last")
		for half := range 2 {
			slicedBlock(name, second, half, true, blockRegs{prev, in, lo, blk, line, pairs, tbl, vout, n})
		}
	}

	if !second {
		tmp := GP64()
		MOVQ(blk, tmp)
		SHRQ(U8(3), tmp)
		ADDQ(tmp, vout)
	}
	XCHGQ(xp, yp)
	DECQ(n)
	JNZ(LabelRef(name + "_call"))
	if !second {
		SFENCE()
	}
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// slicedPointers emits the pointers of the second loop's next call:
// tbl[h] = v[h] + 128·r·j, with j = word 0 of the X's last block & mask
// for each hash (Integerify, as mask < 2³²), from j0: that word's row in
// memory or in a register. Then it prefetches the lines the call uses
// first: the last line, then the first slicedPrefetch.
func slicedPointers(j0 Op, tbl, blk GPVirtual) {
	Comment("The next call's pointers: v[h] + 128·r·(Integerify(X) & mask), and its first lines.")
	mask := ZMM()
	VPBROADCASTD(Load(Param("mask"), GP64()).(GPVirtual).As32(), mask)
	j := ZMM()
	VPANDD(j0, mask, j)
	size := GP64()
	MOVQ(blk, size)
	SHRQ(U8(3), size)
	sz := ZMM()
	VPBROADCASTQ(size, sz)
	jhi := YMM()
	VEXTRACTI64X4(U8(1), j, jhi)
	lo, hi := ZMM(), ZMM()
	VPMOVZXDQ(j.AsY(), lo)
	VPMOVZXDQ(jhi, hi)
	VPMULUDQ(sz, lo, lo)
	VPMULUDQ(sz, hi, hi)
	vp := Load(Param("v"), GP64()).(GPVirtual)
	VPADDQ(Mem{Base: vp}, lo, lo)
	VPADDQ(Mem{Base: vp, Disp: 64}, hi, hi)
	VMOVDQU64(lo, Mem{Base: tbl, Disp: 1024})
	VMOVDQU64(hi, Mem{Base: tbl, Disp: 1024 + 64})
	for h := range slicedHashes {
		p := GP64()
		MOVQ(Mem{Base: tbl, Disp: 1024 + 8*h}, p)
		PREFETCHT0(Mem{Base: p, Index: size, Scale: 1, Disp: -64})
	}
	for l := range slicedPrefetch {
		for h := range slicedHashes {
			p := GP64()
			MOVQ(Mem{Base: tbl, Disp: 1024 + 8*h}, p)
			PREFETCHT0(Mem{Base: p, Disp: 64 * l})
		}
	}
}

// blockRegs are the registers a block of the chain uses (see slicedLoop).
type blockRegs struct {
	prev, in, lo, blk, line, pairs, tbl, vout, n GPVirtual
}

// slicedBlock emits block half (0 or 1) of a pair of the chain: W = prev
// ⊕ X[i] (⊕ V[j][i] in the second loop), stored at its output and kept
// as the state; Salsa20/8; the output W + state, then the next prev. In
// the first loop, the output also goes to V[i+1] of each hash. last: the
// last pair of the second loop.
func slicedBlock(name string, second bool, half int, last bool, g blockRegs) {
	suffix := fmt.Sprintf("%d", half)
	if last {
		suffix += "_last"
	}
	out := func(k int) Mem { return row(g.lo, 0, k) }
	if half == 1 {
		out = func(k int) Mem { return Mem{Base: g.lo, Index: g.blk, Scale: 1, Disp: 64 * k} }
	}
	var x []VecVirtual
	switch {
	case second && last && half == 1:
		Comment("The last block: W = prev ⊕ X0, then Salsa20/8.")
		x = make([]VecVirtual, 16)
		for k := range x {
			x[k] = ZMM()
			VMOVDQU32(row(g.prev, 0, k), x[k])
			VPXORD(row(g.tbl, 0, k), x[k], x[k])
			VMOVDQU32(x[k], out(k))
		}
	case second:
		if half == 0 && !last {
			// The pair of lines slicedPrefetch ahead, while in V[j].
			skip := name + "_noprefetch"
			CMPQ(g.pairs, U8(slicedPrefetch/2))
			JB(LabelRef(skip))
			for l := range 2 {
				for h := range slicedHashes {
					p := GP64()
					MOVQ(Mem{Base: g.tbl, Disp: 1024 + 8*h}, p)
					PREFETCHT0(Mem{Base: p, Index: g.line, Scale: 1, Disp: 64*slicedPrefetch + 64*l})
				}
			}
			Label(skip)
		}
		Commentf("Block %d of the pair: W = prev ⊕ X[i] ⊕ V[j][i], then Salsa20/8.", half)
		z := loadLines(g.tbl, Mem{Index: g.line, Scale: 1, Disp: 64 * half})
		x = transpose16(z)
		t := ZMM()
		for k := range x {
			VMOVDQU32(row(g.prev, 0, k), t)
			VPTERNLOGD(U8(0x96), row(g.in, 1024*half, k), t, x[k])
			VMOVDQU32(x[k], out(k))
		}
	default:
		Commentf("Block %d of the pair: W = prev ⊕ X[i], then Salsa20/8.", half)
		x = make([]VecVirtual, 16)
		for k := range x {
			x[k] = ZMM()
			VMOVDQU32(row(g.prev, 0, k), x[k])
			VPXORD(row(g.in, 1024*half, k), x[k], x[k])
			VMOVDQU32(x[k], out(k))
		}
	}
	slicedSalsa(x)
	for k := range x {
		VPADDD(out(k), x[k], x[k])
		if second && last && half == 1 && k == 0 {
			// Word 0 of the call's last block is Integerify's: the next
			// call's pointers and prefetches go out before the stores.
			slicedPointers(x[0], g.tbl, g.blk)
		}
		VMOVDQU32(x[k], out(k))
	}
	if !second {
		// V[i+1] of each hash gets its line, unless this is the last call.
		skip := name + "_nowrite" + suffix
		CMPQ(g.n, U8(1))
		JEQ(LabelRef(skip))
		Commentf("V[i+1]'s line of block %d of the pair, for each hash.", half)
		rows := transpose16(x)
		vp := Load(Param("v"), GP64()).(GPVirtual)
		off := GP64()
		LEAQ(Mem{Base: g.vout, Index: g.line, Scale: 1}, off)
		if half == 1 {
			hi := GP64()
			MOVQ(g.blk, hi)
			SHRQ(U8(4), hi) // 64·r
			ADDQ(hi, off)
		}
		for h, z := range rows {
			p := GP64()
			MOVQ(Mem{Base: vp, Disp: 8 * h}, p)
			VMOVNTDQ(z, Mem{Base: p, Index: off, Scale: 1})
		}
		Label(skip)
	}
	if half == 0 {
		MOVQ(g.lo, g.prev)
	} else {
		LEAQ(Mem{Base: g.lo, Index: g.blk, Scale: 1}, g.prev)
	}
}

// loadLines loads, for each of the 16 hashes, the 64 bytes at tbl[h] + a
// (tbl holds the pointers 1024 bytes in; a has no base).
func loadLines(tbl GPVirtual, a Mem) []VecVirtual {
	z := make([]VecVirtual, slicedHashes)
	for h := range z {
		p := GP64()
		MOVQ(Mem{Base: tbl, Disp: 1024 + 8*h}, p)
		a.Base = p
		z[h] = ZMM()
		VMOVDQU32(a, z[h])
	}
	return z
}
