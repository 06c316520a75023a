package verify

import (
	"crypto/subtle"
	"fmt"
	"strings"

	"github.com/nodepass/nodepass/cache"
)

// Outcomes the cache and the remembered digests keep, read and written
// by the request side and the slot side.

// fromCache answers the verification of (name, stored), tuple key key,
// from the cache: the tuple's own outcome, or its pair's verified
// password (recordMatch), errKnownReject if it is another. known is false
// when the cache cannot say. A mismatch counts in name's failures.
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

// errKnownReject is a mismatch because another password is the pair's
// (answer counts it in KnownMatchRejects).
var errKnownReject = fmt.Errorf("%w", ErrMismatchedHashAndPassword)

// recordMatch caches key, the tuple of name's password and stored hash,
// as verified and forgets name's failures. With a stored key of
// minKeyLen bytes or more it marks key as its pair's verified password:
// another matching too would be a 128-bit collision of scrypt's output.
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
// every agent shares (a token user's, a hash): the herd's matches would
// reset a guesser's delays as fast as it asks.
func (v *Verifier) forgetFailures(name string) {
	if nodeName(name) {
		v.fails.match(name)
	}
}

// remember records the digest of a scrypt match of a node's password
// (not a token's: the Store holds nodes' hashes), off the request path.
func (v *Verifier) remember(name, stored, password string) {
	if v.digests != nil && nodeName(name) {
		v.digests.record(name, stored, digest(v.opts.DigestKey, name, stored, password))
	}
}

// nodeName reports whether name is a node's: not a token user's, a
// nonce ("\x00create\x00") or a hash (dnsname.Subdomain allows neither).
func nodeName(name string) bool { return !strings.HasPrefix(name, "\x00") && !hashName(name) }
