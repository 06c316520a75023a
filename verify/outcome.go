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

// fromCache answers the verification of (name, stored) whose tuple key is
// key from the cache, without scrypt: the tuple's own outcome, or its
// pair's verified password (see recordMatch), a match if it is this one
// and errKnownReject if it is another. known is false when the cache
// cannot say. A mismatch counts in name's failures; the caller's answer counts
// the rest.
func (v *Verifier) fromCache(name, stored string, key cache.Key) (known bool, err error) {
	o, ok := v.cache.Get(key)
	if !ok {
		// The pair's key only now: a hit costs one HMAC, not two.
		matched, paired := v.cache.MatchedTuple(v.cache.PairKey(name, stored))
		switch {
		case !paired:
			return false, nil
		case subtle.ConstantTimeCompare(matched[:], key[:]) == 1:
			o = cache.Match // the verified tuple itself, recorded since Get
		default:
			v.fails.mismatch(name)
			return true, errKnownReject
		}
	}
	if o == cache.Mismatch {
		v.fails.mismatch(name)
		return true, ErrMismatchedHashAndPassword
	}
	return true, nil
}

// errKnownReject is ErrMismatchedHashAndPassword for a tuple answered
// without scrypt because another password is its pair's: answer counts
// it in KnownMatchRejects.
var errKnownReject = fmt.Errorf("%w", ErrMismatchedHashAndPassword)

// recordMatch caches key, the tuple of name's password and stored hash,
// as verified and forgets name's failures. When the stored key has at
// least minKeyLen bytes it also marks key as its pair's verified password.
// Passwords here are as scrypt sees them (hmacKey), so two that differ are
// two HMAC keys: both matching one stored key would be a collision of
// 128 bits of scrypt's output at least, so any other is a mismatch
// (fromCache).
func (v *Verifier) recordMatch(name, stored string, key cache.Key, keyLen int) {
	v.forgetFailures(name)
	if keyLen >= minKeyLen {
		v.cache.PutMatch(v.cache.PairKey(name, stored), key)
		v.sched.Cheapen(name) // its queued guesses will cost no scrypt
	} else {
		v.cache.Put(key, cache.Match)
	}
}

// forgetFailures forgets name's mismatches after a match, but for a name
// every agent of a cluster shares: a token user's, or a hash the Hasher
// is asked about (k3s checks every join token against one). Their
// matches would reset a guesser's delays as fast as the herd asks.
func (v *Verifier) forgetFailures(name string) {
	if nodeName(name) {
		v.fails.match(name)
	}
}

// remember records the digest of a scrypt match of a node's password,
// off the request path. A token's is not recorded: the Store holds
// nodes' hashes, not the tokens', and VerifyToken reads no digest.
func (v *Verifier) remember(name, stored, password string) {
	if v.digests != nil && nodeName(name) {
		v.digests.record(name, stored, digest(v.opts.DigestKey, name, stored, password))
	}
}

// nodeName reports whether name, along the shared path, is a node's:
// not a token user's (tokenPrefix), CreateHash's nonce ("\x00create\x00"),
// or a hash (the Hasher's). No node name has a NUL or starts with "$"
// (secretName).
func nodeName(name string) bool { return !strings.HasPrefix(name, "\x00") && !hashName(name) }
