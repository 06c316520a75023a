package verify

import (
	"context"
	"testing"
)

// TestVerifiersKeepOwnBuffers: two Verifiers in one process keep their
// scrypt buffers apart: one's Close (or quiet period) does not drop the
// other's idle buffers.
func TestVerifiersKeepOwnBuffers(t *testing.T) {
	s := NewMemoryStore()
	s.Set("n", mustHash(t, "pw"))
	a, err := New(s, &Options{Params: testParams})
	if err != nil {
		t.Fatal(err)
	}
	b := newTestVerifier(t, s, nil)
	for _, v := range []*Verifier{a, b} {
		if err := v.Verify(context.Background(), "n", "pw"); err != nil {
			t.Fatal(err)
		}
	}
	before := idleBuffers(b)
	if before == 0 {
		t.Fatal("no idle buffers after a computation")
	}
	a.Close()
	if n := idleBuffers(b); n != before {
		t.Fatalf("another Verifier's Close left %d of %d idle buffers", n, before)
	}
}
