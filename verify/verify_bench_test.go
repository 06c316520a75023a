package verify

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	xscrypt "golang.org/x/crypto/scrypt"

	"github.com/nodepass/nodepass/scrypt"
)

// BenchmarkCompareHashAndPassword answers: what does one verification
// cost without nodepass, at k3s's real parameters (logN 15, r 8, p 1)?
// This is what every request and every retry costs a k3s server today.
func BenchmarkCompareHashAndPassword(b *testing.B) {
	for _, logN := range []int{10, 15} {
		b.Run(fmt.Sprintf("logN=%d", logN), func(b *testing.B) {
			p := DefaultParams
			p.LogN = logN
			h, err := GenerateFromPassword("0123456789abcdef0123456789abcdef", p)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := CompareHashAndPassword(h, "0123456789abcdef0123456789abcdef"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N), "scrypt-runs")
		})
	}
}

// BenchmarkVerify answers: what does a request cost once its tuple is
// known (path=hit: a node's retry, from many goroutines at once;
// path=hit-failing: the same while another name has a recorded
// mismatch, a guesser's or a duplicate hostname's), what
// does a node cost whose verification another process remembered
// (path=digest: its first request after a restart, one HMAC and no
// scrypt), and what does the Verifier add around scrypt on a miss
// (path=miss, logN 15)?
func BenchmarkVerify(b *testing.B) {
	const pw = "0123456789abcdef0123456789abcdef"
	for _, path := range []string{"hit", "hit-failing"} {
		b.Run("path="+path, func(b *testing.B) { benchmarkHit(b, path == "hit-failing") })
	}
	b.Run("path=digest", func(b *testing.B) {
		key := bytes.Repeat([]byte{7}, MinDigestKeyLen)
		s := NewMemoryStore()
		h := mustHashB(b, pw, 15)
		nodes := make([]string, b.N)
		for i := range nodes {
			nodes[i] = fmt.Sprint("node-", i)
			s.Set(nodes[i], h)
			s.RememberDigest(context.Background(), nodes[i], h, digest(key, nodes[i], h, pw))
		}
		v, err := New(s, &Options{DigestKey: key})
		if err != nil {
			b.Fatal(err)
		}
		defer v.Close()
		b.ReportAllocs()
		b.ResetTimer()
		for _, node := range nodes {
			if err := v.Verify(context.Background(), node, pw); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		st := v.Stats()
		b.ReportMetric(float64(st.ScryptRuns)/float64(b.N), "scrypt-runs/op")
		b.ReportMetric(float64(st.DigestHits)/float64(b.N), "digest-hits/op")
	})
	b.Run("path=miss", func(b *testing.B) {
		s := NewMemoryStore()
		v, err := New(s, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer v.Close()
		h := mustHashB(b, pw, 15)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			// A new node each time (all with the same stored hash): always
			// a miss, and a match, so no node is ever failing and no
			// mismatch delay is measured.
			node := fmt.Sprint("node-", i)
			s.Set(node, h)
			if err := v.Verify(context.Background(), node, pw); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(v.Stats().ScryptRuns)/float64(b.N), "scrypt-runs/op")
	})
}

// benchmarkHit is BenchmarkVerify's path=hit: 320 nodes verified, then
// asked again from GOMAXPROCS goroutines; with failing, beside a name
// with a recorded mismatch.
func benchmarkHit(b *testing.B, failing bool) {
	const pw, nodes = "0123456789abcdef0123456789abcdef", 320
	s := NewMemoryStore()
	v, err := New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprint("node-", i)
		s.Set(names[i], mustHashB(b, pw, 4))
		if err := v.Verify(context.Background(), names[i], pw); err != nil {
			b.Fatal(err)
		}
	}
	if failing {
		s.Set("guessed", mustHashB(b, pw, 4))
		if err := v.Verify(context.Background(), "guessed", "a guess"); !errors.Is(err, ErrMismatchedHashAndPassword) {
			b.Fatal(err)
		}
	}
	runs := v.Stats().ScryptRuns
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := v.Verify(context.Background(), names[i%nodes], pw); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.StopTimer()
	st := v.Stats()
	b.ReportMetric(float64(st.ScryptRuns-runs)/float64(b.N), "scrypt-runs/op")
}

// BenchmarkLoneMiss answers: what does a request that comes alone to an
// idle server cost beyond its scrypt? Each op runs, in turn first, one
// miss (path=verify: Verify for a node not seen; path=hasher:
// VerifyHash of a hash not seen) and one lone scrypt.Key of the same
// parameters (logN 15, r 8, p 1), both on buffers used before. ms/miss
// is the miss's time, key-ms the key's, x-key the first over the second
// (1 is nothing beyond scrypt), and queue-ms/miss how long the miss's
// computation waited for its slot (Observer.ObserveQueueWait), which the
// machine's load does not lengthen as it does the others.
func BenchmarkLoneMiss(b *testing.B) {
	const pw = "0123456789abcdef0123456789abcdef"
	stored := mustHashB(b, pw, 15)
	h, err := parseHash(stored, Limits{}.withDefaults())
	if err != nil {
		b.Fatal(err)
	}
	key := func() time.Duration {
		start := time.Now()
		if _, err := scrypt.Key([]byte(pw), h.salt, 1<<h.logN, h.r, h.p, len(h.key)); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// loop runs miss(i), which times itself, and key in turn first, after
	// one of each; queued is the misses' wait for a slot.
	loop := func(b *testing.B, queued *queueWaits, miss func(i int) time.Duration) {
		miss(-1)
		key()
		queued.total.Store(0)
		var misses, keys time.Duration
		for i := 0; b.Loop(); i++ {
			if i%2 == 0 {
				misses += miss(i)
				keys += key()
			} else {
				keys += key()
				misses += miss(i)
			}
		}
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(b.N) }
		b.ReportMetric(ms(misses), "ms/miss")
		b.ReportMetric(ms(keys), "key-ms")
		b.ReportMetric(float64(misses)/float64(keys), "x-key")
		b.ReportMetric(ms(time.Duration(queued.total.Load())), "queue-ms/miss")
	}
	b.Run("path=verify", func(b *testing.B) {
		s := NewMemoryStore()
		var queued queueWaits
		v, err := New(s, &Options{Observer: &queued})
		if err != nil {
			b.Fatal(err)
		}
		defer v.Close()
		loop(b, &queued, func(i int) time.Duration {
			node := fmt.Sprint("node-", i+1)
			s.Set(node, stored)
			start := time.Now()
			if err := v.Verify(context.Background(), node, pw); err != nil {
				b.Fatal(err)
			}
			return time.Since(start)
		})
		if st := v.Stats(); st.ScryptRuns != uint64(b.N)+1 {
			b.Fatalf("%d scrypt runs for %d misses", st.ScryptRuns, b.N+1)
		}
	})
	b.Run("path=hasher", func(b *testing.B) {
		var queued queueWaits
		hr, err := NewHasher(&Options{Observer: &queued})
		if err != nil {
			b.Fatal(err)
		}
		defer hr.Close()
		var hashes []string // each a miss
		loop(b, &queued, func(int) time.Duration {
			b.StopTimer()
			hashes = append(hashes, mustHashB(b, pw, 15))
			b.StartTimer()
			start := time.Now()
			if err := hr.VerifyHash(hashes[len(hashes)-1], pw); err != nil {
				b.Fatal(err)
			}
			return time.Since(start)
		})
		if st := hr.Stats(); st.ScryptRuns != uint64(len(hashes)) {
			b.Fatalf("%d scrypt runs for %d misses", st.ScryptRuns, len(hashes))
		}
	})
}

// queueWaits is an Observer that adds up the computations' waits for a
// slot.
type queueWaits struct{ total atomic.Int64 }

func (q *queueWaits) ObserveScrypt(context.Context, time.Duration) {}
func (q *queueWaits) ObserveQueueWait(_ context.Context, d time.Duration) {
	q.total.Add(int64(d))
}

// BenchmarkColdHerd answers the herd's question at k3s's parameters:
// how long do 64 cold verifications (distinct nodes asking at once, a new
// Verifier with its defaults) take through the Verifier, against the
// same 64 hashes through the chosen scrypt kernel alone, in batches of
// scrypt.Lanes() on GOMAXPROCS goroutines with its buffers at hand, and
// against x/crypto on GOMAXPROCS workers? Each op runs all three, the
// Verifier and the kernel in turn first. ms/herd is the Verifier's time,
// kernel-ms/herd the kernel's, x-kernel the first over the second (the
// Verifier's cost over its kernel: lower is better, 1 is none),
// x-xcrypto x/crypto's time over the Verifier's (higher is better). Each
// op closes its Verifier, which releases the scrypt buffers: the next one
// allocates them again, as a process starting cold would. The kernel runs
// a second time on a new Pool of its own, released after it
// (kernel-cold-ms/herd, x-kernel-cold): what the same batches cost with
// the memory fetched anew, as the Verifier's first batches do.
func BenchmarkColdHerd(b *testing.B) {
	const n, pw = 64, "0123456789abcdef0123456789abcdef"
	s := NewMemoryStore()
	nodes := make([]string, n)
	hashes := make([]hash, n)
	jobs := make([]scrypt.Job, n)
	for i := range nodes {
		nodes[i] = fmt.Sprint("node-", i)
		stored := mustHashB(b, pw, 15)
		s.Set(nodes[i], stored)
		h, err := parseHash(stored, Limits{}.withDefaults())
		if err != nil {
			b.Fatal(err)
		}
		hashes[i] = h
		jobs[i] = scrypt.Job{Password: []byte(pw), Salt: h.salt, N: 1 << h.logN, R: h.r, P: h.p, KeyLen: len(h.key)}
	}
	warm := new(scrypt.Pool)
	defer warm.Release()
	kernelOn := func(pool *scrypt.Pool) time.Duration {
		start := time.Now()
		onWorkers(n, scrypt.Lanes(), func(i, j int) { pool.KeyBatch(jobs[i:j], scrypt.Lanes()) })
		for i := range jobs {
			if !bytes.Equal(jobs[i].Key, hashes[i].key) {
				b.Fatalf("kernel: hash %d: %v, a wrong key", i, jobs[i].Err)
			}
		}
		return time.Since(start)
	}
	kernel := func() time.Duration { return kernelOn(warm) }
	kernelCold := func() time.Duration {
		pool := new(scrypt.Pool)
		defer pool.Release()
		return kernelOn(pool)
	}
	verifier := func() time.Duration {
		start := time.Now()
		v, err := New(s, nil)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, node := range nodes {
			wg.Go(func() {
				if err := v.Verify(context.Background(), node, pw); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		if st := v.Stats(); st.ScryptRuns != n {
			b.Fatalf("%d scrypt runs for %d nodes", st.ScryptRuns, n)
		}
		v.Close()
		return time.Since(start)
	}
	kernel() // its buffers at hand, its classes measured
	var ours, theirs, batched, cold time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		onWorkers(n, 1, func(i, _ int) {
			if err := xcryptoCompare(&hashes[i], pw); err != nil {
				b.Error(err)
			}
		})
		theirs += time.Since(start)
		cold += kernelCold()
		if i%2 == 0 {
			ours += verifier()
			batched += kernel()
		} else {
			batched += kernel()
			ours += verifier()
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(b.N) }
	b.ReportMetric(ms(ours), "ms/herd")
	b.ReportMetric(ms(batched), "kernel-ms/herd")
	b.ReportMetric(float64(ours)/float64(batched), "x-kernel")
	b.ReportMetric(ms(cold), "kernel-cold-ms/herd")
	b.ReportMetric(float64(ours)/float64(cold), "x-kernel-cold")
	b.ReportMetric(float64(theirs)/float64(ours), "x-xcrypto")
}

// onWorkers calls f on [0, n) in ranges [i, j) of step, taken in turn
// by GOMAXPROCS goroutines, and returns when all are done.
func onWorkers(n, step int, f func(i, j int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := int(next.Add(int64(step))) - step; i < n; i = int(next.Add(int64(step))) - step {
				f(i, min(i+step, n))
			}
		})
	}
	wg.Wait()
}

// xcryptoCompare compares password with h as k3s does, with
// golang.org/x/crypto/scrypt.
func xcryptoCompare(h *hash, password string) error {
	key, err := xscrypt.Key([]byte(password), h.salt, 1<<h.logN, h.r, h.p, len(h.key))
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(key, h.key) != 1 {
		return ErrMismatchedHashAndPassword
	}
	return nil
}

func mustHashB(b *testing.B, pw string, logN int) string {
	p := DefaultParams
	p.LogN = logN
	h, err := GenerateFromPassword(pw, p)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkHasher answers the k3s drop-in's two questions at k3s's
// parameters: is a lone VerifyHash of a hash never seen (a miss) as fast
// as k3s's own x/crypto scrypt (impl=xcrypto against impl=hasher, one
// hash at a time), and what do 1,000 concurrent VerifyHash calls of one
// (hash, key) cost (calls=1000: scrypt-runs/op is per 1,000 calls)?
func BenchmarkHasher(b *testing.B) {
	const pw = "0123456789abcdef0123456789abcdef"
	// Distinct hashes, so that every op misses the cache; made once.
	hashes := make([]string, 16)
	for i := range hashes {
		hashes[i] = mustHashB(b, pw, 15)
	}
	b.Run("impl=xcrypto", func(b *testing.B) {
		i := 0
		for b.Loop() {
			h, err := parseHash(hashes[i%len(hashes)], Limits{}.withDefaults())
			if err != nil {
				b.Fatal(err)
			}
			if err := xcryptoCompare(&h, pw); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("impl=hasher", func(b *testing.B) {
		var h *Hasher
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if i%len(hashes) == 0 { // a new Hasher each round: a miss again
				b.StopTimer()
				if h != nil {
					h.Close()
				}
				var err error
				if h, err = NewHasher(nil); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			if err := h.VerifyHash(hashes[i%len(hashes)], pw); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.StopTimer()
		h.Close()
	})
	b.Run("calls=1000", func(b *testing.B) {
		var runs uint64
		for b.Loop() {
			h, err := NewHasher(nil)
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for range 1000 {
				wg.Go(func() {
					if err := h.VerifyHash(hashes[0], pw); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			runs += h.Stats().ScryptRuns
			h.Close()
		}
		b.ReportMetric(float64(runs)/float64(b.N), "scrypt-runs/op")
	})
}
