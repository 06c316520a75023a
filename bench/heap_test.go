package bench

import (
	"runtime"
	"testing"

	"github.com/nodepass/nodepass/scrypt"
)

// TestReadHeapCountsOffHeapBuffers: a scrypt buffer of a huge page or
// more, which on Linux scrypt maps outside the Go heap, is in
// HeapReading.OffHeap while its Pool holds it, so that a run's
// PeakMemory counts what the heap metrics do not.
func TestReadHeapCountsOffHeapBuffers(t *testing.T) {
	const logN, r = 11, 8 // 2 MiB of V: a huge page
	var p scrypt.Pool
	before := ReadHeap().OffHeap
	jobs := []scrypt.Job{{Password: []byte("pw"), Salt: []byte("salt"), N: 1 << logN, R: r, P: 1, KeyLen: 32}}
	p.KeyBatch(jobs, 1)
	if jobs[0].Err != nil {
		t.Fatal(jobs[0].Err)
	}
	held := ReadHeap().OffHeap
	p.Release()
	after := ReadHeap().OffHeap
	if runtime.GOOS != "linux" {
		if held != 0 {
			t.Fatalf("OffHeap %d on %s, where scrypt's buffers are on the heap", held, runtime.GOOS)
		}
		return
	}
	if v := uint64(128 * r << logN); held < before+v {
		t.Fatalf("OffHeap %d with a buffer of %d bytes held, %d before", held, v, before)
	}
	if after >= held {
		t.Fatalf("OffHeap %d after the Pool's Release, %d while it held its buffer", after, held)
	}
}
