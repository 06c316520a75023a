package cache

import (
	"fmt"
	"testing"
)

// BenchmarkGet answers: what does a cache lookup cost, key derivation
// included, with many goroutines reading at once (a herd's retries)?
func BenchmarkGet(b *testing.B) {
	const hash = "$1:0001020304050607:15:8:1:kg9Jrz3bATlkXiCqL7d8SkSTs/2HeiPYnoI/BbhQCduby3WCOic74e71wmS0W2Hwv33if/xVbwSOfHTMwZY5Xg"
	const pw = "0123456789abcdef0123456789abcdef"
	for _, hit := range []bool{true, false} {
		b.Run(fmt.Sprintf("hit=%v", hit), func(b *testing.B) {
			c, err := New(nil)
			if err != nil {
				b.Fatal(err)
			}
			names := make([]string, 320)
			for i := range names {
				names[i] = fmt.Sprint("node-", i)
				if hit {
					c.Put(c.Key(names[i], hash, pw), Match)
				}
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, ok := c.Get(c.Key(names[i%len(names)], hash, pw)); ok != hit {
						b.Error("unexpected hit/miss")
						return
					}
					i++
				}
			})
		})
	}
}
