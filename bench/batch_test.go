package bench

import (
	"strings"
	"testing"
)

// TestBatchedLowerBound: the herd's batched bound is measured with the
// others, and each batch checks the keys it derives.
func TestBatchedLowerBound(t *testing.T) {
	h := testHerd(t)
	if h.LowerBoundBatch <= 0 || h.LowerBound <= 0 {
		t.Fatalf("bounds %v (x/crypto), %v (batched): want both measured", h.LowerBound, h.LowerBoundBatch)
	}
	wrong := &Herd{LogN: h.LogN, Nodes: append([]Node(nil), h.Nodes[:3]...)}
	wrong.Nodes[2].Password = "not-" + wrong.Nodes[2].Password
	if _, err := wrong.timeBatched(t.Context(), 3); err == nil || !strings.Contains(err.Error(), wrong.Nodes[2].Name) {
		t.Errorf("a wrong password in a batch: %v, want an error naming %s", err, wrong.Nodes[2].Name)
	}
}

func TestBatchJob(t *testing.T) {
	h := testHerd(t)
	job, key, err := batchJob(h.Nodes[0].Hash, h.Nodes[0].Password)
	if err != nil || job.N != 1<<testLogN || job.R != 8 || job.P != 1 || job.KeyLen != 64 || len(key) != 64 || len(job.Salt) != 8 {
		t.Fatalf("batchJob = %+v, %d-byte key, %v", job, len(key), err)
	}
	for _, bad := range []string{
		"", "$2:00:4:8:1:AAAA", "$1:zz:4:8:1:AAAA", "$1:00:x:8:1:AAAA", "$1:00:4:0:1:AAAA",
		"$1:00:31:8:1:AAAA", "$1:00:4:8:1:!!", "$1:00:4:8:1:", "$1:00:4:8:1",
	} {
		if _, _, err := batchJob(bad, "pw"); err == nil {
			t.Errorf("batchJob(%q) did not fail", bad)
		}
	}
}
