// Package verify checks k3s/RKE2 node passwords, and keeps doing so when
// hundreds of nodes ask at once.
//
// Hashes are in k3s's format ([GenerateFromPassword]). A [Verifier] over
// a [Store] of them answers [Verifier.Ensure] for a node asking for its
// certificates: it caches each verified (node, stored hash, password)
// under an HMAC key, shares one computation among identical requests, and
// computes the rest in batches, as verify/internal/sched's doc says.
// [Verifier.VerifyToken] does the same for join tokens, and [Hasher] for
// k3s's hash.Hasher.
//
// A request that comes alone costs its scrypt and nothing more. With no
// burst under way its computation starts at once, on buffers kept from
// earlier work, and waits for no batch. On an AMD EPYC with AVX-512 a
// lone miss takes 0.98-1.01 × one lone scrypt.Key of the same
// parameters through Verify, and 0.97-1.00 × through the Hasher
// (BenchmarkLoneMiss). Only the computations of a burst wait, 10 ms at
// most, to share a batch. A request answered from the cache (a node's
// retry) takes 230-460 ns there, from two goroutines at once, and
// allocates nothing (BenchmarkVerify, path=hit): the cache is split in
// shards, so concurrent hits do not wait for one lock.
//
// Scrypt's memory stays within [Options].ScryptMemory, every byte a batch
// allocates counted. By default it is a twelfth of the memory the process
// may use: its cgroup's limit where one is set, else the machine's. That
// is 171 MiB on a 2 GiB server, four lanes at k3s's parameters, and 683
// MiB on an 8 GiB one; at most [DefaultScryptMemory], at least one hash
// of Options.Params. k3s's resource profiling (docs.k3s.io,
// reference/resource-profiling) finds a server with a workload using
// about 1.6 GB, which leaves a 2 GiB server about 400 MB. Four lanes
// cost more per hash than sixteen: on an AMD EPYC with AVX-512 a herd of
// 320 took 1.6 × as long at 171 MiB as with no budget, and 1.13 × at
// 260 MiB, the least that holds eight lanes; a server that can spare it
// sets ScryptMemory so. On Linux the
// buffers live outside the Go heap, so GOGC does not let garbage grow by
// their size again.
package verify
