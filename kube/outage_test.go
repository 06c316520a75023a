package kube

// Tests that kill the API server (kube/apitest's Kill and Restart) and
// check what a Store and the Verifiers over it promise meanwhile. They
// share an API server of their own, restartable, so that the tests
// sharing apiserver never see it down.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodepass/nodepass/kube/apitest"
	"github.com/nodepass/nodepass/verify"
)

// restartable is the API server the outage tests kill and restart.
var restartable apitest.Shared

// collection is the request path of the informer's lists and watches.
const collection = "GET /api/v1/namespaces/kube-system/secrets"

// digestKey is the DigestKey of every Verifier in these tests.
var digestKey = []byte(strings.Repeat("k", verify.MinDigestKeyLen))

// password is the password of node in these tests.
func password(node string) string { return "password-of-" + node }

// outageVerifier is a Verifier over s with remembered digests, closed
// when the test ends; opts may add options.
func outageVerifier(t *testing.T, s *Store, opts verify.Options) *verify.Verifier {
	t.Helper()
	opts.Params, opts.DigestKey = testParams, digestKey
	v, err := verify.New(s, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// storedSecret is what the API server holds of a node-password secret.
type storedSecret struct {
	uid          types.UID
	hash, digest string
}

// nodeSecrets returns the node-password secrets of kube-system, by name.
func nodeSecrets(t *testing.T, admin *corev1client.CoreV1Client) map[string]storedSecret {
	t.Helper()
	list, err := admin.Secrets("kube-system").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]storedSecret)
	for _, sec := range list.Items {
		if strings.HasSuffix(sec.Name, ".node-password.k3s") {
			m[sec.Name] = storedSecret{sec.UID, string(sec.Data[HashKey]), sec.Annotations[DigestAnnotation]}
		}
	}
	return m
}

// sameSecrets reports every secret of before that after lost or holds
// with another UID or hash, or, with digests, another digest.
func sameSecrets(t *testing.T, before, after map[string]storedSecret, digests bool) {
	t.Helper()
	for name, b := range before {
		a, ok := after[name]
		if !digests {
			a.digest, b.digest = "", ""
		}
		if !ok {
			t.Errorf("%s lost", name)
		} else if a != b {
			t.Errorf("%s changed: %+v, was %+v", name, a, b)
		}
	}
}

// isStoreError reports whether err is the Verifier's answer to a store
// that failed (kube's error, wrapped), and nothing else: not a verdict on
// the password, not "not found".
func isStoreError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "verify: store ") && strings.Contains(err.Error(), "kube: ") &&
		!errors.Is(err, verify.ErrNotFound) && !errors.Is(err, verify.ErrMismatchedHashAndPassword) &&
		!errors.Is(err, verify.ErrInvalidInput) && !errors.Is(err, verify.ErrInvalidHash) &&
		!errors.Is(err, verify.ErrOverloaded) && !errors.Is(err, verify.ErrClosed)
}

// enrollElsewhere stores the hash of password(node) for each node, as
// another server would, with no digest.
func enrollElsewhere(t *testing.T, other *Store, nodes []string) {
	t.Helper()
	for _, node := range nodes {
		if err := other.Create(t.Context(), node, mustHash(t, password(node))); err != nil {
			t.Fatal(err)
		}
	}
}

// names returns n node names for what.
func names(t *testing.T, what string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = nodeName(t, fmt.Sprint(what, i))
	}
	return s
}

// TestAPIServerRestart kills the API server (and etcd) for longer than it
// takes the informer to back off three times, then restarts it over the
// same data. Meanwhile enrolled nodes verify from the cache, a wrong
// password is refused, digest writes fail and are counted, and a new
// enrollment fails with a store error within its context (or is let in
// with EnrollFailOpen). After the restart the informer resyncs, new
// enrollments succeed, and no secret is lost or changed.
func TestAPIServerRestart(t *testing.T) {
	srv := restartable.Get(t)
	admin := coreClient(t, srv.Admin)
	cfg, req := counted(srv.Node)
	s := apiStore(t, cfg, true)
	other := apiStore(t, srv.Node, false) // another server
	v := outageVerifier(t, s, verify.Options{})

	mine, theirs := names(t, "mine", 20), names(t, "theirs", 5)
	for _, node := range mine {
		if err := v.Ensure(t.Context(), node, password(node)); err != nil {
			t.Fatal(err)
		}
	}
	enrollElsewhere(t, other, theirs)
	await(t, "the digests of the nodes enrolled here", func() bool { return v.Stats().DigestWrites == uint64(len(mine)) })
	await(t, "the other server's secrets in the cache", func() bool {
		for _, node := range theirs {
			if _, err := s.Get(t.Context(), node); err != nil {
				return false
			}
		}
		return true
	})
	before := nodeSecrets(t, admin)

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	failed := req.failures(collection)
	await(t, "the informer to fail three times", func() bool { return req.failures(collection)-failed >= 3 })

	// Enrolled nodes verify from the cache: on a new Verifier, from the
	// digests remembered on their secrets, or with scrypt over the hash
	// the cache holds. Their digests cannot be written.
	fresh := outageVerifier(t, s, verify.Options{})
	for _, node := range append(mine, theirs...) {
		if err := fresh.Ensure(t.Context(), node, password(node)); err != nil {
			t.Errorf("%s during the outage: %v", node, err)
		}
		if err := fresh.Ensure(t.Context(), node, "wrong"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
			t.Errorf("%s, a wrong password during the outage: %v, want a mismatch", node, err)
		}
	}
	fresh.Close() // flushes the digests of theirs, which fail
	if st := fresh.Stats(); st.DigestHits != uint64(len(mine)) || st.ScryptRuns != uint64(len(theirs)) ||
		st.DigestWrites != 0 || st.DigestWriteFailures != uint64(len(theirs)) || st.StoreErrors != 0 {
		t.Errorf("a new Verifier during the outage: %+v; want %d digest hits, %d scrypt and as many failed digest writes, no store error",
			st, len(mine), len(theirs))
	}

	// A new enrollment fails with a store error, within its context.
	newNode, openNode := nodeName(t, "new"), nodeName(t, "open")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := v.Ensure(ctx, newNode, "first"); !isStoreError(err) || ctx.Err() != nil {
		t.Errorf("a new enrollment during the outage: %v (context %v); want a store error before the context ends", err, ctx.Err())
	} else {
		t.Logf("a new enrollment during the outage: %v", err)
	}
	// With EnrollFailOpen it is let in, or fails as without.
	reported := make(chan error, 1)
	open := outageVerifier(t, s, verify.Options{EnrollFailOpen: true, OnDeferredEnrollment: func(_ string, err error) { reported <- err }})
	errOpen := open.Ensure(ctx, openNode, "open")
	if errOpen != nil && !isStoreError(errOpen) {
		t.Errorf("a new enrollment during the outage with EnrollFailOpen: %v; want let in or a store error", errOpen)
	}
	t.Logf("with EnrollFailOpen: %v", errOpen)

	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("the informer's lists and watches failed %d times during the outage", req.failures(collection)-failed)

	// The informer resyncs: a secret another server writes now reaches
	// the cache (the Store never read it directly).
	late := nodeName(t, "late")
	enrollElsewhere(t, other, []string{late})
	await(t, "the cache to see a secret written after the restart", func() bool {
		_, err := s.Get(t.Context(), late)
		return err == nil
	})
	// New enrollments succeed, and the refused one left nothing behind.
	if err := v.Ensure(t.Context(), newNode, "second"); err != nil {
		t.Errorf("a new enrollment after the restart: %v", err)
	}
	if err := v.Ensure(t.Context(), newNode, "first"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Errorf("the refused enrollment's password: %v, want a mismatch", err)
	}
	if errOpen == nil {
		select {
		case err := <-reported:
			if err != nil {
				t.Errorf("the enrollment let in during the outage was not stored: %v", err)
			}
		case <-time.After(2 * time.Minute):
			t.Error("the enrollment let in during the outage not stored 2 minutes after the restart")
		}
	} else if err := open.Ensure(t.Context(), openNode, "open"); err != nil {
		t.Errorf("with EnrollFailOpen, after the restart: %v", err)
	}

	// No secret lost or changed, in the API server or the cache.
	sameSecrets(t, before, nodeSecrets(t, admin), true)
	for _, node := range append(mine, theirs...) {
		name, _ := s.SecretName(node)
		if h, err := s.Get(t.Context(), node); err != nil || h != before[name].hash {
			t.Errorf("the cache after the restart: %s = %q, %v; want its hash", node, h, err)
		}
	}
}
