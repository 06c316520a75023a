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

// ValidModel reports an error unless name is one of Models.
func ValidModel(name string) error {
	if slices.Contains(models, name) {
		return nil
	}
	return fmt.Errorf("bench: unknown model %q: want one of %q", name, models)
}

// The k3s behaviour the models emulate.
const (
	// k3s v1.25 read each node's secret through client-go's client-side
	// rate limiter, 5 QPS with a burst of 10, a round trip each.
	k3sAPIQPS     = 5
	k3sAPIBurst   = 10
	k3sAPILatency = 3 * time.Millisecond
	// The newest k3s router's caps on in-flight agent requests
	// (pkg/server/handlers/router.go maxNonMutatingAgentRequests and
	// maxMutatingAgentRequests, through k8s.io/apiserver's max-in-flight
	// filter): GETs, and the certificate POSTs; past a cap, 429 with
	// Retry-After: 1. /cacerts is outside them.
	k3sLatestReads  = 20
	k3sLatestWrites = 10
)

// model is one server's verification behaviour. Ensure and VerifyToken
// (the join token, checked first on every authenticated request) return
// the verify package's errors, which httpauth maps to status codes.
type model interface {
	Ensure(ctx context.Context, node, password string) error
	VerifyToken(ctx context.Context, user, password string) error
	// admit takes an in-flight slot for a request, mutating (a POST) or
	// not, to release when its handler returns; ok false is a 429.
	admit(mutating bool) (release func(), ok bool)
	// counts returns what the model did so far (the hashing of the join
	// token at start is not in it).
	counts() modelCounts
	// keepsState reports whether the model remembers anything of a
	// verification (a result cache, a digest in the store).
	keepsState() bool
	// close stops the model; with wait, it also waits for the work
	// still running.
	close(wait bool)
}

// modelCounts are a model's counts: the scrypt computations started, the
// matches answered without scrypt from a remembered digest and from the
// result cache, and the requests held on an estimate, then sent away (the
// last three 0 for the k3s models).
type modelCounts struct {
	scrypt, digestHits, cacheHits, shedAfterWait uint64
}

func sumCounts(models []model) (sum modelCounts) {
	for _, m := range models {
		c := m.counts()
		sum.scrypt, sum.digestHits, sum.cacheHits = sum.scrypt+c.scrypt, sum.digestHits+c.digestHits, sum.cacheHits+c.cacheHits
		sum.shedAfterWait += c.shedAfterWait
	}
	return sum
}

// newModel returns a fresh instance of the named model over store. params
// hash the password of a node the store does not know; timeScale
// multiplies the model's own durations; the unbounded models ask guard
// before each scrypt call. obs, if not nil, is told of every scrypt
// computation. env is what every server of the run shares.
func newModel(name string, store verify.Store, params verify.Params, timeScale float64, guard *heapGuard, obs *serverObserver, env serverEnv) (model, error) {
	switch name {
	case ModelK3s125, ModelK3s128, ModelK3sLatest:
		m := newK3s(store, params)
		m.guard = guard
		if name == ModelK3sLatest {
			m.maxReads, m.maxWrites = k3sLatestReads, k3sLatestWrites
		}
		if obs != nil {
			m.observe = obs.started
		}
		if err := m.loadToken(env.token, name != ModelK3s125); err != nil {
			return nil, err
		}
		if name == ModelK3s125 {
			// rate.Limit is events per second: scaling time by f divides it.
			m.limiter = rate.NewLimiter(rate.Limit(k3sAPIQPS/timeScale), k3sAPIBurst)
			m.apiLatency = scaleDur(k3sAPILatency, timeScale)
		}
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

// xcryptoCompare verifies password against a stored hash with x/crypto's
// scrypt, as k3s runs it: nil on a match, an error wrapping
// verify.ErrMismatchedHashAndPassword on a mismatch.
func xcryptoCompare(hash, password string) error {
	j, want, err := batchJob(hash, password)
	if err != nil {
		return fmt.Errorf("%w: %v", verify.ErrInvalidHash, err)
	}
	got, err := xscrypt.Key(j.Password, j.Salt, j.N, j.R, j.P, j.KeyLen)
	if err != nil {
		return fmt.Errorf("%w: %v", verify.ErrInvalidHash, err)
	}
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return verify.ErrMismatchedHashAndPassword
	}
	return nil
}

// k3sModel emulates a k3s server's node-password check: fetch the stored
// hash (through a rate limiter for v1.25, from a local cache after), run
// scrypt with no result cache and no bound on concurrency, and finish the
// work even after the client has left (the handler does not look at its
// context, and scrypt cannot be interrupted). It is safe for concurrent
// use.
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
	// x/crypto's scrypt, as k3s runs it.
	return m.scrypt(ctx, func() error { return xcryptoCompare(stored, password) })
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
	return m.scrypt(ctx, func() error { return xcryptoCompare(m.tokenHash, password) })
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

// scrypt runs fn, one scrypt computation for the request ctx is of,
// unless the heap guard refuses what it allocates (128·r·N bytes):
// counted, told to the observer, under verify's scrypt label.
func (m *k3sModel) scrypt(ctx context.Context, fn func() error) error {
	if !m.guard.admit(128 * uint64(m.params.R) << m.params.LogN) {
		return errGuardTripped
	}
	m.runs.Add(1)
	if m.observe != nil {
		m.observe(ctx)
	}
	return labelScrypt(ctx, fn)
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

func (m *k3sModel) counts() modelCounts { return modelCounts{scrypt: m.runs.Load()} }

func (m *k3sModel) keepsState() bool { return false }

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
// Scenario.NoDigestKey, a DigestKey shared by the run's servers.
type nodepassModel struct {
	*verify.Verifier
	loadRuns uint64 // the scrypt runs of LoadTokens
}

func (nodepassModel) admit(bool) (func(), bool) { return func() {}, true }

func (m nodepassModel) counts() modelCounts {
	st := m.Stats()
	return modelCounts{scrypt: st.ScryptRuns - m.loadRuns, digestHits: st.DigestHits, cacheHits: st.CacheHits, shedAfterWait: st.ShedAfterWait}
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
