// Package verify checks k3s/RKE2 node passwords and keeps doing so when
// hundreds of nodes ask at once.
//
// The hash format is the one k3s and RKE2 store in their node-password
// secrets, $1:<salt hex>:<logN>:<r>:<p>:<key base64>; see
// [GenerateFromPassword] and [CompareHashAndPassword].
//
// A [Verifier] sits in front of a [Store] of those hashes; [Verifier.Ensure]
// is what a server calls for a node asking for its certificates. On top of
// plain scrypt it caches each verified (node, stored hash, password) under
// an HMAC key, so retries cost no scrypt; shares one computation among
// identical concurrent requests; computes the rest in batches on
// Options.MaxConcurrent slots, answering a request that cannot be served
// within Options.MaxWait at once with an [OverloadError]; remembers
// verified passwords across servers and restarts (Options.DigestKey);
// keeps all its scrypt buffers, in use and idle, within
// Options.ScryptMemory ([DefaultScryptMemory], 1 GiB); and refuses stored
// hashes beyond [Limits] or that budget before allocating anything.
//
// A request flows: httpauth → Ensure or Verify (the input checked) →
// Store.Get → the cache (package cache; a hit allocates nothing) → the
// remembered digest → the scheduler (verify/internal/sched, whose package
// doc explains the queue's policy) → scrypt in a batch → the outcome,
// cached before the slot is given back → Store.Create when enrolling.
package verify
