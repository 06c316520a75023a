package verify

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// Hasher is k3s's authenticator/hash.Hasher, for nodepassword.Hasher. It
// gives k3s's outcome for every hash k3s made and any key; a hash past
// Options.Limits, or in a form k3s never writes, is ErrInvalidHash. A
// call waits up to Options.MaxWait, by default WorkTimeout: k3s refuses
// on any error. It is safe for concurrent use.
type Hasher struct {
	v *Verifier
}

// NewHasher returns a Hasher with opts as New takes them, but for MaxWait
// (see Hasher); Tokens, DigestKey and FailOpen are not used. Like New, it
// does no work.
func NewHasher(opts *Options) (*Hasher, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.MaxWait = cmp.Or(o.MaxWait, max(o.WorkTimeout, 0), defaultWorkTimeout)
	o.Tokens, o.DigestKey, o.FailOpen = nil, nil, nil
	v, err := New(NewMemoryStore(), &o)
	if err != nil {
		return nil, err
	}
	return &Hasher{v: v}, nil
}

// CreateHash hashes secretKey with a random salt and Options.Params.
func (h *Hasher) CreateHash(secretKey string) (string, error) {
	return h.v.hashOnly(context.Background(), hmacKey(secretKey))
}

// hashOnly hashes secret, a password as scrypt sees it (hmacKey), with
// Options.Params on one of v's slots and records it as verified against
// the hash made, the hash as its name (see Hasher).
func (v *Verifier) hashOnly(ctx context.Context, secret string) (string, error) {
	if v.closed.Load() {
		return "", ErrClosed
	}
	// Each call is a job of its own, under a name of its own: two
	// callers hashing one key get two salts, as with k3s.
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("verify: reading random nonce: %w", err)
	}
	name := "\x00create\x00" + hex.EncodeToString(nonce[:])
	t := &task{kind: hashOnly, name: name, password: secret}
	if err := v.shareNew(ctx, t); err != nil {
		return "", err
	}
	return t.made, nil
}

// VerifyHash returns nil when secretKey matches hash, or an error as
// Verify's (but ErrNotFound and the store's).
func (h *Hasher) VerifyHash(hash, secretKey string) error {
	v := h.v
	switch {
	case v.closed.Load():
		return ErrClosed
	case len(hash) > maxHashLen:
		return fmt.Errorf("%w: %d bytes long, limit %d", ErrInvalidHash, len(hash), maxHashLen)
	}
	// The hash is the name: each stored hash has its share of the queue.
	return v.verifyStored(context.Background(), hash, hash, hmacKey(secretKey), nil)
}

// Stats is Verifier.Stats.
func (h *Hasher) Stats() Stats { return h.v.Stats() }

// Close is Verifier.Close.
func (h *Hasher) Close() error { return h.v.Close() }
