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
	"sync"
	"sync/atomic"
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

// digestVerifier is a Verifier over s with remembered digests, closed
// when the test ends; opts may add options.
func digestVerifier(t *testing.T, s *Store, opts verify.Options) *verify.Verifier {
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

// enrollElsewhere stores the hash of password(node) at params for each
// node, as another server would, with no digest.
func enrollElsewhere(t *testing.T, other *Store, params verify.Params, nodes []string) {
	t.Helper()
	for _, node := range nodes {
		h, err := verify.GenerateFromPassword(password(node), params)
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Create(t.Context(), node, h); err != nil {
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
// with FailOpen). After the restart the informer resyncs, new
// enrollments succeed, and no secret is lost or changed.
func TestAPIServerRestart(t *testing.T) {
	srv := restartable.Get(t)
	admin := coreClient(t, srv.Admin)
	cfg, req := counted(srv.Node)
	s := apiStore(t, cfg, true)
	other := apiStore(t, srv.Node, false) // another server
	v := digestVerifier(t, s, verify.Options{})

	mine, theirs := names(t, "mine", 20), names(t, "theirs", 5)
	for _, node := range mine {
		if err := v.Ensure(t.Context(), node, password(node)); err != nil {
			t.Fatal(err)
		}
	}
	enrollElsewhere(t, other, testParams, theirs)
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
	fresh := digestVerifier(t, s, verify.Options{})
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
	// With FailOpen it is let in, or fails as without.
	reported := make(chan error, 1)
	open := digestVerifier(t, s, verify.Options{FailOpen: &verify.FailOpen{OnDeferred: func(_ string, err error) { reported <- err }}})
	errOpen := open.Ensure(ctx, openNode, "open")
	if errOpen != nil && !isStoreError(errOpen) {
		t.Errorf("a new enrollment during the outage with FailOpen: %v; want let in or a store error", errOpen)
	}
	t.Logf("with FailOpen: %v", errOpen)

	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("the informer's lists and watches failed %d times during the outage", req.failures(collection)-failed)

	// The informer resyncs: a secret another server writes now reaches
	// the cache (the Store never read it directly).
	late := nodeName(t, "late")
	enrollElsewhere(t, other, testParams, []string{late})
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
		if err := deferredResult(t, reported); err != nil {
			t.Errorf("the enrollment let in during the outage was not stored: %v", err)
		}
	} else if err := open.Ensure(t.Context(), openNode, "open"); err != nil {
		t.Errorf("with FailOpen, after the restart: %v", err)
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

// TestAPIServerOutageMidHerd kills the API server while hundreds of
// agents ask one Verifier at once (nodes enrolled before, new nodes, and
// guessers), then restarts it. Agents retry after every failure, as k3s
// agents do. Enrolled nodes are never refused, whatever the API server
// does; no guess is let in; a new node gets in, or a store error; after
// the restart every new node is enrolled with its own password; and no
// secret enrolled before is lost or changed. A new Verifier then checks
// that every digest written meanwhile is right.
func TestAPIServerOutageMidHerd(t *testing.T) {
	srv := restartable.Get(t)
	admin := coreClient(t, srv.Admin)
	cfg, req := counted(srv.Node)
	s := apiStoreWith(t, cfg, &Options{DigestWrites: 1000}, true) // digests as fast as the API server takes them
	// At logN 10 a verification takes milliseconds, so most of the herd
	// is still queued when the API server dies.
	params := verify.Params{LogN: 10, R: 8, P: 1, KeyLen: 64, SaltLen: 8}
	enrolled, newNodes := names(t, "enrolled", 200), names(t, "new", 200)
	enrollElsewhere(t, apiStore(t, srv.Node, false), params, enrolled)
	await(t, "the enrolled nodes in the cache", func() bool {
		_, err := s.Get(t.Context(), enrolled[len(enrolled)-1])
		return err == nil
	})
	before := nodeSecrets(t, admin)
	v := digestVerifier(t, s, verify.Options{Params: params})
	agents := int64(len(enrolled) + len(newNodes) + 50)

	var (
		answered   atomic.Int64 // first attempts answered
		inside     atomic.Int64 // Ensure calls under way
		storeErrs  atomic.Int64 // attempts of new nodes answered with a store error
		createErrs atomic.Int64 // those of them from Create, after hashing
		refused    atomic.Int64 // those refused without a store call or a hash, the last Create having failed
		guesses    atomic.Int64
		mu         sync.Mutex
		wrong      []string // broken promises
		allIn      = make(chan struct{})
	)
	broken := func(format string, args ...any) {
		mu.Lock()
		wrong = append(wrong, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// agent asks until it is let in (a node) or every node is (a
	// guesser), pausing after each failure; check judges each answer.
	agent := func(node, pw string, guesser bool, check func(error)) {
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			inside.Add(1)
			err := v.Ensure(ctx, node, pw)
			inside.Add(-1)
			cancel()
			if attempt == 0 {
				answered.Add(1)
			}
			check(err)
			if err == nil && !guesser {
				return
			}
			select {
			case <-allIn:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	began := time.Now()
	var nodes, guessers sync.WaitGroup
	for _, node := range enrolled {
		nodes.Go(func() {
			agent(node, password(node), false, func(err error) {
				if err != nil && !errors.Is(err, verify.ErrOverloaded) {
					broken("enrolled %s: %v", node, err)
				}
			})
		})
	}
	for _, node := range newNodes {
		nodes.Go(func() {
			agent(node, password(node), false, func(err error) {
				switch {
				case err == nil, errors.Is(err, verify.ErrOverloaded):
				case isStoreError(err):
					storeErrs.Add(1)
					switch msg := err.Error(); {
					case strings.HasPrefix(msg, "verify: not enrolling"):
						refused.Add(1)
					case strings.Contains(msg, "verify: store Create("):
						createErrs.Add(1)
					}
				default:
					broken("new %s: %v", node, err)
				}
			})
		})
	}
	for i := range 50 {
		node := enrolled[i*len(enrolled)/50]
		guessers.Go(func() {
			agent(node, fmt.Sprintf("guess-%d", i), true, func(err error) {
				guesses.Add(1)
				if err == nil {
					broken("guess %d for %s let in", i, node)
				}
			})
		})
	}

	// Kill the API server once a third of the agents had their first
	// answer; restart it once new nodes have met its absence and the
	// informer has failed twice.
	await(t, "a third of the first answers", func() bool { return answered.Load() >= agents/3 })
	inFlight, killedAt := inside.Load(), time.Since(began)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	failed := req.failures(collection)
	await(t, "store errors and the informer's failures", func() bool {
		return storeErrs.Load() >= 20 && req.failures(collection)-failed >= 2
	})
	restartAt := time.Since(began)
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	upAt := time.Since(began)
	nodes.Wait()
	close(allIn)
	guessers.Wait()
	for _, w := range wrong {
		t.Error(w)
	}
	st := v.Stats()
	t.Logf("killed at %v with %d of %d agents waiting for an answer, restarted at %v, up at %v, all in at %v; "+
		"%d store errors for new nodes (%d from Create, after hashing; %d refused without hashing while Creates failed); %d guesses; stats %+v",
		killedAt.Round(time.Millisecond), inFlight, agents, restartAt.Round(time.Millisecond), upAt.Round(time.Millisecond),
		time.Since(began).Round(time.Millisecond), storeErrs.Load(), createErrs.Load(), refused.Load(), guesses.Load(), st)
	// Stats.StoreErrors counts failed store calls: one per store error an
	// agent got, but for the refusals, which made none (more if work an
	// agent left behind failed).
	if calls := storeErrs.Load() - refused.Load(); st.StoreErrors < uint64(calls) {
		t.Errorf("the Verifier counted %d store errors, the agents got %d from failed store calls", st.StoreErrors, calls)
	}
	// Each new node's enrollment hashes once for every Create that ran:
	// the refusals cost no scrypt.
	if maxRuns := uint64(int64(len(enrolled)+len(newNodes)) + createErrs.Load() + guesses.Load()); st.ScryptRuns > maxRuns {
		t.Errorf("%d scrypt runs, more than one per verification, enrollment, failed Create and guess (%d)", st.ScryptRuns, maxRuns)
	}

	// Every new node is enrolled with its own password, and nothing
	// enrolled before is lost or changed.
	after := nodeSecrets(t, admin)
	sameSecrets(t, before, after, false) // the herd wrote digests
	for _, node := range newNodes {
		name, _ := s.SecretName(node)
		if err := verify.CompareHashAndPassword(after[name].hash, password(node)); err != nil {
			t.Errorf("new %s: the stored hash is not its password's: %v", node, err)
		}
	}
	v.Close() // flushes the digests
	st = v.Stats()
	if st.DigestWriteFailures == 0 {
		t.Errorf("no digest write failed during the outage: %+v", st)
	}

	// A new Verifier over a new Store checks every digest written: a hit
	// for a node with one, one scrypt for a node without.
	check := digestVerifier(t, apiStore(t, srv.Node, true), verify.Options{})
	all := append(enrolled, newNodes...)
	secrets, digests := nodeSecrets(t, admin), 0
	for _, node := range all {
		if name, _ := s.SecretName(node); secrets[name].digest != "" {
			digests++
		}
	}
	for _, node := range all {
		if err := check.Ensure(t.Context(), node, password(node)); err != nil {
			t.Errorf("%s after the outage, on a new Verifier: %v", node, err)
		}
	}
	if cs := check.Stats(); cs.DigestHits != uint64(digests) || cs.DigestHits+cs.ScryptRuns != uint64(len(all)) {
		t.Errorf("a new Verifier after the outage: %+v; want a digest hit for each of the %d digests, scrypt for the others", cs, digests)
	}
	t.Logf("digests: %d written, %d failed; %d of %d nodes have one", st.DigestWrites, st.DigestWriteFailures, digests, len(all))
}
