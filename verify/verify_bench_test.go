package verify

import (
	"bytes"
	"context"
	"fmt"
	"testing"
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
// known (path=hit: a node's retry, from many goroutines at once), what
// does a node cost whose verification another process remembered
// (path=digest: its first request after a restart, one HMAC and no
// scrypt), and what does the Verifier add around scrypt on a miss
// (path=miss, logN 15)?
func BenchmarkVerify(b *testing.B) {
	const pw = "0123456789abcdef0123456789abcdef"
	b.Run("path=hit", func(b *testing.B) {
		s := NewMemoryStore()
		v, err := New(s, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer v.Close()
		const nodes = 320
		for i := range nodes {
			s.Set(fmt.Sprint("node-", i), mustHashB(b, pw, 4))
			if err := v.Verify(context.Background(), fmt.Sprint("node-", i), pw); err != nil {
				b.Fatal(err)
			}
		}
		names := make([]string, nodes)
		for i := range names {
			names[i] = fmt.Sprint("node-", i)
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
	})
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

func mustHashB(b *testing.B, pw string, logN int) string {
	p := DefaultParams
	p.LogN = logN
	h, err := GenerateFromPassword(pw, p)
	if err != nil {
		b.Fatal(err)
	}
	return h
}
