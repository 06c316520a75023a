// Package verify checks k3s/RKE2 node passwords and keeps doing so when
// hundreds of nodes ask at once.
//
// The hash format is the one k3s and RKE2 store in their node-password
// secrets, $1:<salt hex>:<logN>:<r>:<p>:<key base64>; see
// [GenerateFromPassword] and [CompareHashAndPassword].
//
// A [Verifier] sits in front of a [Store] of those hashes. [Verifier.Ensure]
// is what a server calls for a node asking for its certificates: it
// enrolls a new node or verifies a known one. On top of plain scrypt it
//
//   - caches each verified (node, stored hash, password) outcome under an
//     HMAC key, so a node's retries cost no scrypt;
//   - lets concurrent identical requests share one computation, detached
//     from any one caller, so a caller that gives up does not waste it;
//   - runs at most Options.MaxConcurrent computations at once, bounding CPU
//     and memory, and answers requests that would wait past
//     Options.MaxWait with an [OverloadError] whose RetryAfter is an honest
//     estimate, while their work stays queued for the retry;
//   - refuses stored hashes whose parameters exceed [Limits] before
//     allocating anything.
//
// # How a request flows
//
// httpauth → [Verifier.Ensure] or [Verifier.Verify]: check the input →
// Store.Get → the verified-tuple cache (package cache: a hit allocates
// nothing) → the scheduler (verify/internal/sched: one job per distinct
// tuple, shared by its callers, queued fairly across node names for one
// of Options.MaxConcurrent slots) → scrypt → the outcome, cached before
// the job ends → Store.Create when enrolling, after the slot is given
// back. Two mutexes hold all of the Verifier's own state: the scheduler's
// (jobs and queue) and the failure counter's (per-name mismatch counts);
// neither is held while the other is taken or while anything outside
// their packages runs.
package verify
