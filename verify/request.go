package verify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nodepass/nodepass/cache"
	"github.com/nodepass/nodepass/internal/dnsname"
	"github.com/nodepass/nodepass/verify/internal/sched"
)

// The request side: Verify and Ensure down to the scheduler (share), and
// the answer a caller gets. On the path shared with join tokens and the
// Hasher, a check goes by its name: a node's, a token user's (tokenName),
// a hash, or CreateHash's nonce. Cache keys, queue and failure counts
// are per name.

// Verify checks password against node's stored hash: nil on a match, or
// an error wrapping ErrInvalidInput, ErrNotFound, ErrInvalidHash,
// ErrMismatchedHashAndPassword (Options.MaxFailDelay late at most),
// ErrOverloaded, ErrClosed, or the Store's. node is lower-cased, and
// node + ".node-password.k3s" must be a DNS-1123 subdomain, as in k3s.
// When ctx ends, Verify returns and the computation goes on.
func (v *Verifier) Verify(ctx context.Context, node, password string) error {
	node, password, err := v.checkInput(node, password)
	if err != nil {
		return err
	}
	stored, remembered, err := v.read(ctx, node)
	if err != nil {
		return err
	}
	return v.verifyStored(ctx, node, stored, password, remembered)
}

// Ensure is Verify for a node's join: a node with no hash is enrolled
// (Store.Create); of concurrent first joins exactly one wins.
func (v *Verifier) Ensure(ctx context.Context, node, password string) error {
	node, password, err := v.checkInput(node, password)
	if err != nil {
		return err
	}
	stored, remembered, err := v.read(ctx, node)
	if errors.Is(err, ErrNotFound) {
		if known, err := v.deferred(node, password); known {
			return v.answer(err)
		}
		pprof.Do(ctx, requestLabels, func(ctx context.Context) { err = v.enroll(ctx, node, password) })
		if !errors.Is(err, ErrExists) {
			return err
		}
		stored, remembered, err = v.read(ctx, node)
		if errors.Is(err, ErrNotFound) { // a store whose reads lag its writes: not a mismatch
			return fmt.Errorf("verify: node %q exists but its hash cannot be read yet: %v", node, err)
		}
	}
	if err != nil {
		return err
	}
	return v.verifyStored(ctx, node, stored, password, remembered)
}

// checkInput refuses what no Store should see, and everything once the
// Verifier is closed. It returns the node name in lower case, as k3s
// does, and the password as scrypt sees it (hmacKey): the one form the
// Store, cache keys, queue and failure counts use. It allocates nothing
// for a lower-case name and a password of up to 64 bytes.
func (v *Verifier) checkInput(node, password string) (string, string, error) {
	if v.closed.Load() {
		return "", "", ErrClosed
	}
	if err := v.checkCredentials("node name", node, maxNodeNameLen, "password", password); err != nil {
		return "", "", err
	}
	node = strings.ToLower(node)
	// node + secretSuffix is a subdomain when node is one: the suffix is
	// one, and maxNodeNameLen keeps the whole within 253 bytes.
	if !dnsname.Subdomain(node) {
		return "", "", fmt.Errorf("%w: node name %q cannot name its secret (%q): want a DNS-1123 subdomain, lower-case letters, digits, '-' and '.', each label starting and ending with a letter or digit", ErrInvalidInput, node, node+secretSuffix)
	}
	return node, hmacKey(password), nil
}

// checkCredentials refuses a name (what, of at most max bytes) and a
// password (secret) no store should see.
func (v *Verifier) checkCredentials(what, name string, max int, secret, password string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidInput, what)
	case len(name) > max:
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrInvalidInput, what, len(name), max)
	case password == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidInput, secret)
	case len(password) > v.opts.Limits.MaxPasswordLen:
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrInvalidInput, secret, len(password), v.opts.Limits.MaxPasswordLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidInput, what)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: %s contains control character %#x", ErrInvalidInput, what, c)
		}
	}
	return nil
}

// hmacKey returns password as scrypt sees it: as the key of PBKDF2's
// HMAC-SHA256, which hashes a key past 64 bytes with SHA-256 and pads it
// with zero bytes. A password, the same with zero bytes after it and,
// past 64 bytes, its SHA-256 give one scrypt key (k3s accepts each for
// the others' hash): hmacKey maps them to one, the SHA-256 past 64 bytes
// without the trailing zero bytes. Up to 64 bytes it allocates nothing.
func hmacKey(password string) string {
	if len(password) > sha256.BlockSize {
		sum := sha256.Sum256([]byte(password))
		password = string(sum[:])
	}
	return strings.TrimRight(password, "\x00")
}

// verifyStored answers a verification and holds back a mismatch for a
// name that keeps failing.
func (v *Verifier) verifyStored(ctx context.Context, name, stored, password string, remembered []byte) error {
	err := v.lookup(ctx, name, stored, password, remembered)
	switch {
	case err == nil:
		v.forgetFailures(name)
	case errors.Is(err, ErrMismatchedHashAndPassword):
		sleep(ctx, v.fails.delay(name))
	}
	return err
}

// lookup answers from the cache when it can (allocating nothing), then
// from the remembered digest, and otherwise from a shared computation.
func (v *Verifier) lookup(ctx context.Context, name, stored, password string, remembered []byte) error {
	key := v.cache.Key(name, stored, password)
	if known, err := v.fromCache(name, stored, key); known {
		atomic.AddUint64(&v.stats.CacheHits, 1)
		return v.answer(err)
	}
	var doubted bool
	if remembered != nil {
		if hmac.Equal(digest(v.opts.DigestKey, name, stored, password), remembered) {
			return v.digestHit(name, stored, key)
		}
		// Another password's, a stale key's or a forged digest: never a
		// mismatch by itself, but computed after the others.
		doubted = true
	}
	return v.compute(ctx, name, stored, password, key, doubted)
}

// answer turns a request's outcome (from the cache, a computation or
// FailOpen) into its caller's error, and counts it.
func (v *Verifier) answer(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrMismatchedHashAndPassword):
		atomic.AddUint64(&v.stats.Mismatches, 1)
		if err == errKnownReject {
			atomic.AddUint64(&v.stats.KnownMatchRejects, 1)
			return ErrMismatchedHashAndPassword
		}
		return err
	}
	return v.failed(err)
}

// failed is answer for neither a match nor a mismatch, apart so that a
// cache hit allocates nothing.
func (v *Verifier) failed(err error) error {
	var o *sched.Overload
	switch {
	case errors.As(err, &o):
		atomic.AddUint64(&v.stats.Shed, 1)
		if o.Held {
			atomic.AddUint64(&v.stats.ShedAfterWait, 1)
		}
		return &OverloadError{After: o.After, Queued: o.Queued, reason: o.Reason}
	case errors.Is(err, sched.ErrClosed):
		return ErrClosed
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("verify: work timed out (Options.WorkTimeout): %w", err)
	case errors.Is(err, sched.ErrPanic): // counted by countPanic
		return fmt.Errorf("verify: %w", err)
	}
	return err
}

// digestHit answers a request whose password gives the digest remembered
// for its name and stored hash: a match scrypt proved before, in any
// process sharing the store.
func (v *Verifier) digestHit(name, stored string, key cache.Key) error {
	h, err := parseHash(stored, v.opts.Limits)
	if err != nil {
		return fmt.Errorf("%w (stored for %s)", err, displayName(name))
	}
	atomic.AddUint64(&v.stats.DigestHits, 1)
	v.recordMatch(name, stored, key, len(h.key))
	return nil
}

// compute verifies a tuple the cache could not answer, in a job shared
// by every request for it; apart so that a cache hit allocates nothing.
func (v *Verifier) compute(ctx context.Context, name, stored, password string, key cache.Key, doubted bool) (err error) {
	h, err := parseHash(stored, v.opts.Limits)
	if err == nil {
		err = v.fits(&h)
	}
	if err != nil {
		return fmt.Errorf("%w (stored for %s)", err, displayName(name))
	}
	t := &task{kind: verification, name: name, password: password, key: key, stored: stored, h: h}
	r := sched.Request{Key: sched.Key(key), Name: name, Work: h.work, Class: classOf(h.logN, h.r, h.p), Task: t, Doubted: doubted}
	pprof.Do(ctx, requestLabels, func(ctx context.Context) { err = v.share(ctx, r) })
	return err
}

// enroll hashes password and creates node's hash, in a job shared by
// every request enrolling the node with it, holding a slot only while it
// hashes (see prepare and finishEnroll). An error wraps ErrExists when
// the node had a hash already.
func (v *Verifier) enroll(ctx context.Context, node, password string) error {
	return v.shareNew(ctx, &task{kind: enrollment, name: node, password: password})
}

// shareNew shares t, a new hash of t.password with Options.Params: an
// enrollment's, or a hashOnly one's. Its key is (name, "", password):
// no verification key has an empty hash.
func (v *Verifier) shareNew(ctx context.Context, t *task) error {
	p := v.opts.Params
	t.key = v.cache.Key(t.name, "", t.password)
	return v.share(ctx, sched.Request{Key: sched.Key(t.key), Name: t.name, Work: v.enrollWork,
		Class: classOf(p.LogN, p.R, p.P), Task: t, Later: t.kind == enrollment})
}

// classOf is the batch class of a computation with these parameters.
func classOf(logN, r, p int) sched.Class { return sched.Class{N: 1 << logN, R: r, P: p} }

// share joins the job r asks for, shared by every request for r.Key, and
// waits for its result within ctx and Options.MaxWait. The scheduler
// runs it in a batch (runBatch), detached from ctx but for its values.
func (v *Verifier) share(ctx context.Context, r sched.Request) error {
	v.mem() // the scheduler shaped for the budget
	r.Doubted = r.Doubted || v.fails.failing(r.Name)
	j, created, err := v.sched.Join(ctx, r)
	if err != nil { // closed, or the whole queue full
		return v.answer(err)
	}
	if !created {
		atomic.AddUint64(&v.stats.Shared, 1)
	}
	arrived, _ := Arrival(ctx)
	err = v.sched.Wait(ctx, j, arrived)
	if cause := context.Cause(ctx); cause != nil && err == cause {
		return fmt.Errorf("verify: waiting for result: %w", err)
	}
	return v.answer(err)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
