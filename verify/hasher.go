package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/nodepass/nodepass/verify/internal/sched"
)

// Hasher has exactly the method set of k3s's authenticator/hash.Hasher
// (CreateHash, VerifyHash), which k3s calls through one variable,
// nodepassword.Hasher, for its join tokens and its node passwords. A k3s
// server adopts nodepass by assigning it:
//
//	h, err := verify.NewHasher(nil) // k3s's parameters, GOMAXPROCS slots
//	...
//	nodepassword.Hasher = h
//
// Behind it is a Verifier without a Store: VerifyHash is cached per
// (hash, key) under an HMAC key (no key is kept), shared by concurrent
// identical calls, computed in batches on Options.MaxConcurrent slots,
// and a hash's other keys are refused without scrypt once one has
// matched; CreateHash computes on the same slots and records the key it
// hashed as verified, so the VerifyHash that follows (k3s hashes its
// passwd file when it loads, then checks every request) costs no scrypt.
// For a hash k3s made, the outcome is k3s's: nil for its key, an error
// for any other.
//
// What it does not give, beside a Verifier over a Store: it sees a hash,
// not a node, so fairness is per stored hash (a guesser of one node's
// password, or of the join token, gets that hash's share of the queue);
// nothing is enrolled or remembered across servers (no DigestKey); and
// its methods take no context, so a call waits for its result up to
// Options.MaxWait, which defaults here to Options.WorkTimeout (2 min)
// rather than 9.5 s: k3s turns any error into a refusal, so answering
// "overloaded" would refuse a right key. The work goes on when the
// agent's request times out, and its outcome is cached for the retry.
// Where k3s would try any stored hash, a Hasher refuses one beyond
// Options.Limits (256 MiB of memory by default) before allocating, and
// hashes in forms k3s never writes (signs or leading zeros in a number,
// a key under 16 bytes) with ErrInvalidHash.
//
// A Hasher is safe for concurrent use; close it with Close.
type Hasher struct {
	v *Verifier
}

// NewHasher returns a Hasher; opts may be nil for the defaults, as for
// New, but for MaxWait (see Hasher). Options.Params are what CreateHash
// hashes with (k3s's: DefaultParams); Options.Tokens, DigestKey and
// FailOpen are not used.
func NewHasher(opts *Options) (*Hasher, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxWait == 0 {
		o.MaxWait = o.WorkTimeout
		if o.MaxWait <= 0 {
			o.MaxWait = defaultWorkTimeout
		}
	}
	o.Tokens, o.DigestKey, o.FailOpen = nil, nil, nil
	v, err := New(NewMemoryStore(), &o)
	if err != nil {
		return nil, err
	}
	return &Hasher{v: v}, nil
}

// CreateHash hashes secretKey with a fresh random salt and Options.Params,
// in k3s's format, on one of the Verifier's slots.
func (h *Hasher) CreateHash(secretKey string) (string, error) {
	return h.v.hashOnly(context.Background(), secretKey)
}

// hashOnly hashes secret with Options.Params on one of v's slots and
// records it as verified against the hash made, the hash as its name
// (see Hasher).
func (v *Verifier) hashOnly(ctx context.Context, secret string) (string, error) {
	if v.closed.Load() {
		return "", ErrClosed
	}
	if len(secret) > v.opts.Limits.MaxPasswordLen {
		return "", fmt.Errorf("%w: key is %d bytes, limit %d", ErrInvalidInput, len(secret), v.opts.Limits.MaxPasswordLen)
	}
	// Each call is a job of its own, under a name of its own: two
	// callers hashing one key get two salts, as with k3s.
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("verify: reading random nonce: %w", err)
	}
	name := "\x00create\x00" + hex.EncodeToString(nonce[:])
	t := &task{node: name, password: secret, key: v.cache.Key(name, "", secret), hashOnly: true}
	p := v.opts.Params
	err := v.share(ctx, sched.Request{Key: sched.Key(t.key), Name: name, Work: v.enrollWork,
		Class: classOf(p.LogN, p.R, p.P), Task: t})
	if err != nil {
		return "", err
	}
	return t.made, nil
}

// VerifyHash returns nil when secretKey matches hash, a k3s hash, and an
// error otherwise: wrapping ErrMismatchedHashAndPassword for another key,
// ErrInvalidHash for a malformed hash or one beyond Options.Limits, and
// ErrInvalidInput, ErrOverloaded or ErrClosed as Verify does.
func (h *Hasher) VerifyHash(hash, secretKey string) error {
	v := h.v
	switch {
	case v.closed.Load():
		return ErrClosed
	case len(hash) > maxHashLen:
		return fmt.Errorf("%w: %d bytes long, limit %d", ErrInvalidHash, len(hash), maxHashLen)
	case len(secretKey) > v.opts.Limits.MaxPasswordLen:
		return fmt.Errorf("%w: key is %d bytes, limit %d", ErrInvalidInput, len(secretKey), v.opts.Limits.MaxPasswordLen)
	}
	// The hash is the name: each stored hash has its share of the queue.
	return v.verifyStored(context.Background(), hash, hash, secretKey, nil)
}

// Stats returns the counters of the Verifier behind h.
func (h *Hasher) Stats() Stats { return h.v.Stats() }

// Close stops h as Verifier.Close does: later calls get ErrClosed.
func (h *Hasher) Close() error { return h.v.Close() }
