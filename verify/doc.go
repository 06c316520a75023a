// Package verify checks k3s/RKE2 node passwords, and keeps doing so when
// hundreds of nodes ask at once.
//
// Hashes are in k3s's format ([GenerateFromPassword]). A [Verifier] over
// a [Store] of them answers [Verifier.Ensure] for a node asking for its
// certificates: it caches each verified (node, stored hash, password)
// under an HMAC key, shares one computation among identical requests, and
// computes the rest in batches (verify/internal/sched has the policy).
// [Verifier.VerifyToken] does the same for join tokens, and [Hasher] for
// k3s's hash.Hasher. Scrypt's memory stays within [Options].ScryptMemory,
// every byte counted; on Linux its buffers live outside the Go heap (see
// package scrypt on GOMEMLIMIT).
package verify
