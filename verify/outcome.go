package verify

import (
	"crypto/subtle"
	"fmt"
	"strings"

	"github.com/nodepass/nodepass/cache"
)

// Outcomes the cache and the remembered digests keep: read (fromCache) and
// written (recordMatch, remember) alike by the request side, which asks
// before it computes, and the slot side, which asks again for a job queued
// meanwhile and records what it computed.

// fromCache answers the verification of (node, stored) whose tuple key is
// key from the cache, without scrypt: the tuple's own outcome, or its
// pair's verified password (see recordMatch), a match if it is this one
// and errKnownReject if it is another. ok is false when the cache cannot
// say. A mismatch counts in node's failures; the caller's answer counts
// the rest.
func (v *Verifier) fromCache(node, stored string, key cache.Key) (err error, ok bool) {
	o, ok := v.cache.Get(key)
	if !ok {
		// The pair's key only now: a hit costs one HMAC, not two.
		matched, paired := v.cache.MatchedTuple(v.cache.PairKey(node, stored))
		switch {
		case !paired:
			return nil, false
		case subtle.ConstantTimeCompare(matched[:], key[:]) == 1:
			o = cache.Match // the verified tuple itself, its own entry evicted
		default:
			v.fails.mismatch(node)
			return errKnownReject, true
		}
	}
	if o == cache.Mismatch {
		v.fails.mismatch(node)
		return ErrMismatchedHashAndPassword, true
	}
	return nil, true
}

// errKnownReject is ErrMismatchedHashAndPassword for a tuple answered
// without scrypt because another password is its pair's: answer counts
// it in KnownMatchRejects.
var errKnownReject = fmt.Errorf("%w", ErrMismatchedHashAndPassword)

// forgetFailures forgets name's mismatches after a match, but for a name
// every agent of a cluster shares: a token user's, or a hash the Hasher
// is asked about (k3s checks every join token against one). Their
// matches would reset a guesser's delays as fast as the herd asks.
func (v *Verifier) forgetFailures(name string) {
	if !strings.HasPrefix(name, tokenPrefix) && !hashName(name) {
		v.fails.match(name)
	}
}

// recordMatch caches key, the tuple of node's password and stored hash,
// as verified and forgets node's failures. When the stored key has at
// least minKeyLen bytes it also marks key as its pair's verified password.
// Passwords here are as scrypt sees them (hmacKey), so two that differ are
// two HMAC keys: both matching one stored key would be a collision of
// 128 bits of scrypt's output at least, so any other is a mismatch
// (fromCache).
func (v *Verifier) recordMatch(node, stored string, key cache.Key, keyLen int) {
	v.forgetFailures(node)
	if keyLen >= minKeyLen {
		v.cache.PutMatch(v.cache.PairKey(node, stored), key)
		v.sched.Cheapen(node) // its queued guesses will cost no scrypt
	} else {
		v.cache.Put(key, cache.Match)
	}
}

// remember records the digest of a scrypt match, off the request path.
func (v *Verifier) remember(node, stored, password string) {
	if v.digests != nil {
		v.digests.record(node, stored, digest(v.opts.DigestKey, node, stored, password))
	}
}
