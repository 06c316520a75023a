package bench

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	xscrypt "golang.org/x/crypto/scrypt"
	"golang.org/x/time/rate"

	"github.com/nodepass/nodepass/verify"
)

// Server model names; BENCHMARKS.md says which upstream k3s code each
// follows.
const (
	ModelK3s125    = "k3s-v1.25"
	ModelK3s128    = "k3s-v1.28"
	ModelK3sLatest = "k3s-latest"
	ModelNodepass  = "nodepass"
)

// models lists every server model, in the order the benchmark runs them.
var models = []string{ModelK3s125, ModelK3s128, ModelK3sLatest, ModelNodepass}

// Models returns the names of every server model, in the order the
// benchmark runs them.
func Models() []string { return slices.Clone(models) }

// The k3s behaviour the models emulate.
const (
	// k3s v1.25 read each node's secret through client-go's client-side
	// rate limiter, 5 QPS with a burst of 10.
	k3sAPIQPS   = 5
	k3sAPIBurst = 10
	// k3sAPILatency is a round trip to the API server for one secret.
	k3sAPILatency = 3 * time.Millisecond
	// The newest k3s router's caps on in-flight agent requests
	// (pkg/server/handlers/router.go: maxNonMutatingAgentRequests and
	// maxMutatingAgentRequests, through k8s.io/apiserver's max-in-flight
	// filter): GETs, and other methods (the certificate POSTs); past a
	// cap, 429 with Retry-After: 1. /cacerts is outside them.
	k3sLatestReads  = 20
	k3sLatestWrites = 10
)

// model is one server's verification behaviour. Ensure returns the
// verify package's errors, so httpauth maps them to status codes.
type model interface {
	Ensure(ctx context.Context, node, password string) error
	// VerifyToken checks a request's join token (basic auth), as the
	// model's server does before anything else of an authenticated
	// request.
	VerifyToken(ctx context.Context, user, password string) error
	// admit takes an in-flight slot for one request, mutating (a POST)
	// or not; ok false means the request is refused with 429. release
	// must be called when the request's handler returns (not when its
	// client leaves).
	admit(mutating bool) (release func(), ok bool)
	// scryptRuns counts the scrypt computations started so far, but for
	// the join token's hashing when the server started (one per server,
	// as k3s hashes its passwd file when it loads).
	scryptRuns() uint64
	// remembered counts the requests answered so far without scrypt from
	// a remembered digest and from the result cache (0 for models that
	// have neither).
	remembered() (digestHits, cacheHits uint64)
	// keepsState reports whether the model remembers anything of a
	// verification (a result cache, a digest in the store), so that a
	// reboot's warm-up can change what it does later.
	keepsState() bool
	// shedAfterWait counts the requests held on an estimate and then sent
	// away all the same (0 for models that hold nothing on an estimate).
	shedAfterWait() uint64
	// close stops the model; with wait, it also waits for the work
	// still running.
	close(wait bool)
}

// ValidModel reports an error unless name is one of Models.
func ValidModel(name string) error {
	if slices.Contains(models, name) {
		return nil
	}
	return fmt.Errorf("bench: unknown model %q: want one of %q", name, models)
}

// newModel returns a fresh instance of the named model over store. params
// hash the password of a node the store does not know; timeScale
// multiplies the model's own durations (see Scenario.TimeScale); the
// unbounded models ask guard before each scrypt call. obs, if not nil, is
// told of every scrypt computation, to attribute it to the agent whose
// password it checks. env has nodepass's DigestKey, which the k3s models
// have no equivalent of.
func newModel(name string, store verify.Store, params verify.Params, timeScale float64, guard *heapGuard, obs *serverObserver, env serverEnv) (model, error) {
	switch name {
	case ModelK3s125, ModelK3s128, ModelK3sLatest:
		m := newK3s(store, params)
		if name == ModelK3sLatest {
			m.maxReads, m.maxWrites = k3sLatestReads, k3sLatestWrites
		}
		m.guard = guard
		if obs != nil {
			m.observe = obs.started
		}
		if err := m.loadToken(env.token, name != ModelK3s125); err != nil {
			return nil, err
		}
		if name != ModelK3s125 {
			return m, nil
		}
		// rate.Limit is events per second: scaling time by f divides it.
		m.limiter = rate.NewLimiter(rate.Limit(k3sAPIQPS/timeScale), k3sAPIBurst)
		m.apiLatency = scaleDur(k3sAPILatency, timeScale)
		return m, nil
	case ModelNodepass:
		opts := &verify.Options{
			Params:       params,
			MaxWait:      scaleDur(verify.DefaultMaxWait, timeScale),
			MaxFailDelay: scaleDur(verify.DefaultMaxFailDelay, timeScale),
			Agents: verify.Agents{RetryDelay: scaleDur(verify.DefaultRetryDelay, timeScale),
				HonourRetryAfter: env.honourRetryAfter},
			DigestKey:    env.digestKey,
			ScryptMemory: env.scryptMemory,
		}
		if obs != nil {
			opts.Observer = obs
		}
		v, err := verify.New(store, opts)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		if env.token != "" {
			// The token as k3s's passwd file holds it, hashed at load.
			if err := v.LoadTokens(loading, strings.NewReader(env.token+","+tokenUser+","+tokenUser+",k3s:agent\n")); err != nil {
				v.Close()
				return nil, fmt.Errorf("bench: %w", err)
			}
		}
		return nodepassModel{Verifier: v, loadRuns: v.Stats().ScryptRuns}, nil
	}
	return nil, ValidModel(name)
}

// Scrypt verifies a password against a stored hash with one scrypt
// implementation: nil on a match, an error wrapping
// verify.ErrMismatchedHashAndPassword on a mismatch.
type Scrypt func(hash, password string) error

// The two implementations: x/crypto's, as k3s runs it, and this module's
// scrypt package, one Key per verification.
var (
	XCryptoScrypt Scrypt = func(hash, password string) error { return compareWith(hash, password, xscrypt.Key) }
	FastScrypt    Scrypt = verify.CompareHashAndPassword
)

// compareWith verifies password against hash with key, a scrypt Key.
func compareWith(hash, password string, key func(password, salt []byte, N, r, p, keyLen int) ([]byte, error)) error {
	j, want, err := batchJob(hash, password)
	if err != nil {
		return fmt.Errorf("%w: %v", verify.ErrInvalidHash, err)
	}
	got, err := key(j.Password, j.Salt, j.N, j.R, j.P, j.KeyLen)
	if err != nil {
		return fmt.Errorf("%w: %v", verify.ErrInvalidHash, err)
	}
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return verify.ErrMismatchedHashAndPassword
	}
	return nil
}

// ModelScrypt returns the scrypt implementation model runs: this module's
// for nodepass (the Verifier's default), x/crypto's for the k3s models.
func ModelScrypt(model string) Scrypt {
	if model == ModelNodepass {
		return FastScrypt
	}
	return XCryptoScrypt
}

// k3sModel emulates a k3s server's node-password check: fetch the stored
// hash (through a rate limiter for v1.25, from a local cache after), run
// scrypt with no result cache and no bound on concurrency, and finish the
// work even after the client has left (the handler does not look at its
// context, and scrypt cannot be interrupted).
//
// It is safe for concurrent use.
type k3sModel struct {
	store      verify.Store
	params     verify.Params
	limiter    *rate.Limiter // nil: hash from a local cache
	apiLatency time.Duration
	// maxReads and maxWrites cap the requests in flight, non-mutating
	// and mutating; 0: no cap.
	maxReads, maxWrites int64
	guard               *heapGuard
	observe             func(ctx context.Context) // if not nil, called before each scrypt with the request's context
	// The join token: its plaintext (k3s v1.25 compares it as it is), or
	// the scrypt hash made at load (since k3s 239021e7, May 2023: v1.28
	// and later check every request with scrypt); "" for none.
	token, tokenHash string

	base          context.Context // ends on close; only limiter waits see it
	cancel        context.CancelFunc
	mu            sync.Mutex // guards closed and wg.Add
	closed        bool
	wg            sync.WaitGroup
	reads, writes atomic.Int64 // requests in flight
	runs          atomic.Uint64
}

func newK3s(store verify.Store, params verify.Params) *k3sModel {
	base, cancel := context.WithCancel(context.Background())
	return &k3sModel{store: store, params: params, base: base, cancel: cancel}
}

// Ensure checks password against node's stored hash, or stores a new hash
// for an unknown node, as k3s's node-password Ensure does. ctx's end is
// ignored (the store sees only its values): as in k3s, the work runs to
// its end whoever is still waiting.
func (m *k3sModel) Ensure(ctx context.Context, node, password string) error {
	if node == "" || password == "" {
		return fmt.Errorf("%w: empty node name or password", verify.ErrInvalidInput)
	}
	if !m.enter() {
		return verify.ErrClosed
	}
	defer m.wg.Done()

	sctx := valuesOf(ctx, m.base)
	stored, err := m.fetch(sctx, node)
	if errors.Is(err, verify.ErrNotFound) {
		if !m.guard.admit(m.memory()) {
			return errGuardTripped
		}
		err = m.scrypt(ctx, func() (err error) {
			stored, err = verify.GenerateFromPassword(password, m.params)
			return err
		})
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err = m.store.Create(sctx, node, stored); !errors.Is(err, verify.ErrExists) {
			return err
		}
		stored, err = m.fetch(sctx, node)
	}
	if err != nil {
		return err
	}
	if !m.guard.admit(m.memory()) {
		return errGuardTripped
	}
	// x/crypto's scrypt, as k3s runs it.
	return m.scrypt(ctx, func() error { return XCryptoScrypt(stored, password) })
}

// loadToken sets the join token the model checks: with hashed, as k3s
// does since its passwd-file authenticator hashes the tokens when it
// loads (one scrypt, not counted in scryptRuns), else as the plaintext.
func (m *k3sModel) loadToken(token string, hashed bool) error {
	if token == "" || !hashed {
		m.token = token
		return nil
	}
	h, err := verify.GenerateFromPassword(token, m.params)
	if err != nil {
		return fmt.Errorf("bench: hashing the join token: %w", err)
	}
	m.tokenHash = h
	return nil
}

// VerifyToken checks a request's join token as k3s's passwd-file
// authenticator does, before the in-flight caps: k3s v1.25 compares the
// plaintext in constant time; later versions run x/crypto's scrypt
// against the hash made at load, for every request, unbounded, and finish
// it whoever is still waiting.
func (m *k3sModel) VerifyToken(ctx context.Context, user, password string) error {
	switch {
	case user != tokenUser || m.token == "" && m.tokenHash == "":
		return fmt.Errorf("%w: token user %q", verify.ErrNotFound, user)
	case m.tokenHash == "":
		if subtle.ConstantTimeCompare([]byte(password), []byte(m.token)) != 1 {
			return verify.ErrMismatchedHashAndPassword
		}
		return nil
	}
	if !m.enter() {
		return verify.ErrClosed
	}
	defer m.wg.Done()
	if !m.guard.admit(m.memory()) {
		return errGuardTripped
	}
	return m.scrypt(ctx, func() error { return XCryptoScrypt(m.tokenHash, password) })
}

// enter counts a request in (m.wg, for close to wait for), unless m is
// closed; the caller calls m.wg.Done when it ends.
func (m *k3sModel) enter() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	return true
}

// scrypt counts and runs fn, one scrypt computation for the request ctx
// is of, under verify's scrypt label (labelScrypt).
func (m *k3sModel) scrypt(ctx context.Context, fn func() error) error {
	m.runs.Add(1)
	if m.observe != nil {
		m.observe(ctx)
	}
	return labelScrypt(ctx, fn)
}

// memory is what one scrypt computation allocates: 128·r·N bytes.
func (m *k3sModel) memory() uint64 {
	return 128 * uint64(m.params.R) << m.params.LogN
}

// fetch reads node's stored hash, through the API rate limiter if any.
// ctx ends with the model, not with the request.
func (m *k3sModel) fetch(ctx context.Context, node string) (string, error) {
	if m.limiter != nil {
		// client-go waits for the limiter under the call's context; k3s
		// passed one its HTTP client could not cancel.
		if err := m.limiter.Wait(m.base); err != nil {
			return "", fmt.Errorf("bench: API rate limiter: %w", err)
		}
		time.Sleep(m.apiLatency)
	}
	return m.store.Get(ctx, node)
}

func (m *k3sModel) admit(mutating bool) (func(), bool) {
	n, limit := &m.reads, m.maxReads
	if mutating {
		n, limit = &m.writes, m.maxWrites
	}
	if limit == 0 {
		return func() {}, true
	}
	if n.Add(1) > limit {
		n.Add(-1)
		return nil, false
	}
	return func() { n.Add(-1) }, true
}

func (m *k3sModel) scryptRuns() uint64 { return m.runs.Load() }

// remembered is 0, 0: k3s keeps no result cache and no digest.
func (m *k3sModel) remembered() (uint64, uint64) { return 0, 0 }

func (m *k3sModel) keepsState() bool { return false }

func (m *k3sModel) shedAfterWait() uint64 { return 0 }

func (m *k3sModel) close(wait bool) {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	if wait {
		m.wg.Wait()
	}
}

// nodepassModel is this module's Verifier with its defaults (MaxWait,
// MaxFailDelay and Agents.RetryDelay scaled with the scenario's time),
// Agents.HonourRetryAfter when the agents do, and, unless
// Scenario.NoDigestKey, remembered verification: a DigestKey made for the
// run, the same for every server of it.
type nodepassModel struct {
	*verify.Verifier
	loadRuns uint64 // the scrypt runs of LoadTokens
}

func (nodepassModel) admit(bool) (func(), bool) { return func() {}, true }

func (m nodepassModel) scryptRuns() uint64 { return m.Stats().ScryptRuns - m.loadRuns }

func (m nodepassModel) shedAfterWait() uint64 { return m.Stats().ShedAfterWait }

func (m nodepassModel) remembered() (uint64, uint64) {
	st := m.Stats()
	return st.DigestHits, st.CacheHits
}

func (nodepassModel) keepsState() bool { return true }

func (m nodepassModel) close(wait bool) {
	if wait {
		m.Close()
		return
	}
	// Close waits for running computations; without wait, let them be.
	go m.Close()
}
