package kube

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/nodepass/nodepass/kube/kubefake"
)

// BenchmarkGet answers: what does one Get cost a request once the cache
// has synced (secret name, lister read, hash copy), with 1000 node secrets
// in the namespace?
func BenchmarkGet(b *testing.B) {
	client, err := kubefake.New()
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if err := client.Tracker.Add(secret(fmt.Sprintf("node-%d.node-password.k3s", i), "", map[string][]byte{"hash": []byte("$1:0123456789abcdef:15:8:1:" + fmt.Sprint(i))})); err != nil {
			b.Fatal(err)
		}
	}
	s, err := New(client, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	if err := s.WaitForSync(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Get(b.Context(), "Node-500"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCacheMemory answers: how much heap does the informer cache hold
// in a namespace with 200 Helm release secrets of 256 KiB and 300 node
// secrets, with the Store's transform and without it? It reports the heap
// growth from Start to synced, after a GC, as cache-MiB.
func BenchmarkCacheMemory(b *testing.B) {
	for _, transform := range []bool{true, false} {
		b.Run(fmt.Sprintf("transform=%v", transform), func(b *testing.B) {
			client, err := kubefake.New()
			if err != nil {
				b.Fatal(err)
			}
			release := make([]byte, 256<<10)
			for i := range 200 {
				if err := client.Tracker.Add(secret(fmt.Sprintf("sh.helm.release.v1.app%d.v1", i), "helm.sh/release.v1", map[string][]byte{"release": release})); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 300 {
				if err := client.Tracker.Add(secret(fmt.Sprintf("node-%d.node-password.k3s", i), "k3s.cattle.io/node-password", map[string][]byte{"hash": make([]byte, 128)})); err != nil {
					b.Fatal(err)
				}
			}
			var total float64
			for b.Loop() {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.HeapAlloc
				s, err := New(client, nil)
				if err != nil {
					b.Fatal(err)
				}
				if !transform {
					s.informer.SetTransform(func(o any) (any, error) { return o, nil })
				}
				if err := s.Start(b.Context()); err != nil {
					b.Fatal(err)
				}
				if err := s.WaitForSync(b.Context()); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&ms)
				total += float64(int64(ms.HeapAlloc)-int64(before)) / (1 << 20)
				s.Close()
			}
			b.ReportMetric(total/float64(b.N), "cache-MiB")
		})
	}
}
