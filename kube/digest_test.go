package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodepass/nodepass/verify"
)

// TestDigestSharedThroughSecrets: a digest one server (Store and Verifier)
// records is patched onto the node's secret, and a second server reads it
// through its own informer and verifies the node without scrypt.
func TestDigestSharedThroughSecrets(t *testing.T) {
	client := newClient(t)
	key := bytes.Repeat([]byte{9}, verify.MinDigestKeyLen)
	first := startStore(t, client, nil)
	v1, err := verify.New(first, &verify.Options{Params: testParams, DigestKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := v1.Ensure(ctx, "worker-1", "right"); err != nil {
		t.Fatal(err)
	}
	v1.Close() // flushes the digest
	if st := v1.Stats(); st.DigestWrites != 1 {
		t.Fatalf("first server: %+v, want its digest written", st)
	}
	sec, err := client.Secrets("kube-system").Get(ctx, "worker-1.node-password.k3s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := base64.StdEncoding.DecodeString(sec.Annotations[DigestAnnotation]); err != nil || len(d) != 32 {
		t.Fatalf("annotation %q: %v", sec.Annotations[DigestAnnotation], err)
	}
	if len(sec.Data) != 1 || sec.Immutable == nil || !*sec.Immutable {
		t.Fatalf("the patch touched more than metadata: %+v", sec)
	}

	second := startStore(t, client, nil)
	eventually(t, "the second server's cache to hold the digest", func() bool {
		_, d, err := second.GetWithDigest(ctx, "worker-1")
		return err == nil && d != nil
	})
	v2, err := verify.New(second, &verify.Options{Params: testParams, DigestKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if err := v2.Verify(ctx, "worker-1", "right"); err != nil {
		t.Fatal(err)
	}
	if err := v2.Verify(ctx, "worker-1", "wrong"); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	// The digest hit makes the password the node's verified one, so the
	// wrong password is refused without scrypt too.
	if st := v2.Stats(); st.DigestHits != 1 || st.ScryptRuns != 0 || st.KnownMatchRejects != 1 {
		t.Fatalf("second server: %+v, want a digest hit, a known-match reject and no scrypt", st)
	}
}
