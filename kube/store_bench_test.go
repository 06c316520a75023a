package kube

import (
	"fmt"
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
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Get(b.Context(), "Node-500"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
