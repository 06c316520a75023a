// Command _asm generates blockmix_amd64.s and blockmix_amd64_stubs.go, the
// SIMD scrypt BlockMix of package scrypt, with avo. Run `go generate` in the
// scrypt directory.
package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The blocks are stored diagonal-wise (see layout in salsa_generic.go): the
// four 16-byte rows of a stored block are the vectors
//
//	a = x0 x5 x10 x15, b = x4 x9 x14 x3, c = x8 x13 x2 x7, d = x12 x1 x6 x11
//
// so that a Salsa20 column round is four vector steps, and a row round is
// four more once b, c and d are rotated by one, two and three lanes.

// isa is the instruction set a chain is written in.
type isa int

const (
	sse2   isa = iota // XMM registers, two-operand
	avx2              // VEX, three-operand
	avx512            // EVEX (AVX-512 F and VL): X0-X31, rotates in one instruction
)

// ptr is one of a hash's pointers: a register that holds it for the whole
// function or, when the hashes have more pointers than there are registers,
// the argument it is loaded from again at each use (see bind).
type ptr struct {
	param string
	reg   GPVirtual
}

// hash holds the pointers of one hash's BlockMix.
type hash struct {
	in, v, out ptr // v.param is "" without the XOR
}

// addr is an addressing mode: the address of byte d of a block, given the
// register holding the pointer it is relative to.
type addr func(base GPVirtual, d int) Mem

// chain is one dependency chain of vector code over len(hashes) hashes,
// one per 128-bit lane: one hash in XMM registers, two in YMM registers,
// four in ZMM registers.
type chain struct {
	isa    isa
	hashes []hash
	x      [4]VecVirtual // state a, b, c, d
	w      [4]VecVirtual // the Salsa20 input, when kept in registers
	t, u   VecVirtual    // temporaries
}

func (c *chain) vec() VecVirtual {
	switch len(c.hashes) {
	case 1:
		return XMM()
	case 2:
		return YMM()
	}
	return ZMM()
}

func newChain(is isa, wInRegs bool, hs []hash) *chain {
	c := &chain{isa: is, hashes: hs}
	for i := range c.x {
		c.x[i] = c.vec()
		if wInRegs {
			c.w[i] = c.vec()
		}
	}
	c.t, c.u = c.vec(), c.vec()
	return c
}

// bind returns the registers holding pointer sel of each of the chain's
// hashes, loading those that live in their arguments.
func (c *chain) bind(sel func(h hash) ptr) []GPVirtual {
	bs := make([]GPVirtual, len(c.hashes))
	for j, h := range c.hashes {
		p := sel(h)
		bs[j] = p.reg
		if p.reg == nil {
			bs[j] = Load(Param(p.param), GP64()).(GPVirtual)
		}
	}
	return bs
}

// load sets dst to the 16 bytes at a(bs[j], d) in lane j, for each of the
// chain's hashes.
func (c *chain) load(dst VecVirtual, bs []GPVirtual, a addr, d int) {
	switch c.isa {
	case sse2:
		MOVOU(a(bs[0], d), dst)
	case avx2:
		VMOVDQU(a(bs[0], d), dst.AsX())
		VINSERTI128(U8(1), a(bs[1], d), dst, dst)
	case avx512:
		VMOVDQU32(a(bs[0], d), dst.AsX())
		for j := 1; j < len(bs); j++ {
			VINSERTI32X4(U8(j), a(bs[j], d), dst, dst)
		}
	}
}

// store writes lane j of src to the 16 bytes at a(bs[j], d), for each of
// the chain's hashes.
func (c *chain) store(src VecVirtual, bs []GPVirtual, a addr, d int) {
	switch c.isa {
	case sse2:
		MOVOU(src, a(bs[0], d))
	case avx2:
		VMOVDQU(src.AsX(), a(bs[0], d))
		VEXTRACTI128(U8(1), src, a(bs[1], d))
	case avx512:
		VMOVDQU32(src.AsX(), a(bs[0], d))
		for j := 1; j < len(bs); j++ {
			VEXTRACTI32X4(U8(j), src, a(bs[j], d))
		}
	}
}

func (c *chain) xor(dst, src VecVirtual) {
	switch c.isa {
	case sse2:
		PXOR(src, dst)
	case avx2:
		VPXOR(src, dst, dst)
	case avx512:
		VPXORD(src, dst, dst)
	}
}

func (c *chain) add(dst, src VecVirtual) {
	if c.isa == sse2 {
		PADDL(src, dst)
	} else {
		VPADDD(src, dst, dst)
	}
}

func (c *chain) mov(dst, src VecVirtual) {
	switch c.isa {
	case sse2:
		MOVO(src, dst)
	case avx2:
		VMOVDQA(src, dst)
	case avx512:
		VMOVDQA32(src, dst)
	}
}

func (c *chain) shuffle(x VecVirtual, imm uint8) {
	if c.isa == sse2 {
		PSHUFD(U8(imm), x, x)
	} else {
		VPSHUFD(U8(imm), x, x)
	}
}

// src is a block of each of the chain's hashes: the registers holding the
// pointers and the address relative to them.
type src struct {
	bs []GPVirtual
	a  addr
}

// xorIn XORs row d (a byte offset) of every block of srcs into dst; dst is
// the first of them instead with set.
//
// The AVX-512 code loads as the rest does. Measured on Zen 5 with
// BenchmarkKernel, none of these was faster: VPXORD with a memory operand
// where one pointer fills the register (one hash in XMM), VPTERNLOGD to XOR
// in and v into the state at once, and XORing each hash's in and v in XMM
// before one VINSERTI32X4 instead of two. With V out of cache they were
// within the noise; with V in L1, VPTERNLOGD gained 2-3% at best.
func (c *chain) xorIn(dst VecVirtual, set bool, d int, srcs ...src) {
	if set {
		c.load(dst, srcs[0].bs, srcs[0].a, d)
		srcs = srcs[1:]
	}
	for _, s := range srcs {
		c.load(c.t, s.bs, s.a, d)
		c.xor(dst, c.t)
	}
}

// step is dst ^= (p + q) <<< rot.
func (c *chain) step(dst, p, q VecVirtual, rot uint8) {
	switch c.isa {
	case sse2:
		MOVO(p, c.t)
		PADDL(q, c.t)
		MOVO(c.t, c.u)
		PSLLL(U8(rot), c.t)
		PSRLL(U8(32-rot), c.u)
		c = &chain{isa: sse2, t: c.u, u: c.t} // xor both halves in
	case avx2:
		VPADDD(q, p, c.t)
		VPSLLD(U8(rot), c.t, c.u)
		VPSRLD(U8(32-rot), c.t, c.t)
	case avx512:
		VPADDD(q, p, c.t)
		VPROLD(U8(rot), c.t, c.t)
		c.xor(dst, c.t)
		return
	}
	c.xor(dst, c.u)
	c.xor(dst, c.t)
}

// doubleRound emits one Salsa20 double round for every chain, instruction
// group by instruction group, so that independent chains interleave.
func doubleRound(cs []*chain) {
	each := func(f func(c *chain, a, b, cc, d VecVirtual)) {
		for _, c := range cs {
			f(c, c.x[0], c.x[1], c.x[2], c.x[3])
		}
	}
	// Columns.
	each(func(c *chain, a, b, _, d VecVirtual) { c.step(b, a, d, 7) })
	each(func(c *chain, a, b, cc, _ VecVirtual) { c.step(cc, b, a, 9) })
	each(func(c *chain, _, b, cc, d VecVirtual) { c.step(d, cc, b, 13) })
	each(func(c *chain, a, _, cc, d VecVirtual) { c.step(a, d, cc, 18) })
	// Rotate b, c, d by three, two and one lanes: the rows line up.
	each(func(c *chain, _, b, cc, d VecVirtual) {
		c.shuffle(d, 0x39)
		c.shuffle(b, 0x93)
		c.shuffle(cc, 0x4e)
	})
	// Rows.
	each(func(c *chain, a, b, _, d VecVirtual) { c.step(d, a, b, 7) })
	each(func(c *chain, a, _, cc, d VecVirtual) { c.step(cc, d, a, 9) })
	each(func(c *chain, _, b, cc, d VecVirtual) { c.step(b, cc, d, 13) })
	each(func(c *chain, a, b, cc, _ VecVirtual) { c.step(a, b, cc, 18) })
	each(func(c *chain, _, b, cc, d VecVirtual) {
		c.shuffle(d, 0x93)
		c.shuffle(b, 0x39)
		c.shuffle(cc, 0x4e)
	})
}

// maxPtrs is how many pointers a function keeps in registers, with its
// two counters: the 14 general registers avo allocates, BP aside.
const maxPtrs = 12

// blockMix emits a BlockMix function over nh hashes: out = BlockMix(in),
// or BlockMix(in ⊕ v) with xor, in chains of per hashes (one per 128-bit
// lane) written in is; wInRegs keeps the Salsa20 input in registers
// instead of in the output block until it is added back.
func blockMix(name string, nh int, xor bool, is isa, per int, wInRegs bool) {
	var sig string
	suffix := func(i int) string {
		if nh == 1 {
			return ""
		}
		return fmt.Sprint(i)
	}
	for i := range nh {
		s := suffix(i)
		sig += fmt.Sprintf("out%s, in%s *uint32, ", s, s)
		if xor {
			sig += fmt.Sprintf("v%s *uint32, ", s)
		}
	}
	TEXT(name, NOSPLIT, "func("+sig+"r int)")
	what := "BlockMix(in)"
	if xor {
		what = "BlockMix(in ⊕ v)"
	}
	if nh == 1 {
		Doc(fmt.Sprintf("%s sets out to %s; the blocks hold 32·r words", name, what),
			"in permuted order and out overlaps no input.")
	} else {
		Doc(fmt.Sprintf("%s sets outK to %s for K < %d", name, strings.NewReplacer("in", "inK", "v", "vK").Replace(what), nh),
			"(independent hashes with the same r); the blocks hold 32·r words in",
			"permuted order and each out overlaps no input.")
	}

	n := Load(Param("r"), GP64())
	hs := make([]hash, nh)
	ptrs := 2 * nh
	if xor {
		ptrs = 3 * nh
	}
	// Too many pointers for the registers: each is loaded from its
	// argument where it is used, and the blocks are addressed by offsets
	// that grow instead of the pointers.
	inArgs := ptrs > maxPtrs
	for i := range hs {
		s := suffix(i)
		hs[i].out.param = "out" + s
		hs[i].in.param = "in" + s
		if xor {
			hs[i].v.param = "v" + s
		}
		if inArgs {
			continue
		}
		hs[i].out.reg = Load(Param("out"+s), GP64()).(GPVirtual)
		hs[i].in.reg = Load(Param("in"+s), GP64()).(GPVirtual)
		if xor {
			hs[i].v.reg = Load(Param("v"+s), GP64()).(GPVirtual)
		}
	}
	// hi = 64·r: the odd blocks go to out+hi, and the last block of the
	// input is at in+2·hi-64.
	hi := GP64()
	MOVQ(n, hi)
	SHLQ(U8(6), hi)
	if xor {
		prefetchStart(name, hs, n, hi)
	}
	in := func(p GPVirtual, d int) Mem { return Mem{Base: p, Disp: d} }
	out := in
	outHi := func(p GPVirtual, d int) Mem { return Mem{Base: p, Index: hi, Scale: 1, Disp: d} }
	last := func(p GPVirtual, d int) Mem { return Mem{Base: p, Index: hi, Scale: 2, Disp: d - 64} }
	var off, offHi GPVirtual // with inArgs: out+off is the output pair, out+offHi its odd block, in+2·off the input pair
	if inArgs {
		off, offHi = GP64(), GP64()
		XORQ(off, off)
		MOVQ(hi, offHi)
		in = func(p GPVirtual, d int) Mem { return Mem{Base: p, Index: off, Scale: 2, Disp: d} }
		out = func(p GPVirtual, d int) Mem { return Mem{Base: p, Index: off, Scale: 1, Disp: d} }
		outHi = func(p GPVirtual, d int) Mem { return Mem{Base: p, Index: offHi, Scale: 1, Disp: d} }
	}
	selIn := func(h hash) ptr { return h.in }
	selV := func(h hash) ptr { return h.v }
	selOut := func(h hash) ptr { return h.out }
	// sources are the chain's blocks to XOR: in, and v with xor.
	sources := func(c *chain, a addr) []src {
		s := []src{{c.bind(selIn), a}}
		if xor {
			s = append(s, src{c.bind(selV), a})
		}
		return s
	}

	var cs []*chain
	for i := 0; i < nh; i += per {
		cs = append(cs, newChain(is, wInRegs, hs[i:i+per]))
	}
	Comment("The state starts as the last block of the input.")
	for _, c := range cs {
		ss := sources(c, last)
		for k := range c.x {
			c.xorIn(c.x[k], true, 16*k, ss...)
		}
	}

	Label(name + "_loop")
	if xor {
		prefetchAhead(name, hs, n, func(p GPVirtual, d int) Mem { return in(p, d) })
	}
	for half, dst := range []addr{out, outHi} {
		Commentf("Block %d of the pair: state = Salsa20/8(state ⊕ in%s).", half, map[bool]string{true: " ⊕ v"}[xor])
		for _, c := range cs {
			ss := sources(c, func(p GPVirtual, d int) Mem { return in(p, 64*half+d) })
			var os []GPVirtual
			if !wInRegs {
				os = c.bind(selOut)
			}
			for k := range c.x {
				c.xorIn(c.x[k], false, 16*k, ss...)
				if wInRegs {
					c.mov(c.w[k], c.x[k])
				} else {
					c.store(c.x[k], os, dst, 16*k)
				}
			}
		}
		for range 4 {
			doubleRound(cs)
		}
		for _, c := range cs {
			os := c.bind(selOut)
			for k := range c.x {
				if wInRegs {
					c.add(c.x[k], c.w[k])
				} else {
					c.load(c.t, os, dst, 16*k)
					c.add(c.x[k], c.t)
				}
				c.store(c.x[k], os, dst, 16*k)
			}
		}
	}
	if inArgs {
		ADDQ(U8(64), off)
		ADDQ(U8(64), offHi)
	} else {
		for _, h := range hs {
			ADDQ(U8(128), h.in.reg)
			if xor {
				ADDQ(U8(128), h.v.reg)
			}
			ADDQ(U8(64), h.out.reg)
		}
	}
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	if per > 1 {
		VZEROUPPER()
	}
	RET()
}

// The v blocks are random blocks of V in SMix's second loop, likely in no
// cache. The chains use their lines one after the other, further apart
// than the out-of-order window reaches, so the lines are prefetched in the
// order of use, a few ahead: prefetchStart takes the last line (where the
// state starts) and the first prefetchDistance pairs, and prefetchAhead,
// at the top of each iteration (one pair of input blocks), the pair
// prefetchDistance iterations on while it is in the block. One burst of
// the whole block at the start, last line first, was 7 % slower per hash
// with zmmx8 (Intel Xeon, AVX-512, BenchmarkCode).
const prefetchDistance = 2

// vRegs returns the registers holding each hash's v pointer, loading
// those that live in their arguments.
func vRegs(hs []hash) []GPVirtual {
	vs := make([]GPVirtual, len(hs))
	for i, h := range hs {
		vs[i] = h.v.reg
		if vs[i] == nil {
			vs[i] = Load(Param(h.v.param), GP64()).(GPVirtual)
		}
	}
	return vs
}

// prefetchStart emits the prefetches of the last line of every hash's v
// block and of its first prefetchDistance pairs of lines (those in the
// block, 2·r lines: n holds r); hi is 64·r.
func prefetchStart(name string, hs []hash, n Register, hi GPVirtual) {
	Comment("Prefetch the v blocks (random blocks of V) in the order they are used.")
	vs := vRegs(hs)
	for _, p := range vs {
		PREFETCHT0(Mem{Base: p, Index: hi, Scale: 2, Disp: -64})
	}
	done := name + "_prefetched"
	for pair := range prefetchDistance {
		if pair > 0 {
			CMPQ(n, U8(pair))
			JBE(LabelRef(done))
		}
		for _, p := range vs {
			PREFETCHT0(Mem{Base: p, Disp: 128 * pair})
			PREFETCHT0(Mem{Base: p, Disp: 128*pair + 64})
		}
	}
	Label(done)
}

// prefetchAhead emits the prefetch of the pair of lines prefetchDistance
// iterations ahead of the current one, unless that pair is past the v
// block: n counts the iterations left, this one included.
func prefetchAhead(name string, hs []hash, n Register, in addr) {
	skip := name + "_noprefetch"
	CMPQ(n, U8(prefetchDistance))
	JBE(LabelRef(skip))
	for _, p := range vRegs(hs) {
		PREFETCHT0(in(p, 128*prefetchDistance))
		PREFETCHT0(in(p, 128*prefetchDistance+64))
	}
	Label(skip)
}

func main() {
	ConstraintExpr("amd64,gc,!purego")
	xors := []string{"", "Xor"}
	for i, x := range xors {
		xor := i == 1
		blockMix("blockMix"+x+"SSE2", 1, xor, sse2, 1, true)
		blockMix("blockMix"+x+"2SSE2", 2, xor, sse2, 1, false)
		blockMix("blockMix"+x+"2AVX2", 2, xor, avx2, 2, true)
		blockMix("blockMix"+x+"4AVX2", 4, xor, avx2, 2, false)
	}
	// AVX-512 (F and VL), after the others so that their code keeps its
	// place: 32 registers hold the Salsa20 input of every chain.
	for i, x := range xors {
		xor := i == 1
		blockMix("blockMix"+x+"AVX512", 1, xor, avx512, 1, true)
		blockMix("blockMix"+x+"2AVX512", 2, xor, avx512, 2, true)
		blockMix("blockMix"+x+"4AVX512", 4, xor, avx512, 2, true)
		blockMix("blockMix"+x+"4ZMM", 4, xor, avx512, 4, true)
		blockMix("blockMix"+x+"8ZMM", 8, xor, avx512, 4, true)
	}
	slicedLoop(false)
	slicedLoop(true)
	Generate()
}
