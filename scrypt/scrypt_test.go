package scrypt

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	xscrypt "golang.org/x/crypto/scrypt"
)

// forEachKernel runs f with every kernel of this CPU forced in turn (see
// forceKernel); f reads the kernel from k.
func forEachKernel(t *testing.T, f func(t *testing.T, k kernel)) {
	for _, k := range kernels {
		t.Run("kernel="+k.String(), func(t *testing.T) {
			defer forceKernel(k)()
			f(t, k)
		})
	}
}

// forceKernel makes every computation run k, on groups of k.lanes()
// hashes (the pure-Go kernel for fewer), until restore is called.
func forceKernel(k kernel) (restore func()) {
	oldLanes := lanes
	lanes = k.lanes()
	choices.forced = func(c class) (kernel, bool) {
		if c.n%k.lanes() == 0 {
			return k, true
		}
		return kernelGeneric, true
	}
	return func() { lanes, choices.forced = oldLanes, nil }
}

// loopMixes are one BlockMix call, for the tests, of each kernel that
// runs whole loops only (sliced_amd64_test.go); mixOf returns k's.
var loopMixes = map[kernel]func(out, in, v *[maxLanes][]uint32, n, r int){}

func mixOf(k kernel) func(out, in, v *[maxLanes][]uint32, n, r int) {
	if mix, ok := loopMixes[k]; ok {
		return mix
	}
	return k.mix
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// The test vectors of RFC 7914, section 12, but for the 1 GiB one.
var rfc7914 = []struct {
	password, salt string
	N, r, p        int
	key            string
}{
	{"", "", 16, 1, 1, "77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906"},
	{"password", "NaCl", 1024, 8, 16, "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"},
	{"pleaseletmein", "SodiumChloride", 16384, 8, 1, "7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887"},
}

func TestRFC7914(t *testing.T) {
	forEachKernel(t, func(t *testing.T, k kernel) {
		vectors := rfc7914
		if raceEnabled && k == kernelGeneric {
			// Instrumented pure Go takes seconds over the 16 MiB ones;
			// the differential tests cover that code.
			vectors = vectors[:1]
		}
		var jobs []Job
		for _, v := range vectors {
			got, err := Key([]byte(v.password), []byte(v.salt), v.N, v.r, v.p, 64)
			if err != nil || !bytes.Equal(got, unhex(v.key)) {
				t.Errorf("Key(%q, %q, %d, %d, %d, 64) = %x, %v; want %s", v.password, v.salt, v.N, v.r, v.p, got, err, v.key)
			}
			for range 2 {
				jobs = append(jobs, Job{Password: []byte(v.password), Salt: []byte(v.salt), N: v.N, R: v.r, P: v.p, KeyLen: 64})
			}
		}
		KeyBatch(jobs)
		for i, j := range jobs {
			if want := vectors[i/2].key; j.Err != nil || hex.EncodeToString(j.Key) != want {
				t.Errorf("KeyBatch job %d = %x, %v; want %s", i, j.Key, j.Err, want)
			}
		}
	})
}

// params is one point of the parameter space.
type params struct {
	password, salt     []byte
	logN, r, p, keyLen int
}

func (c params) String() string {
	return fmt.Sprintf("password=%x salt=%x N=2^%d r=%d p=%d keyLen=%d", c.password, c.salt, c.logN, c.r, c.p, c.keyLen)
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// randParams samples the space of the differential tests: passwords and
// salts of 0-200 bytes, r 1-16, p 1-4, keyLen 1-128, and logN 1-16 with
// the cost 128·r·N·p capped at maxCost bytes, so that big N comes with
// small r and p.
func randParams(rng *rand.Rand, maxCost int) params {
	for {
		c := params{
			password: randBytes(rng, rng.IntN(201)),
			salt:     randBytes(rng, rng.IntN(201)),
			logN:     1 + rng.IntN(16),
			r:        1 + rng.IntN(16),
			p:        1 + rng.IntN(4),
			keyLen:   1 + rng.IntN(128),
		}
		if 128*c.r*c.p<<c.logN <= maxCost {
			return c
		}
	}
}

func xKey(t testing.TB, c params) []byte {
	t.Helper()
	k, err := xscrypt.Key(c.password, c.salt, 1<<c.logN, c.r, c.p, c.keyLen)
	if err != nil {
		t.Fatalf("x/crypto: %v: %v", c, err)
	}
	return k
}

// samples is how many random parameter sets each differential test tries:
// fewer under -short and the race detector, whose instrumented pure Go is
// an order of magnitude slower.
func samples() (n, maxCost int) {
	switch {
	case testing.Short() || raceEnabled:
		return 40, 1 << 20
	default:
		return 150, 4 << 20
	}
}

func TestKeyDifferential(t *testing.T) {
	forEachKernel(t, func(t *testing.T, _ kernel) {
		rng := rand.New(rand.NewPCG(16, 1))
		n, maxCost := samples()
		for range n {
			c := randParams(rng, maxCost)
			got, err := Key(c.password, c.salt, 1<<c.logN, c.r, c.p, c.keyLen)
			if want := xKey(t, c); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%v: Key = %x, %v; x/crypto %x", c, got, err, want)
			}
		}
	})
}

// TestKeyBigN covers the largest N of the differential range, logN 15 and
// 16 with r 8 and 1, a few times.
func TestKeyBigN(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("big N: skipped under -short and -race")
	}
	rng := rand.New(rand.NewPCG(16, 2))
	for _, c := range []params{{logN: 15, r: 8, p: 1}, {logN: 16, r: 1, p: 2}, {logN: 16, r: 8, p: 1}} {
		c.password, c.salt, c.keyLen = randBytes(rng, 24), randBytes(rng, 16), 64
		want := xKey(t, c)
		got, err := Key(c.password, c.salt, 1<<c.logN, c.r, c.p, c.keyLen)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%v: Key = %x, %v; x/crypto %x", c, got, err, want)
		}
		c2 := c
		c2.password = randBytes(rng, 24)
		jobs := []Job{c.job(), c2.job()}
		KeyBatch(jobs)
		for i, want := range [][]byte{want, xKey(t, c2)} {
			if jobs[i].Err != nil || !bytes.Equal(jobs[i].Key, want) {
				t.Fatalf("%v: KeyBatch job %d = %x, %v; x/crypto %x", c, i, jobs[i].Key, jobs[i].Err, want)
			}
		}
	}
}

func (c params) job() Job {
	return Job{Password: c.password, Salt: c.salt, N: 1 << c.logN, R: c.r, P: c.p, KeyLen: c.keyLen}
}

// TestKeyBatchDifferential runs batches of 1-7 jobs with mixed parameters,
// drawn so that some share N and r (and are paired) and some do not, with
// an invalid job now and then.
func TestKeyBatchDifferential(t *testing.T) {
	forEachKernel(t, func(t *testing.T, _ kernel) {
		rng := rand.New(rand.NewPCG(16, 3))
		n, maxCost := samples()
		for range n / 4 {
			var cs []params
			for range 1 + rng.IntN(7) {
				c := randParams(rng, maxCost/2)
				if len(cs) > 0 && rng.IntN(2) == 0 {
					// Same N and r as an earlier job, other inputs.
					o := cs[rng.IntN(len(cs))]
					c.logN, c.r = o.logN, o.r
				}
				cs = append(cs, c)
			}
			jobs := make([]Job, len(cs))
			for i, c := range cs {
				jobs[i] = c.job()
			}
			bad := -1
			if rng.IntN(4) == 0 {
				bad = rng.IntN(len(jobs))
				jobs[bad].N = 3
			}
			KeyBatch(jobs)
			for i, c := range cs {
				if i == bad {
					if jobs[i].Err == nil || jobs[i].Key != nil {
						t.Fatalf("job %d with N=3: %x, %v; want an error", i, jobs[i].Key, jobs[i].Err)
					}
					continue
				}
				if want := xKey(t, c); jobs[i].Err != nil || !bytes.Equal(jobs[i].Key, want) {
					t.Fatalf("job %d of %d, %v: %x, %v; x/crypto %x", i, len(cs), c, jobs[i].Key, jobs[i].Err, want)
				}
			}
		}
	})
}

// TestKeyBatchFullGroups runs, with every kernel forced, batches whose
// blocks fill the kernel's lanes exactly (one job per lane, or fewer jobs
// with p ≥ 2), so that the widest kernels run whole groups: odd r, the
// smallest N, r up to 16, and random passwords and salts; every key is
// compared with x/crypto's.
func TestKeyBatchFullGroups(t *testing.T) {
	shapes := []struct{ logN, r int }{{1, 1}, {2, 3}, {3, 16}, {4, 5}, {5, 7}, {6, 2}, {7, 9}, {8, 1}, {10, 8}}
	forEachKernel(t, func(t *testing.T, k kernel) {
		rng := rand.New(rand.NewPCG(16, 7))
		n := k.lanes()
		for _, sh := range shapes {
			for _, p := range []int{1, min(4, n)} {
				var cs []params
				for range n / p {
					cs = append(cs, params{
						password: randBytes(rng, rng.IntN(80)), salt: randBytes(rng, rng.IntN(40)),
						logN: sh.logN, r: sh.r, p: p, keyLen: 1 + rng.IntN(96),
					})
				}
				jobs := make([]Job, len(cs))
				for i, c := range cs {
					jobs[i] = c.job()
				}
				KeyBatch(jobs)
				for i, c := range cs {
					if want := xKey(t, c); jobs[i].Err != nil || !bytes.Equal(jobs[i].Key, want) {
						t.Fatalf("job %d of %d, %v: %x, %v; x/crypto %x", i, len(cs), c, jobs[i].Key, jobs[i].Err, want)
					}
				}
			}
		}
	})
}

// TestErrors checks that the parameters x/crypto rejects are rejected
// with the same message, by Key and in a batch. A zero or negative r or p
// gets the message newer x/crypto releases give: the release k3s pins
// (v0.47.0, which this module requires) divides by zero or indexes out of
// range on them instead of returning an error.
func TestErrors(t *testing.T) {
	for _, c := range []struct{ N, r, p int }{
		{0, 1, 1}, {1, 1, 1}, {3, 1, 1}, {-16, 1, 1}, {maxInt/2 + 1, 1, 1},
		{16, 0, 1}, {16, 1, 0}, {16, -1, 1}, {16, 1, -1},
		{16, 1 << 15, 1 << 15}, {16, 1 << 30, 1}, {16, 1, 1 << 30},
		{maxInt/16 + 1, 8, 1}, {16, maxInt / 128, 1},
	} {
		xerr := errors.New("scrypt: parameters must be > 0")
		if c.r > 0 && c.p > 0 {
			_, xerr = xscrypt.Key(nil, nil, c.N, c.r, c.p, 32)
		}
		if xerr == nil {
			t.Fatalf("%+v: x/crypto accepts it", c)
		}
		k, err := Key(nil, nil, c.N, c.r, c.p, 32)
		if k != nil || err == nil || err.Error() != xerr.Error() {
			t.Errorf("Key%+v = %x, %v; want nil, %v", c, k, err, xerr)
		}
		jobs := []Job{{N: c.N, R: c.r, P: c.p, KeyLen: 32}, {N: 16, R: 1, P: 1, KeyLen: 32}}
		KeyBatch(jobs)
		if jobs[0].Key != nil || jobs[0].Err == nil || jobs[0].Err.Error() != xerr.Error() {
			t.Errorf("KeyBatch%+v = %x, %v; want nil, %v", c, jobs[0].Key, jobs[0].Err, xerr)
		}
		if jobs[1].Err != nil || len(jobs[1].Key) != 32 {
			t.Errorf("KeyBatch: the valid job after %+v: %x, %v", c, jobs[1].Key, jobs[1].Err)
		}
	}
}

// TestKeyLenLikeXCrypto: a keyLen ≤ 0 goes to x/crypto's PBKDF2, so Key
// and KeyBatch do what x/crypto's Key built into the same binary does
// (x/crypto v0.47.0 returns an empty key for 0 and panics below; newer
// releases panic on both).
func TestKeyLenLikeXCrypto(t *testing.T) {
	try := func(f func() ([]byte, error)) (k []byte, err error, panicked bool) {
		defer func() {
			if recover() != nil {
				panicked = true
			}
		}()
		k, err = f()
		return k, err, false
	}
	for _, keyLen := range []int{0, -1} {
		xk, xerr, xp := try(func() ([]byte, error) { return xscrypt.Key(nil, nil, 16, 1, 1, keyLen) })
		k, err, p := try(func() ([]byte, error) { return Key(nil, nil, 16, 1, 1, keyLen) })
		bk, berr, bp := try(func() ([]byte, error) {
			jobs := []Job{{N: 16, R: 1, P: 1, KeyLen: keyLen}}
			KeyBatch(jobs)
			return jobs[0].Key, jobs[0].Err
		})
		if p != xp || bp != xp || !bytes.Equal(k, xk) || !bytes.Equal(bk, xk) || (err == nil) != (xerr == nil) || (berr == nil) != (xerr == nil) {
			t.Errorf("keyLen %d: x/crypto %x, %v, panic %v; Key %x, %v, panic %v; KeyBatch %x, %v, panic %v",
				keyLen, xk, xerr, xp, k, err, p, bk, berr, bp)
		}
	}
}

// TestBlockMix compares every kernel with the pure-Go BlockMix on random
// blocks, r 1-16, with and without the XOR input, for one and for two
// calls' worth of lanes at once.
func TestBlockMix(t *testing.T) {
	for _, kern := range kernels {
		t.Run("kernel="+kern.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(16, 4))
			for r := 1; r <= 16; r++ {
				R := 32 * r
				words := func() []uint32 {
					w := make([]uint32, R)
					for i := range w {
						w[i] = rng.Uint32()
					}
					return w
				}
				for _, xor := range []bool{false, true} {
					for n := kern.lanes(); n <= min(2*kern.lanes(), maxLanes); n += kern.lanes() {
						var in, v, got [maxLanes][]uint32
						for k := range n {
							in[k], v[k], got[k] = words(), words(), make([]uint32, R)
						}
						vp := &v
						if !xor {
							vp = nil
						}
						mixOf(kern)(&got, &in, vp, n, r)
						for k := range n {
							want := make([]uint32, R)
							var vk []uint32
							if xor {
								vk = v[k]
							}
							blockMixGeneric(want, in[k], vk, r)
							if !slices.Equal(got[k], want) {
								t.Fatalf("r=%d xor=%v n=%d: hash %d differs from blockMixGeneric", r, xor, n, k)
							}
						}
					}
				}
			}
		})
	}
}

// TestBuffersCleared checks that the pool's idle buffers hold only zeros
// once they have been idle for scrubAfter (fake time), and no more bytes
// than were in use at once; and that Release clears a buffer it drops
// before then.
func TestBuffersCleared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p Pool
		defer p.Release()
		dirty := func() (n int) {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, e := range p.idle.bufs {
				if slices.ContainsFunc(e.b, func(w uint32) bool { return w != 0 }) {
					n++
				}
			}
			return n
		}
		p.KeyBatch([]Job{
			{Password: []byte("a"), N: 1 << 10, R: 2, P: 1, KeyLen: 32},
			{Password: []byte("b"), N: 1 << 10, R: 2, P: 2, KeyLen: 32},
			{Password: []byte("c"), N: 1 << 9, R: 2, P: 1, KeyLen: 32},
		}, Lanes())
		n, size := p.Idle()
		// Three blocks of (2^10, 2): Lanes() at a time, at most three.
		if peak := int64(min(Lanes(), 3)) * 128 * 2 * (1<<10 + 2); n == 0 || size > peak {
			t.Errorf("Idle() = %d, %d; want at least one, at most %d bytes", n, size, peak)
		}
		if dirty() == 0 {
			t.Fatal("no idle buffer holds state right after the computation: the test tests nothing")
		}
		time.Sleep(scrubAfter / 2)
		synctest.Wait()
		if dirty() == 0 {
			t.Error("buffers cleared before scrubAfter")
		}
		time.Sleep(scrubAfter / 2)
		synctest.Wait()
		if d := dirty(); d != 0 {
			t.Errorf("%d idle buffers hold non-zero words after scrubAfter", d)
		}

		p.KeyBatch([]Job{{Password: []byte("d"), N: 1 << 10, R: 2, P: 1, KeyLen: 32}}, 1)
		p.mu.Lock()
		var held [][]uint32
		for _, e := range p.idle.bufs {
			held = append(held, e.b)
		}
		p.mu.Unlock()
		p.Release()
		for _, b := range held {
			if slices.ContainsFunc(b, func(w uint32) bool { return w != 0 }) {
				t.Fatal("Release dropped a buffer holding state")
			}
		}
	})
}

// TestPoolBounded: hashes of ever new sizes, one at a time (stored hashes
// with distinct r, say), leave idle no more than the largest in use, not
// one buffer per size; buffers of one size in use at once all stay idle
// for the next round.
func TestPoolBounded(t *testing.T) {
	ReleaseBuffers()
	defer ReleaseBuffers()
	for r := 1; r <= 32; r++ {
		Key([]byte("pw"), []byte("salt"), 1<<8, r, 1, 32)
	}
	largest := bufferBytes(32 * 32 * (1<<8 + 2))
	if n, size := IdleBuffers(); n != 1 || size != largest {
		t.Errorf("after 32 sizes one at a time: IdleBuffers() = %d, %d; want 1, %d", n, size, largest)
	}
	ReleaseBuffers()
	if n, size := IdleBuffers(); n != 0 || size != 0 {
		t.Fatalf("after ReleaseBuffers: %d, %d idle", n, size)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { KeyBatch([]Job{{Password: []byte("a"), N: 1 << 8, R: 1, P: 1, KeyLen: 32}}) })
	}
	wg.Wait()
	if n, size := IdleBuffers(); n < 1 || n > 3 || size != int64(n)*bufferBytes(32*(1<<8+2)) {
		t.Errorf("after 3 concurrent hashes: IdleBuffers() = %d, %d", n, size)
	}
}
