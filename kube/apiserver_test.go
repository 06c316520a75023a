package kube

// Tests against a real kube-apiserver (kube/apitest). They skip unless
// $NODEPASS_APISERVER_BIN names the built binaries: `make test-apiserver`
// builds them and runs these tests. All of them share one API server,
// started by the first and stopped by TestMain.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	admissionclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/kube/apitest"
	"github.com/nodepass/nodepass/verify"
)

// apiserver is the API server every TestAPIServer* test shares.
var apiserver apitest.Shared

// requests counts the HTTP requests a client sends, by method and path,
// and those of them that got no answer (the round trip failed).
type requests struct {
	mu     sync.Mutex
	n      map[string]int // "GET /api/v1/namespaces/kube-system/secrets/x" -> count
	failed map[string]int
}

func (r *requests) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[key]
}

func (r *requests) failures(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed[key]
}

// perNode says how many requests of each method, the informer's lists
// and watches apart, were sent for each of n nodes.
func (r *requests) perNode(n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	by := make(map[string]int)
	for k, c := range r.n {
		if k != collection {
			by[strings.Fields(k)[0]] += c
		}
	}
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", m, float64(by[m])/float64(n)))
	}
	return strings.Join(parts, ", ")
}

func (r *requests) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.n {
		n += c
	}
	return n
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// counted returns a copy of cfg whose requests are counted in the
// returned requests.
func counted(cfg *rest.Config) (*rest.Config, *requests) {
	c := rest.CopyConfig(cfg)
	r := &requests{n: make(map[string]int), failed: make(map[string]int)}
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			key := req.Method + " " + req.URL.Path
			r.mu.Lock()
			r.n[key]++
			r.mu.Unlock()
			resp, err := rt.RoundTrip(req)
			if err != nil {
				r.mu.Lock()
				r.failed[key]++
				r.mu.Unlock()
			}
			return resp, err
		})
	})
	return c, r
}

func coreClient(t *testing.T, cfg *rest.Config) *corev1client.CoreV1Client {
	t.Helper()
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// apiStore makes a Store over the API server as cfg, starts it and closes
// it when the test ends; with sync it also waits for the cache to sync.
func apiStore(t *testing.T, cfg *rest.Config, sync bool) *Store {
	t.Helper()
	return apiStoreWith(t, cfg, nil, sync)
}

// apiStoreWith is apiStore with opts.
func apiStoreWith(t *testing.T, cfg *rest.Config, opts *Options, sync bool) *Store {
	t.Helper()
	s, err := New(coreClient(t, cfg), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := s.WaitForSync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// apiVerifier is a Verifier over s, closed when the test ends (before s).
func apiVerifier(t *testing.T, s *Store) *verify.Verifier {
	t.Helper()
	v, err := verify.New(s, &verify.Options{Params: testParams})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// nodeName returns a node name no other test on the shared server uses.
func nodeName(t *testing.T, what string) string {
	var b [4]byte
	rand.Read(b[:])
	name := nonName.ReplaceAllString(strings.ToLower(strings.TrimPrefix(t.Name(), "TestAPIServer")), "-")
	return strings.Trim(name, "-") + "-" + what + "-" + hex.EncodeToString(b[:])
}

// await polls cond until it holds, failing the test after a minute: the
// API server applies RBAC and admission changes, and informers deliver
// events, a moment after the write. It asserts nothing about time.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func secretOf(t *testing.T, admin *corev1client.CoreV1Client, node string) (*corev1.Secret, error) {
	t.Helper()
	return admin.Secrets("kube-system").Get(t.Context(), node+".node-password.k3s", metav1.GetOptions{})
}

// TestAPIServerCreate checks the secret Create makes, as the API server
// stores it, and that the server enforces its immutability.
func TestAPIServerCreate(t *testing.T) {
	srv := apiserver.Get(t)
	admin := coreClient(t, srv.Admin)
	s := apiStore(t, srv.Node, true)
	node := nodeName(t, "Worker") // upper case: the secret name is lower case
	hash := mustHash(t, "password-1")
	if err := s.Create(t.Context(), node, hash); err != nil {
		t.Fatal(err)
	}
	sec, err := secretOf(t, admin, strings.ToLower(node))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ToLower(node) + ".node-password.k3s"; sec.Name != want || sec.Namespace != "kube-system" {
		t.Errorf("secret %s/%s, want kube-system/%s", sec.Namespace, sec.Name, want)
	}
	if sec.Type != "k3s.cattle.io/node-password" {
		t.Errorf("type %q", sec.Type)
	}
	if sec.Immutable == nil || !*sec.Immutable {
		t.Errorf("immutable %v, want true", sec.Immutable)
	}
	if keys := slices.Sorted(func(yield func(string) bool) {
		for k := range sec.Data {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(keys, []string{"hash"}) || string(sec.Data["hash"]) != hash {
		t.Errorf("data keys %q, hash %q; want only hash = %q", keys, sec.Data["hash"], hash)
	}
	if got, err := s.Get(t.Context(), node); err != nil || got != hash {
		t.Errorf("Get = %q, %v; want the hash", got, err)
	}

	err = s.Create(t.Context(), node, mustHash(t, "password-2"))
	if !errors.Is(err, verify.ErrExists) {
		t.Errorf("second Create: %v, want ErrExists", err)
	}

	// The server, not the Store, keeps the hash from changing.
	_, err = admin.Secrets("kube-system").Patch(t.Context(), sec.Name, types.MergePatchType,
		[]byte(`{"data":{"hash":"JDE6YWJjZA=="}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("patching the data of an immutable secret: %v, want 422 Invalid", err)
	}
	_, err = admin.Secrets("kube-system").Patch(t.Context(), sec.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"nodepass.test/seen":"yes"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Errorf("annotating an immutable secret: %v", err)
	}
}

// TestAPIServerConcurrentEnrollment enrolls each new node through two
// servers (two Stores and Verifiers) at once with different passwords:
// the API server lets exactly one create win, and both servers then agree
// on the winner.
func TestAPIServerConcurrentEnrollment(t *testing.T) {
	srv := apiserver.Get(t)
	admin := coreClient(t, srv.Admin)
	v1 := apiVerifier(t, apiStore(t, srv.Node, true))
	v2 := apiVerifier(t, apiStore(t, srv.Node, true))
	for i := range 10 {
		node := nodeName(t, fmt.Sprint(i))
		pw := [2]string{"password-one-" + node, "password-two-" + node}
		var errs [2]error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, v := range []*verify.Verifier{v1, v2} {
			wg.Go(func() {
				<-start
				errs[j] = v.Ensure(t.Context(), node, pw[j])
			})
		}
		close(start)
		wg.Wait()
		var winner, loser int
		switch {
		case errs[0] == nil && errors.Is(errs[1], verify.ErrMismatchedHashAndPassword):
			winner, loser = 0, 1
		case errs[1] == nil && errors.Is(errs[0], verify.ErrMismatchedHashAndPassword):
			winner, loser = 1, 0
		default:
			t.Fatalf("%s: Ensure answered %v and %v; want one nil and one mismatch", node, errs[0], errs[1])
		}
		sec, err := secretOf(t, admin, node)
		if err != nil {
			t.Fatal(err)
		}
		if err := verify.CompareHashAndPassword(string(sec.Data["hash"]), pw[winner]); err != nil {
			t.Errorf("%s: the stored hash is not the winner's: %v", node, err)
		}
		for j, v := range []*verify.Verifier{v1, v2} {
			if err := v.Ensure(t.Context(), node, pw[winner]); err != nil {
				t.Errorf("%s: server %d refuses the winner's password: %v", node, j+1, err)
			}
			if err := v.Ensure(t.Context(), node, pw[loser]); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
				t.Errorf("%s: server %d answers %v to the loser's password, want a mismatch", node, j+1, err)
			}
		}
	}
	s1, s2 := v1.Stats(), v2.Stats()
	if n := s1.Enrollments + s2.Enrollments; n != 10 {
		t.Errorf("%d enrollments over both servers, want 10", n)
	}
	t.Logf("server 1 won %d of 10 races, server 2 %d", s1.Enrollments, s2.Enrollments)
}

// TestAPIServerGetWaitsForSync holds back the informer's list and checks
// that Get waits for it rather than answering "not found" for a node
// whose secret exists.
func TestAPIServerGetWaitsForSync(t *testing.T) {
	srv := apiserver.Get(t)
	node := nodeName(t, "known")
	hash := mustHash(t, "password")
	writer := apiStore(t, srv.Node, false)
	if err := writer.Create(t.Context(), node, hash); err != nil {
		t.Fatal(err)
	}

	cfg := rest.CopyConfig(srv.Node)
	gate := make(chan struct{})
	var held atomic.Int64
	collection := "/api/v1/namespaces/kube-system/secrets"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && req.URL.Path == collection {
				held.Add(1)
				select {
				case <-gate:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	s := apiStore(t, cfg, false)
	await(t, "the informer's list", func() bool { return held.Load() > 0 })

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	got, err := s.Get(ctx, node)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, verify.ErrNotFound) {
		t.Fatalf("Get before the sync = %q, %v; want the context's deadline, never not found", got, err)
	}
	if s.HasSynced() {
		t.Fatal("synced with its list held back")
	}
	close(gate)
	if got, err := s.Get(t.Context(), node); err != nil || got != hash {
		t.Fatalf("Get after the list = %q, %v; want the hash", got, err)
	}
	if _, err := s.Get(t.Context(), nodeName(t, "unknown")); !errors.Is(err, verify.ErrNotFound) {
		t.Errorf("Get of an unknown node after the sync: %v, want ErrNotFound", err)
	}
}

// TestAPIServerInformerLag measures how long a secret one Store creates
// takes to reach another Store's informer cache, and checks that the
// creating Store's own Get never misses it meanwhile (the direct read of
// Store.recent). It reports the times; it asserts none.
func TestAPIServerInformerLag(t *testing.T) {
	srv := apiserver.Get(t)
	acfg, areq := counted(srv.Node)
	a := apiStore(t, acfg, true)
	b := apiStore(t, srv.Node, true)
	const n = 50
	var lags, returns []time.Duration // from the Create call: to b's cache, to Create's return
	early, direct := 0, 0
	for i := range n {
		node := nodeName(t, fmt.Sprint(i))
		hash := mustHash(t, "password")
		// Watch b's cache from before the Create is sent.
		seen := make(chan time.Time, 1)
		stop := make(chan struct{})
		go func() {
			defer close(seen)
			for {
				if got, err := b.Get(context.Background(), node); err == nil && got == hash {
					seen <- time.Now()
					return
				}
				select {
				case <-stop:
					return
				default:
					time.Sleep(100 * time.Microsecond)
				}
			}
		}()
		called := time.Now()
		if err := a.Create(t.Context(), node, hash); err != nil {
			close(stop)
			t.Fatal(err)
		}
		returned := time.Now()
		get := "GET /api/v1/namespaces/kube-system/secrets/" + node + ".node-password.k3s"
		before := areq.count(get)
		if got, err := a.Get(t.Context(), node); err != nil || got != hash {
			close(stop)
			t.Fatalf("Get right after Create = %q, %v; want the hash", got, err)
		}
		direct += areq.count(get) - before
		var at time.Time
		select {
		case at = <-seen:
		case <-time.After(time.Minute):
			close(stop)
			t.Fatalf("%s not in the other Store's cache a minute after its Create", node)
		}
		close(stop)
		lags = append(lags, at.Sub(called))
		returns = append(returns, returned.Sub(called))
		if at.Before(returned) {
			early++
		}
	}
	q := func(d []time.Duration) string {
		slices.Sort(d)
		return fmt.Sprintf("min %v, median %v, p90 %v, max %v", d[0].Round(time.Microsecond), d[n/2].Round(time.Microsecond),
			d[n*9/10].Round(time.Microsecond), d[n-1].Round(time.Microsecond))
	}
	t.Logf("%d creates, times from the Create call: Create returned %s; in the other Store's cache %s "+
		"(%d of %d before Create returned; ReadAfterCreate window %v). "+
		"The creating Store's Get right after Create read the API server directly %d times of %d",
		n, q(returns), q(lags), early, n, DefaultReadAfterCreate, direct, n)
}

// TestAPIServerRBAC runs a Verifier as the node-password identity with
// exactly the README's verbs, then without create.
func TestAPIServerRBAC(t *testing.T) {
	srv := apiserver.Get(t)
	admin := coreClient(t, srv.Admin)
	s := apiStore(t, srv.Node, true)
	v := apiVerifier(t, s)

	// With get, list, watch and create: enroll, verify, refuse, and read
	// a secret the Store did not create itself (from the informer).
	node := nodeName(t, "enrolled")
	if err := v.Ensure(t.Context(), node, "right"); err != nil {
		t.Fatalf("enrolling with the README's verbs: %v", err)
	}
	if err := v.Ensure(t.Context(), node, "right"); err != nil {
		t.Fatal(err)
	}
	if err := v.Ensure(t.Context(), node, "wrong"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	other := nodeName(t, "other")
	if err := apiStore(t, srv.Admin, false).Create(t.Context(), other, mustHash(t, "other")); err != nil {
		t.Fatal(err)
	}
	await(t, "the admin's secret in the cache", func() bool { _, err := s.Get(t.Context(), other); return err == nil })
	if err := v.Ensure(t.Context(), other, "other"); err != nil {
		t.Fatalf("verifying a node another server enrolled: %v", err)
	}

	// Without create.
	t.Cleanup(func() {
		if err := srv.SetNodeVerbs(context.Background(), apitest.NodeVerbs...); err != nil {
			t.Error(err)
		}
	})
	if err := srv.SetNodeVerbs(t.Context(), "get", "list", "watch"); err != nil {
		t.Fatal(err)
	}
	before := v.Stats()
	fresh := nodeName(t, "fresh")
	err := v.Ensure(t.Context(), fresh, "first")
	if err == nil {
		t.Fatal("Ensure of a new node succeeded without create")
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "kube: creating secret kube-system/"+fresh+".node-password.k3s") {
		t.Errorf("Ensure without create: %v; want a kube: error wrapping the API server's 403", err)
	}
	t.Logf("Ensure without create: %v", err)
	if code := httpStatus(t, v, fresh, "first"); code != http.StatusInternalServerError {
		t.Errorf("httpauth answers %d without create, want 500 (store failure)", code)
	}
	after := v.Stats()
	if after.Enrollments != before.Enrollments || after.StoreErrors-before.StoreErrors != 2 {
		t.Errorf("enrollments %d -> %d, store errors %d -> %d; want no enrollment and two store errors",
			before.Enrollments, after.Enrollments, before.StoreErrors, after.StoreErrors)
	}
	if _, err := secretOf(t, admin, fresh); !apierrors.IsNotFound(err) {
		t.Errorf("secret of the refused node: %v, want not found", err)
	}
	// Existing nodes still verify: Get needs only the informer.
	if err := v.Ensure(t.Context(), node, "right"); err != nil {
		t.Errorf("verifying an enrolled node without create: %v", err)
	}

	// With create restored the node enrolls, under another password even:
	// nothing of the failed attempt was kept.
	if err := srv.SetNodeVerbs(t.Context(), apitest.NodeVerbs...); err != nil {
		t.Fatal(err)
	}
	if err := v.Ensure(t.Context(), fresh, "second"); err != nil {
		t.Fatalf("Ensure once create is restored: %v", err)
	}
	if err := v.Ensure(t.Context(), fresh, "first"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Errorf("the failed attempt's password: %v, want a mismatch", err)
	}
}

// httpStatus returns what httpauth answers for node and password over v.
func httpStatus(t *testing.T, v *verify.Verifier, node, password string) int {
	t.Helper()
	auth, err := httpauth.New(v, &httpauth.Options{Program: "k3s", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := auth.HandlerFunc(func(w http.ResponseWriter, _ *http.Request, _ httpauth.Node) {})
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1-k3s/serving-kubelet.crt", nil)
	req.Header.Set("K3s-Node-Name", node)
	req.Header.Set("K3s-Node-Password", password)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestAPIServerAdmissionPolicy makes the API server refuse node-password
// secrets with a ValidatingAdmissionPolicy (CEL, no webhook): the outage
// k3s fails open for. nodepass has no fail-open option yet, so today
// Ensure of a new node fails with a store error and nothing is enrolled;
// when the option lands, this test is where its behaviour goes.
func TestAPIServerAdmissionPolicy(t *testing.T) {
	srv := apiserver.Get(t)
	admin := coreClient(t, srv.Admin)
	v := apiVerifier(t, apiStore(t, srv.Node, true))
	enrolled := nodeName(t, "enrolled")
	if err := v.Ensure(t.Context(), enrolled, "right"); err != nil {
		t.Fatal(err)
	}

	unbind := denyNodePasswords(t, srv)
	probe := apiStore(t, srv.Admin, false)

	before := v.Stats()
	node := nodeName(t, "new")
	for attempt := range 2 {
		err := v.Ensure(t.Context(), node, "first")
		if err == nil {
			t.Fatalf("attempt %d: Ensure of a new node succeeded under a policy that refuses its secret", attempt+1)
		}
		if errors.Is(err, verify.ErrMismatchedHashAndPassword) || errors.Is(err, verify.ErrNotFound) ||
			!strings.Contains(err.Error(), "kube: creating secret kube-system/"+node+".node-password.k3s") ||
			!strings.Contains(err.Error(), denyMessage) {
			t.Errorf("attempt %d: Ensure under the policy: %v; want a kube: store error with the policy's message", attempt+1, err)
		}
		if attempt == 0 {
			t.Logf("Ensure under the policy (API reason %s): %v", apierrors.ReasonForError(err), err)
		}
	}
	if code := httpStatus(t, v, node, "first"); code != http.StatusInternalServerError {
		t.Errorf("httpauth answers %d under the policy, want 500 (store failure)", code)
	}
	after := v.Stats()
	if after.Enrollments != before.Enrollments || after.StoreErrors-before.StoreErrors != 3 {
		t.Errorf("enrollments %d -> %d, store errors %d -> %d; want none and three",
			before.Enrollments, after.Enrollments, before.StoreErrors, after.StoreErrors)
	}
	if _, err := secretOf(t, admin, node); !apierrors.IsNotFound(err) {
		t.Errorf("secret of the refused node: %v, want not found", err)
	}
	// Enrolled nodes keep verifying: the policy refuses creates only.
	if err := v.Ensure(t.Context(), enrolled, "right"); err != nil {
		t.Errorf("verifying an enrolled node under the policy: %v", err)
	}

	// Once the policy is unbound the node enrolls, with another password:
	// the refused attempt left nothing behind.
	unbind(t.Context())
	await(t, "the policy to be lifted", func() bool {
		return probe.Create(t.Context(), nodeName(t, "probe"), "$1:probe") == nil
	})
	if err := v.Ensure(t.Context(), node, "second"); err != nil {
		t.Fatalf("Ensure once the policy is unbound: %v", err)
	}
}

// TestAPIServerForbiddenExisting: the API server admits a create before
// it looks for the name, so a create an admission policy refuses is
// Forbidden even when the secret exists. Create's error is then no
// ErrExists, and what tells is GetFresh: within its budget it reads the
// secret the cache has not seen; past it, it says it did not look.
func TestAPIServerForbiddenExisting(t *testing.T) {
	srv := apiserver.Get(t)
	cfg, freeze := freezable(srv.Node)
	cfg, req := counted(cfg)
	s := apiStore(t, cfg, true)
	s.reads = rate.NewLimiter(rate.Every(time.Hour), 1) // one direct read for the test
	freeze()                                            // the cache hears of nothing from now on
	other := apiStore(t, srv.Node, false)               // another server
	node, late := nodeName(t, "enrolled"), nodeName(t, "late")
	hash := mustHash(t, "right")
	for _, n := range []string{node, late} {
		if err := other.Create(t.Context(), n, hash); err != nil {
			t.Fatal(err)
		}
	}
	denyNodePasswords(t, srv)

	err := s.Create(t.Context(), node, mustHash(t, "guess"))
	if err == nil || errors.Is(err, verify.ErrExists) || apierrors.IsAlreadyExists(err) || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), denyMessage) {
		t.Fatalf("Create of an existing secret under the policy: %v; want the policy's Forbidden, not ErrExists", err)
	}
	t.Logf("Create of an existing secret under the policy: %v", err)
	if _, err := s.Get(t.Context(), node); !errors.Is(err, verify.ErrNotFound) {
		t.Fatalf("Get over the frozen cache: %v, want ErrNotFound", err)
	}
	get := "GET /api/v1/namespaces/kube-system/secrets/" + node + ".node-password.k3s"
	if got, err := s.GetFresh(t.Context(), node); err != nil || got != hash {
		t.Fatalf("GetFresh within its budget = %q, %v; want the other server's hash", got, err)
	}
	if n := req.count(get); n != 1 {
		t.Errorf("%d direct reads of %s, want 1", n, node)
	}
	if _, err := s.GetFresh(t.Context(), late); !errors.Is(err, verify.ErrNotFound) || !errors.Is(err, verify.ErrNotFresh) {
		t.Errorf("GetFresh past its budget of a secret the cache has not seen: %v; want ErrNotFound and ErrNotFresh", err)
	}
	if n := req.count("GET /api/v1/namespaces/kube-system/secrets/" + late + ".node-password.k3s"); n != 0 {
		t.Errorf("%d direct reads past the budget, want none", n)
	}
}

// freezable returns a copy of cfg whose watch streams freeze() stops:
// from then on nothing more of them reaches the client (a read blocks
// until the request ends), so an informer over it lags for good.
func freezable(cfg *rest.Config) (_ *rest.Config, freeze func()) {
	c := rest.CopyConfig(cfg)
	frozen := make(chan struct{})
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && req.URL.Query().Has("watch") {
				resp.Body = &freezableBody{ReadCloser: resp.Body, frozen: frozen, done: req.Context().Done(), closed: make(chan struct{})}
			}
			return resp, err
		})
	})
	var once sync.Once
	return c, func() { once.Do(func() { close(frozen) }) }
}

// freezableBody is a watch stream that passes nothing more on once frozen
// is closed, not even what a read under way then returns.
type freezableBody struct {
	io.ReadCloser
	frozen, done <-chan struct{}
	closed       chan struct{}
	once         sync.Once
}

func (b *freezableBody) Read(p []byte) (int, error) {
	select {
	case <-b.frozen:
	default:
		n, err := b.ReadCloser.Read(p)
		select {
		case <-b.frozen: // drop what came after the freeze
		default:
			return n, err
		}
	}
	select {
	case <-b.done:
	case <-b.closed:
	}
	return 0, io.ErrUnexpectedEOF
}

func (b *freezableBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.ReadCloser.Close()
}

// TestAPIServerEnrollFailOpen: with verify.Options.FailOpen, the
// outage an admission policy makes lets a new node in, as k3s does, and
// the background retry stores its secret once the policy is gone.
func TestAPIServerEnrollFailOpen(t *testing.T) {
	srv := apiserver.Get(t)
	admin := coreClient(t, srv.Admin)
	reported := make(chan error, 1)
	v, err := verify.New(apiStore(t, srv.Node, true), &verify.Options{Params: testParams, FailOpen: &verify.FailOpen{
		OnDeferred: func(_ string, err error) { reported <- err }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	unbind := denyNodePasswords(t, srv)
	node := nodeName(t, "failopen")
	if err := v.Ensure(t.Context(), node, "right"); err != nil {
		t.Fatalf("Ensure under the policy with FailOpen: %v, want let in", err)
	}
	if err := v.Ensure(t.Context(), node, "other"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Fatalf("another password while let in: %v, want a mismatch", err)
	}
	if st := v.Stats(); st.FailOpenEnrollments != 1 || st.FailOpenPending != 1 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := secretOf(t, admin, node); !apierrors.IsNotFound(err) {
		t.Fatalf("secret during the outage: %v, want not found", err)
	}
	unbind(t.Context())
	if err := deferredResult(t, reported); err != nil {
		t.Fatalf("the retry reported %v, want its secret stored", err)
	}
	sec, err := secretOf(t, admin, node)
	if err != nil || len(sec.Data["hash"]) == 0 {
		t.Fatalf("secret after the retry: %v", err)
	}
	if err := verify.CompareHashAndPassword(string(sec.Data["hash"]), "right"); err != nil {
		t.Fatalf("the stored hash is not the let-in password's: %v", err)
	}
}

// deferredResult returns what FailOpen.OnDeferred reported on reported,
// failing the test if nothing comes within 2 minutes (the retries run 5 s
// apart, then 10 s, ...).
func deferredResult(t *testing.T, reported <-chan error) error {
	t.Helper()
	select {
	case err := <-reported:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("no deferred enrollment reported within 2 minutes")
		return nil
	}
}

// TestAPIServerDigest: a remembered digest is a metadata patch on the
// immutable secret, and a second server reads it through its informer and
// verifies the node without scrypt.
func TestAPIServerDigest(t *testing.T) {
	srv := apiserver.Get(t)
	admin := coreClient(t, srv.Admin)
	key := []byte(strings.Repeat("k", verify.MinDigestKeyLen))
	first, err := verify.New(apiStore(t, srv.Node, true), &verify.Options{Params: testParams, DigestKey: key})
	if err != nil {
		t.Fatal(err)
	}
	node := nodeName(t, "digest")
	if err := first.Ensure(t.Context(), node, "right"); err != nil {
		t.Fatal(err)
	}
	first.Close() // flushes the digest
	if st := first.Stats(); st.DigestWrites != 1 || st.DigestWriteFailures != 0 {
		t.Fatalf("first server: %+v, want its digest written", st)
	}
	sec, err := secretOf(t, admin, node)
	if err != nil {
		t.Fatal(err)
	}
	if sec.Annotations[DigestAnnotation] == "" || sec.Immutable == nil || !*sec.Immutable || len(sec.Data) != 1 {
		t.Fatalf("secret after the digest patch: %+v", sec)
	}
	second := apiStore(t, srv.Node, true)
	await(t, "the second server's cache to hold the digest", func() bool {
		_, d, err := second.GetWithDigest(t.Context(), node)
		return err == nil && d != nil
	})
	v, err := verify.New(second, &verify.Options{Params: testParams, DigestKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	if err := v.Verify(t.Context(), node, "right"); err != nil {
		t.Fatal(err)
	}
	if st := v.Stats(); st.DigestHits != 1 || st.ScryptRuns != 0 {
		t.Fatalf("second server: %+v, want a digest hit and no scrypt", st)
	}
}

// denyMessage is what the policy of denyNodePasswords answers.
const denyMessage = "node-password secrets are frozen by the test policy"

// denyNodePasswords binds a ValidatingAdmissionPolicy that refuses the
// creation of node-password secrets (403 Forbidden), waits until the API
// server applies it, and returns what lifts it (also done when the test
// ends).
func denyNodePasswords(t *testing.T, srv *apitest.Server) (unbind func(context.Context)) {
	t.Helper()
	adm, err := admissionclient.NewForConfig(srv.Admin)
	if err != nil {
		t.Fatal(err)
	}
	name := "nodepass-deny-" + nodeName(t, "policy")
	message := denyMessage
	fail := admissionv1.Fail
	forbidden := metav1.StatusReasonForbidden // 403, as a webhook's denial; a policy's default is 422 Invalid
	_, err = adm.ValidatingAdmissionPolicies().Create(t.Context(), &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: `object.type != "k3s.cattle.io/node-password"`,
				Message:    message,
				Reason:     &forbidden,
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		adm.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	_, err = adm.ValidatingAdmissionPolicyBindings().Create(t.Context(), &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unbind = func(ctx context.Context) {
		adm.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
	}
	t.Cleanup(func() { unbind(context.Background()) })
	// The policy takes effect when the API server's admission informers
	// have it: probe until a node-password secret is refused.
	probe := apiStore(t, srv.Admin, false)
	await(t, "the policy to take effect", func() bool {
		err := probe.Create(t.Context(), nodeName(t, "probe"), "$1:probe")
		return err != nil && strings.Contains(err.Error(), message)
	})

	return unbind
}
