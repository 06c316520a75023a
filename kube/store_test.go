package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodepass/nodepass/internal/dnsname"
	"github.com/nodepass/nodepass/kube/kubefake"
	"github.com/nodepass/nodepass/verify"
)

// testParams keep scrypt cheap in tests.
var testParams = verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}

// newClient returns a fake core/v1 client holding objs.
func newClient(t testing.TB, objs ...runtime.Object) *kubefake.Client {
	t.Helper()
	c, err := kubefake.New(objs...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startStore makes a Store over client, starts it, waits for its cache to
// sync and closes it when the test ends.
func startStore(t *testing.T, client *kubefake.Client, opts *Options) *Store {
	t.Helper()
	s, err := New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// startVerifier is startStore with a Verifier over the Store, closed when
// the test ends (before the Store).
func startVerifier(t *testing.T, client *kubefake.Client) (*Store, *verify.Verifier) {
	t.Helper()
	s := startStore(t, client, nil)
	v, err := verify.New(s, &verify.Options{Params: testParams})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return s, v
}

// secret returns a secret as k3s or an operator would have written it.
func secret(name string, typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Type:       typ,
		Data:       data,
	}
}

func mustHash(t *testing.T, password string) string {
	t.Helper()
	h, err := verify.GenerateFromPassword(password, testParams)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// eventually polls cond until it holds, failing the test after 10 s. It
// waits for the informer to deliver a change made behind its back; it
// asserts nothing about time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 1000 {
			t.Fatalf("still waiting for %s after 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freezeWatch makes every watch on secrets deliver nothing: the informer
// syncs from its list and never hears of later changes, which is the
// cache lag after a Create, made permanent.
func freezeWatch(client *kubefake.Client) {
	client.PrependWatchReactor("secrets", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
}

func TestNewOptions(t *testing.T) {
	client := newClient(t)
	for _, tc := range []struct {
		opts *Options
		want string // error substring; "" means success
	}{
		{nil, ""},
		{&Options{Program: "rke2", Namespace: "other"}, ""},
		{&Options{Program: "k8s"}, "Program"},
		{&Options{Namespace: "Kube_System"}, "Namespace"},
		{&Options{ReadAfterCreate: -1}, "ReadAfterCreate"},
	} {
		s, err := New(client, tc.opts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("New(%+v): %v", tc.opts, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "kube: ")):
			t.Errorf("New(%+v) = %v, want a kube: error about %s", tc.opts, err, tc.want)
		}
		if s != nil {
			s.Close()
		}
	}
	if _, err := New(nil, nil); err == nil {
		t.Error("New(nil client) succeeded")
	}
}

func TestCreateNamesAndMarksSecrets(t *testing.T) {
	for _, prog := range []string{"k3s", "rke2"} {
		t.Run("program="+prog, func(t *testing.T) {
			client := newClient(t)
			s := startStore(t, client, &Options{Program: prog})
			if err := s.Create(t.Context(), "Worker-A.example", "$1:hash"); err != nil {
				t.Fatal(err)
			}
			name := "worker-a.example.node-password." + prog
			got, err := client.Secrets("kube-system").Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("secret %s not created: %v", name, err)
			}
			if got.Immutable == nil || !*got.Immutable {
				t.Errorf("Immutable = %v, want true", got.Immutable)
			}
			if want := corev1.SecretType(prog + ".cattle.io/node-password"); got.Type != want {
				t.Errorf("Type = %q, want %q", got.Type, want)
			}
			if h := string(got.Data["hash"]); h != "$1:hash" || len(got.Data) != 1 {
				t.Errorf("Data = %q, want only hash=$1:hash", got.Data)
			}
			if n, _ := s.SecretName("Worker-A.example"); n != name {
				t.Errorf("SecretName = %q, want %q", n, name)
			}
		})
	}
}

func TestGetReadsBothSecretTypes(t *testing.T) {
	client := newClient(t,
		secret("new.node-password.k3s", "k3s.cattle.io/node-password", map[string][]byte{"hash": []byte("$1:new")}),
		secret("old.node-password.k3s", corev1.SecretTypeOpaque, map[string][]byte{"hash": []byte("$1:old")}),
		secret("other.node-password.rke2", "rke2.cattle.io/node-password", map[string][]byte{"hash": []byte("$1:rke2")}),
	)
	s := startStore(t, client, nil)
	for node, want := range map[string]string{"new": "$1:new", "OLD": "$1:old"} {
		if got, err := s.Get(t.Context(), node); err != nil || got != want {
			t.Errorf("Get(%q) = %q, %v; want %q", node, got, err, want)
		}
	}
	// Another program's secret is not this Store's.
	if _, err := s.Get(t.Context(), "other"); !errors.Is(err, verify.ErrNotFound) {
		t.Errorf("Get(other) of a k3s Store over an rke2 secret = %v, want ErrNotFound", err)
	}
	rke := startStore(t, client, &Options{Program: "rke2"})
	if got, err := rke.Get(t.Context(), "other"); err != nil || got != "$1:rke2" {
		t.Errorf("rke2 Get(other) = %q, %v", got, err)
	}
}

func TestNamespaceIsolation(t *testing.T) {
	elsewhere := secret("n.node-password.k3s", "", map[string][]byte{"hash": []byte("$1:x")})
	elsewhere.Namespace = "default"
	client := newClient(t, elsewhere)
	s := startStore(t, client, nil)
	if _, err := s.Get(t.Context(), "n"); !errors.Is(err, verify.ErrNotFound) {
		t.Errorf("Get of a secret in another namespace = %v, want ErrNotFound", err)
	}
	other := startStore(t, client, &Options{Namespace: "default"})
	if got, err := other.Get(t.Context(), "n"); err != nil || got != "$1:x" {
		t.Errorf("Get with Namespace default = %q, %v", got, err)
	}
}

func TestNotFoundOnlyAfterSync(t *testing.T) {
	client := newClient(t)
	release := make(chan struct{})
	var lists atomic.Int32
	client.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		<-release
		return false, nil, nil
	})
	s, err := New(client, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	if _, err := s.Get(t.Context(), "n"); err == nil || errors.Is(err, verify.ErrNotFound) {
		t.Fatalf("Get before Start = %v, want an error that is not ErrNotFound", err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err == nil {
		t.Error("second Start succeeded")
	}
	eventually(t, "the informer to list", func() bool { return lists.Load() > 0 })

	// The list is blocked: the cache is empty and not synced.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Get(ctx, "n"); !errors.Is(err, context.Canceled) || errors.Is(err, verify.ErrNotFound) {
		t.Fatalf("Get before sync with an ended ctx = %v, want context.Canceled and not ErrNotFound", err)
	}
	if s.HasSynced() {
		t.Fatal("HasSynced before the list returned")
	}

	// A Get waiting for the sync gets its answer once the list returns.
	done := make(chan error, 1)
	go func() {
		_, err := s.Get(t.Context(), "n")
		done <- err
	}()
	close(release)
	if err := <-done; !errors.Is(err, verify.ErrNotFound) {
		t.Fatalf("Get after sync = %v, want ErrNotFound", err)
	}
	if !s.HasSynced() {
		t.Error("HasSynced false after a Get answered from the cache")
	}
}

func TestStopped(t *testing.T) {
	client := newClient(t, secret("n.node-password.k3s", "", map[string][]byte{"hash": []byte("$1:x")}))
	s := startStore(t, client, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "n"); err == nil || errors.Is(err, verify.ErrNotFound) {
		t.Errorf("Get after Close = %v, want an error that is not ErrNotFound", err)
	}
	if err := s.Start(t.Context()); err == nil {
		t.Error("Start after Close succeeded")
	}

	// The end of Start's context stops the Store too.
	ctx, cancel := context.WithCancel(t.Context())
	s2, err := New(client, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Get(t.Context(), "n"); err != nil {
		t.Fatal(err)
	}
	cancel()
	eventually(t, "the Store to stop", func() bool {
		_, err := s2.Get(t.Context(), "n")
		return err != nil
	})
}

func TestCreateAlreadyExists(t *testing.T) {
	// An older k3s wrote Opaque secrets; they exist all the same.
	client := newClient(t, secret("old.node-password.k3s", corev1.SecretTypeOpaque, map[string][]byte{"hash": []byte("$1:old")}))
	s := startStore(t, client, nil)
	if err := s.Create(t.Context(), "old", "$1:new"); !errors.Is(err, verify.ErrExists) || !strings.HasPrefix(err.Error(), "kube: ") {
		t.Errorf("Create over an existing secret = %v, want kube: ... ErrExists", err)
	}
	if err := s.Create(t.Context(), "new", "$1:a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), "new", "$1:b"); !errors.Is(err, verify.ErrExists) {
		t.Errorf("second Create = %v, want ErrExists", err)
	}
	if got, err := s.Get(t.Context(), "new"); err != nil || got != "$1:a" {
		t.Errorf("Get after two Creates = %q, %v; want the first hash", got, err)
	}
}

func TestAPIErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("RBAC says no"))
	client := newClient(t)
	client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, forbidden
	})
	s := startStore(t, client, nil)

	err := s.Create(t.Context(), "n", "$1:x")
	if err == nil || errors.Is(err, verify.ErrExists) || !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), "kube: creating secret kube-system/n.node-password.k3s") {
		t.Errorf("Create with a forbidden API = %v, want a wrapped Forbidden", err)
	}

	// Through the Verifier: a store failure, never a mismatch, and nothing
	// cached: the next join after the API recovers enrolls.
	v, err := verify.New(s, &verify.Options{Params: testParams})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	err = v.Ensure(t.Context(), "n", "pw")
	if err == nil || errors.Is(err, verify.ErrMismatchedHashAndPassword) || !apierrors.IsForbidden(err) {
		t.Errorf("Ensure with a forbidden API = %v, want the Forbidden error", err)
	}
	if st := v.Stats(); st.StoreErrors != 1 || st.Mismatches != 0 || st.Enrollments != 0 {
		t.Errorf("Stats = %+v, want 1 store error, no mismatch, no enrollment", st)
	}
}

func TestGetFallbackAPIError(t *testing.T) {
	client := newClient(t)
	freezeWatch(client)
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is sad")
	})
	s := startStore(t, client, nil)
	if err := s.Create(t.Context(), "n", "$1:x"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(t.Context(), "n")
	if err == nil || errors.Is(err, verify.ErrNotFound) || !apierrors.IsServiceUnavailable(err) {
		t.Errorf("Get falling back to a failing API = %v, want the wrapped 503", err)
	}
}

func TestMissingHashIsNotNotFound(t *testing.T) {
	client := newClient(t,
		secret("nohash.node-password.k3s", corev1.SecretTypeOpaque, map[string][]byte{"other": []byte("x")}),
		secret("empty.node-password.k3s", corev1.SecretTypeOpaque, map[string][]byte{"hash": nil}),
	)
	s, v := startVerifier(t, client)
	for _, node := range []string{"nohash", "empty"} {
		if _, err := s.Get(t.Context(), node); !errors.Is(err, verify.ErrInvalidHash) || errors.Is(err, verify.ErrNotFound) {
			t.Errorf("Get(%s) = %v, want ErrInvalidHash", node, err)
		}
		if err := v.Ensure(t.Context(), node, "pw"); !errors.Is(err, verify.ErrInvalidHash) {
			t.Errorf("Ensure(%s) = %v, want ErrInvalidHash", node, err)
		}
	}
	if st := v.Stats(); st.Enrollments != 0 {
		t.Errorf("a node whose secret lacks its hash enrolled: %+v", st)
	}
}

func TestInvalidNodeName(t *testing.T) {
	s := startStore(t, newClient(t), nil)
	for _, node := range []string{"", "a/b", "under_score", strings.Repeat("a", 240)} {
		if _, err := s.Get(t.Context(), node); !errors.Is(err, verify.ErrInvalidInput) {
			t.Errorf("Get(%q) = %v, want ErrInvalidInput", node, err)
		}
		if err := s.Create(t.Context(), node, "$1:x"); !errors.Is(err, verify.ErrInvalidInput) {
			t.Errorf("Create(%q) = %v, want ErrInvalidInput", node, err)
		}
	}
	if err := s.Create(t.Context(), "n", ""); err == nil {
		t.Error("Create with an empty hash succeeded")
	}
}

func TestReadAfterCreate(t *testing.T) {
	client := newClient(t)
	freezeWatch(client)
	s := startStore(t, client, nil)
	clock := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	s.recent = utilcache.NewExpiringWithClock(clock)
	var gets atomic.Int32
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets.Add(1)
		return false, nil, nil
	})

	// Created by this Store: the cache will never see it, Get must.
	if err := s.Create(t.Context(), "mine", "$1:mine"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(t.Context(), "mine"); err != nil || got != "$1:mine" {
		t.Fatalf("Get right after Create = %q, %v", got, err)
	}

	// Created by another server: the cache does not know it, Create says
	// AlreadyExists, and Get then reads the stored hash.
	if _, err := client.Secrets("kube-system").Create(t.Context(),
		secret("theirs.node-password.k3s", "", map[string][]byte{"hash": []byte("$1:theirs")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "theirs"); !errors.Is(err, verify.ErrNotFound) {
		t.Fatalf("Get of a secret the cache has not seen = %v, want ErrNotFound", err)
	}
	if err := s.Create(t.Context(), "theirs", "$1:mine"); !errors.Is(err, verify.ErrExists) {
		t.Fatalf("Create = %v, want ErrExists", err)
	}
	if got, err := s.Get(t.Context(), "theirs"); err != nil || got != "$1:theirs" {
		t.Fatalf("Get after AlreadyExists = %q, %v", got, err)
	}
	if n := gets.Load(); n != 2 {
		t.Errorf("%d direct GETs, want 2 (one per lagging name)", n)
	}

	// Deleted since: the direct GET says so.
	if err := client.Secrets("kube-system").Delete(t.Context(), "mine.node-password.k3s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "mine"); !errors.Is(err, verify.ErrNotFound) {
		t.Errorf("Get of a deleted secret = %v, want ErrNotFound", err)
	}

	// The window closes: a miss is a miss again, with no API call.
	clock.Step(DefaultReadAfterCreate)
	before := gets.Load()
	if _, err := s.Get(t.Context(), "theirs"); !errors.Is(err, verify.ErrNotFound) {
		t.Errorf("Get after ReadAfterCreate = %v, want the cache's ErrNotFound", err)
	}
	if gets.Load() != before {
		t.Error("Get made an API call after the ReadAfterCreate window")
	}
	// Expired entries are swept on the next add.
	if err := s.Create(t.Context(), "third", "$1:x"); err != nil {
		t.Fatal(err)
	}
	if n := s.recent.Len(); n != 1 {
		t.Errorf("recent holds %d names after the sweep, want 1", n)
	}
}

// TestEnsureOverLaggingCache is the race the read-after-create window
// exists for: another server enrolled the node a moment ago and this
// Store's cache has not heard of it. Without the window the Verifier would
// find no hash after AlreadyExists and fail the join.
func TestEnsureOverLaggingCache(t *testing.T) {
	client := newClient(t)
	freezeWatch(client)
	_, v := startVerifier(t, client)
	if _, err := client.Secrets("kube-system").Create(t.Context(),
		secret("n.node-password.k3s", "k3s.cattle.io/node-password", map[string][]byte{"hash": []byte(mustHash(t, "right"))}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := v.Ensure(t.Context(), "n", "right"); err != nil {
		t.Errorf("Ensure with the stored password = %v", err)
	}
	if err := v.Ensure(t.Context(), "n", "wrong"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Errorf("Ensure with another password = %v, want a mismatch", err)
	}
	// Enrolled through this Store: the next Verify finds the hash at once.
	if err := v.Ensure(t.Context(), "m", "pw"); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(t.Context(), "m", "pw"); err != nil {
		t.Errorf("Verify right after enrolling = %v", err)
	}
}

// TestVerifierEndToEnd runs the Verifier over the Store while the secrets
// change behind the cache: enrollment, rotation and deletion.
func TestVerifierEndToEnd(t *testing.T) {
	client := newClient(t)
	s, v := startVerifier(t, client)
	ctx := t.Context()
	secrets := client.Secrets("kube-system")
	const name = "node-1.node-password.k3s"

	if err := v.Ensure(ctx, "Node-1", "first"); err != nil {
		t.Fatalf("enroll: %v", err)
	}
	if err := v.Ensure(ctx, "node-1", "first"); err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	if err := v.Ensure(ctx, "node-1", "intruder"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Fatalf("join with another password = %v, want a mismatch", err)
	}

	// Rotation: an operator rewrites the secret (delete and create, as it
	// is immutable). The cache follows, and the old password stops working
	// although it is in the Verifier's cache.
	rotated := mustHash(t, "second")
	if err := secrets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Create(ctx, secret(name, "k3s.cattle.io/node-password", map[string][]byte{"hash": []byte(rotated)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rotated hash", func() bool { h, _ := s.Get(ctx, "node-1"); return h == rotated })
	if err := v.Ensure(ctx, "node-1", "first"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Errorf("old password after rotation = %v, want a mismatch", err)
	}
	if err := v.Ensure(ctx, "node-1", "second"); err != nil {
		t.Errorf("new password after rotation = %v", err)
	}

	// An update in place (which a mutable, older secret allows) is seen too.
	updated := mustHash(t, "third")
	if _, err := secrets.Update(ctx, secret(name, corev1.SecretTypeOpaque, map[string][]byte{"hash": []byte(updated)}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the updated hash", func() bool { h, _ := s.Get(ctx, "node-1"); return h == updated })
	if err := v.Verify(ctx, "node-1", "second"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Errorf("password after update = %v, want a mismatch", err)
	}
	if err := v.Verify(ctx, "node-1", "third"); err != nil {
		t.Errorf("updated password = %v", err)
	}

	// Deletion: the node may enroll again, as in k3s.
	if err := secrets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion", func() bool { _, err := s.Get(ctx, "node-1"); return errors.Is(err, verify.ErrNotFound) })
	if err := v.Verify(ctx, "node-1", "third"); !errors.Is(err, verify.ErrNotFound) {
		t.Errorf("Verify after deletion = %v, want ErrNotFound", err)
	}
	if err := v.Ensure(ctx, "node-1", "fourth"); err != nil {
		t.Errorf("re-enroll after deletion = %v", err)
	}
	if st := v.Stats(); st.Enrollments != 2 || st.StoreErrors != 0 {
		t.Errorf("Stats = %+v, want 2 enrollments and no store error", st)
	}
}

// TestConcurrentJoins enrolls many nodes at once and joins each twice with
// racing first joins; run under -race it checks the Store's locking.
func TestConcurrentJoins(t *testing.T) {
	client := newClient(t)
	_, v := startVerifier(t, client)
	const nodes = 30
	var wg sync.WaitGroup
	errs := make(chan error, 2*nodes)
	for i := range nodes {
		for range 2 {
			wg.Go(func() {
				if err := v.Ensure(t.Context(), fmt.Sprintf("n%d", i), fmt.Sprintf("pw%d", i)); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := client.Secrets("kube-system").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != nodes {
		t.Errorf("%d secrets, want %d", len(list.Items), nodes)
	}
	if st := v.Stats(); st.Enrollments != nodes {
		t.Errorf("%d enrollments, want %d", st.Enrollments, nodes)
	}
}

func TestTransformKeepsOnlyWhatGetNeeds(t *testing.T) {
	big := make([]byte, 64<<10)
	helm := secret("sh.helm.release.v1.traefik.v1", "helm.sh/release.v1", map[string][]byte{"release": big})
	helm.Labels = map[string]string{"owner": "helm"}
	node := secret("n.node-password.k3s", "k3s.cattle.io/node-password", map[string][]byte{"hash": []byte("$1:x"), "extra": big})
	node.Annotations = map[string]string{"a": strings.Repeat("x", 1024)}
	client := newClient(t, helm, node)
	s := startStore(t, client, nil)

	stored, err := client.Secrets("kube-system").Get(t.Context(), helm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.lister.Get(helm.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Data != nil || got.Labels != nil || got.Type != "" || got.ResourceVersion != stored.ResourceVersion {
		t.Errorf("foreign secret cached as %+v, want a stub with name and resource version", got)
	}
	got, err = s.lister.Get(node.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != 1 || string(got.Data["hash"]) != "$1:x" || got.Annotations != nil || got.Type != node.Type {
		t.Errorf("node-password secret cached as %+v, want only its type and hash", got)
	}
	// The remembered digest is kept, and only it.
	node.Annotations[DigestAnnotation] = "ZGlnZXN0"
	if err := client.Tracker.Update(corev1.SchemeGroupVersion.WithResource("secrets"), node, "kube-system"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the annotated secret in the cache", func() bool {
		got, err := s.lister.Get(node.Name)
		return err == nil && got.Annotations[DigestAnnotation] == "ZGlnZXN0" && len(got.Annotations) == 1
	})
	// Idempotent, as client-go asks of transforms.
	again, _ := s.transform(got)
	if a := again.(*corev1.Secret); string(a.Data["hash"]) != "$1:x" || a.Type != got.Type || a.Name != got.Name {
		t.Errorf("transform is not idempotent: %+v", a)
	}
	if o, _ := s.transform("not a secret"); o != "not a secret" {
		t.Error("transform changed an object that is not a secret")
	}
}

// TestSubdomainAsAPIMachinery checks the fast name check that verify
// and SecretName share against apimachinery's, which the API server
// applies to a Secret's name.
func TestSubdomainAsAPIMachinery(t *testing.T) {
	for _, name := range []string{
		"a", "a.b", "a-b.c-d", "0.1", "a--b", "worker-1.node-password.k3s", strings.Repeat("a", 253), strings.Repeat("a", 254),
		"", ".", "a.", ".a", "a..b", "-a", "a-", "a.-b", "a-.b", "a_b", "A", "a/b", "ä", "a b", "a.b-.c", "a\x00",
		strings.Repeat("a", 63) + "b.c", strings.Repeat("a", 64) + ".c",
	} {
		want := len(validation.IsDNS1123Subdomain(name)) == 0
		if got := dnsname.Subdomain(name); got != want {
			t.Errorf("dnsname.Subdomain(%q) = %v, apimachinery says %v", name, got, want)
		}
	}
}

// TestSlowRates: a rate below one call in two seconds still allows one
// call at a time (a burst of twice the rate would round to none).
func TestSlowRates(t *testing.T) {
	s := startStore(t, newClient(t), &Options{FreshReads: 0.1, DigestWrites: 0.1})
	for name, l := range map[string]*rate.Limiter{"FreshReads": s.reads, "DigestWrites": s.writes} {
		if b := l.Burst(); b != 1 || !l.Allow() {
			t.Errorf("%s 0.1: burst %d, want 1 call allowed", name, b)
		}
	}
}

// TestGetFresh: a cache miss is confirmed with a direct read, which finds
// a secret the informer has not seen. Past its budget GetFresh answers
// from the cache: a hash as is, a miss as ErrNotFound and ErrNotFresh,
// even for a secret that exists; a miss a direct read confirmed is
// ErrNotFound only.
func TestGetFresh(t *testing.T) {
	cached := mustHash(t, "cached")
	client := newClient(t, secret("cached.node-password.k3s", "k3s.cattle.io/node-password", map[string][]byte{"hash": []byte(cached)}))
	freezeWatch(client)
	s := startStore(t, client, nil)
	s.reads = rate.NewLimiter(rate.Every(time.Hour), 2) // two reads, then none for the test
	behind := func(node, hash string) {
		t.Helper()
		if _, err := client.Secrets("kube-system").Create(t.Context(),
			secret(node+".node-password.k3s", "k3s.cattle.io/node-password", map[string][]byte{"hash": []byte(hash)}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h := mustHash(t, "pw")
	behind("n", h)
	if _, err := s.Get(t.Context(), "n"); !errors.Is(err, verify.ErrNotFound) {
		t.Fatalf("Get over the frozen cache = %v, want ErrNotFound", err)
	}
	reads := func() (n int) {
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		node     string
		want     string // the hash; "" for a miss
		notFresh bool
		reads    int // direct reads so far
	}{
		{"n", h, false, 1},           // behind the cache, read directly
		{"missing", "", false, 2},    // a miss the API server confirmed
		{"missing", "", true, 2},     // the budget is spent: the cache's word
		{"cached", cached, false, 2}, // in the cache, budget or not
		{"n", h, false, 3},           // recent (found by a direct read): read whatever the budget
		{"late", "", true, 3},        // exists, but neither the cache nor a read saw it
		{"UPPER_case", "", false, 3}, // not a secret name: no read
	} {
		if tc.node == "late" {
			behind("late", mustHash(t, "late"))
		}
		got, err := s.GetFresh(t.Context(), tc.node)
		switch {
		case tc.node == "UPPER_case":
			if !errors.Is(err, verify.ErrInvalidInput) {
				t.Errorf("GetFresh(%s) = %v, want ErrInvalidInput", tc.node, err)
			}
		case tc.want != "":
			if err != nil || got != tc.want {
				t.Errorf("GetFresh(%s) = %q, %v; want the hash", tc.node, got, err)
			}
		case !errors.Is(err, verify.ErrNotFound) || errors.Is(err, verify.ErrNotFresh) != tc.notFresh:
			t.Errorf("GetFresh(%s) = %v; want ErrNotFound, ErrNotFresh %v", tc.node, err, tc.notFresh)
		}
		if n := reads(); n != tc.reads {
			t.Errorf("GetFresh(%s): %d direct reads so far, want %d", tc.node, n, tc.reads)
		}
	}
}
