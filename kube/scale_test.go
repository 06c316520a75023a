package kube

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodepass/nodepass/kube/apitest"
	"github.com/nodepass/nodepass/verify"
)

// scaleEnv sets the number of nodes of TestAPIServerScale (default 500).
const scaleEnv = "NODEPASS_SCALE_NODES"

// scaleNodes returns TestAPIServerScale's number of nodes.
func scaleNodes(t *testing.T) int {
	t.Helper()
	v := os.Getenv(scaleEnv)
	if v == "" {
		return 500
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("$%s = %q, want a positive number", scaleEnv, v)
	}
	return n
}

// parallel runs f(i) for i in [0, n) on workers goroutines.
func parallel(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// heapAlloc returns the live heap after a GC.
func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestAPIServerScale enrolls N nodes (with remembered digests) in a
// namespace that also holds N unrelated secrets of 2 KiB, on an API
// server of its own, then measures what a Store costs there: its start-up
// sync time and heap, and Get's latency; and reboots every node against
// three Verifiers over three Stores (each node asks each server once),
// which must cost no scrypt and no API request. N is 500, or
// $NODEPASS_SCALE_NODES: RELIABILITY.md's figures are for 5000, without
// -race.
func TestAPIServerScale(t *testing.T) {
	n := scaleNodes(t)
	srv := apitest.Start(t)
	admin := coreClient(t, srv.Admin)
	ctx := t.Context()

	// The namespace: N unrelated secrets, N nodes enrolled with digests.
	began := time.Now()
	blob := []byte(strings.Repeat("x", 2048))
	parallel(n, 16, func(i int) {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d-config", i), Namespace: "kube-system"},
			Data:       map[string][]byte{"config": blob},
		}
		if _, err := admin.Secrets("kube-system").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	})
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%05d", i)
	}
	enrollCfg, enrollReqs := counted(srv.Node)
	enroller := apiStoreWith(t, enrollCfg, &Options{DigestWrites: 1000}, true)
	v := digestVerifier(t, enroller, verify.Options{})
	const batch = 1000 // under the Verifier's queue of digests to write
	for from := 0; from < n; from += batch {
		to := min(from+batch, n)
		parallel(to-from, 16, func(i int) {
			if err := v.Ensure(ctx, nodes[from+i], password(nodes[from+i])); err != nil {
				t.Error(err)
			}
		})
		await(t, "the batch's digests", func() bool { st := v.Stats(); return st.DigestWrites+st.DigestWriteFailures == uint64(to) })
	}
	v.Close()
	if st := v.Stats(); st.Enrollments != uint64(n) || st.DigestWrites != uint64(n) {
		t.Fatalf("enrolling: %+v, want %d enrollments and digests", st, n)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d unrelated secrets and %d nodes enrolled with digests in %v; the enrolling Store's API requests per node: %s",
		n, n, time.Since(began).Round(time.Millisecond), enrollReqs.perNode(n))

	// One Store's start-up: time to sync, heap held.
	cfgs, reqs := make([]*rest.Config, 3), make([]*requests, 3)
	for i := range cfgs {
		cfgs[i], reqs[i] = counted(srv.Node)
	}
	before := heapAlloc()
	start := time.Now()
	stores := []*Store{apiStore(t, cfgs[0], true)}
	synced := time.Since(start)
	heap := int64(heapAlloc()) - int64(before)
	t.Logf("one Store over %d secrets: synced in %v with %d API requests, heap %.1f MiB (%.0f B per secret)",
		2*n, synced.Round(time.Millisecond), reqs[0].total(), float64(heap)/(1<<20), float64(heap)/float64(2*n))

	// Get, from the cache.
	for _, tc := range []struct {
		name  string
		nodes []string
	}{{"hit", nodes}, {"miss", []string{"absent-1", "absent-2"}}} {
		r := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
				for pb.Next() {
					stores[0].Get(ctx, tc.nodes[rng.IntN(len(tc.nodes))])
				}
			})
		})
		t.Logf("Get (%s), GOMAXPROCS %d: %v, %d B/op, %d allocs/op", tc.name, runtime.GOMAXPROCS(0), r.NsPerOp(), r.AllocedBytesPerOp(), r.AllocsPerOp())
	}

	// The warm reboot: every node asks each of three servers once.
	stores = append(stores, apiStore(t, cfgs[1], true), apiStore(t, cfgs[2], true))
	servers := make([]*verify.Verifier, 3)
	for i, s := range stores {
		servers[i] = digestVerifier(t, s, verify.Options{})
	}
	var base, baseInformer [3]int
	for i := range reqs {
		base[i], baseInformer[i] = reqs[i].total(), reqs[i].count(collection)
	}
	start = time.Now()
	parallel(3*n, 64, func(i int) {
		node := nodes[i/3]
		if err := servers[i%3].Ensure(ctx, node, password(node)); err != nil {
			t.Errorf("%s on server %d: %v", node, i%3+1, err)
		}
	})
	took := time.Since(start)
	var scrypt, hits uint64
	requests, informers := 0, 0
	for i, v := range servers {
		st := v.Stats()
		scrypt += st.ScryptRuns
		hits += st.DigestHits
		requests += reqs[i].total() - base[i]
		informers += reqs[i].count(collection) - baseInformer[i]
	}
	t.Logf("warm reboot of %d nodes on 3 servers: %d verifications in %v, %d scrypt, %d digest hits, %d API requests (%.4f per verification)",
		n, 3*n, took.Round(time.Millisecond), scrypt, hits, requests, float64(requests)/float64(3*n))
	// An informer may renew its watch meanwhile; nothing else asks.
	if scrypt != 0 || hits != uint64(3*n) || requests != informers {
		t.Errorf("warm reboot: %d scrypt, %d digest hits, %d API requests not the informers'; want 0, %d, 0", scrypt, hits, requests-informers, 3*n)
	}
}
