// Package scrypt implements the scrypt key derivation function of RFC 7914
// with the same contract and output as golang.org/x/crypto/scrypt, faster:
// a SIMD Salsa20/8 BlockMix on amd64, several independent hashes computed
// together, and working memory reused across calls.
//
// # Contract and safety
//
// [Key] is a drop-in replacement for golang.org/x/crypto/scrypt.Key: same
// parameters, same errors for the same parameters (messages start with
// "scrypt: "), same panic for keyLen ≤ 0, and the same bytes for every
// input. [KeyBatch] computes several keys, each exactly as Key would.
// Every function of the package is safe for concurrent use; Key and
// KeyBatch compute in the calling goroutine and start none.
//
// A wrong key from this package would never let a wrong password in: it
// would only make a right password mismatch. Equality with x/crypto is
// therefore the whole safety argument, and the tests make it:
// differential tests and a fuzz target against x/crypto, the RFC 7914
// vectors, and each SIMD BlockMix against the pure-Go one, under the
// default build and -tags purego.
//
// # Kernels and lanes
//
// SMix, the memory-hard part, runs once per 128·r-byte block: p times per
// key. The SMix computations of one (N, r) are independent, so this
// package runs several of them in lockstep, and one BlockMix call (a
// kernel) advances them all: their random reads of V overlap and SIMD
// registers hold several hashes. On amd64 the kernels use SSE2, AVX2 or
// AVX-512 (kernels_amd64.go lists them), up to sixteen hashes at once;
// pure Go computes one. [Lanes] is the most hashes a kernel of this CPU
// takes at once.
//
// Which kernel runs is measured on the machine that runs it, never fixed
// at build time: CPUs differ, and so do parameters (whether V fits in a
// cache). For each class of work, (N, r) and the number of hashes mixed
// together (1 for a Key with p = 1, up to Lanes() in a batch), the first
// computations run short segments of SMix on every kernel that fits,
// pure Go among them, and the fastest is kept, each kernel judged by its
// least disturbed segment. Every kernel gives the same bytes, so the
// work done while measuring is the real work. [Choices] reports what was
// chosen and measured. Key gains from lanes only when p ≥ 2; a herd
// gains through KeyBatch, best with batches of Lanes() jobs that share N
// and R.
//
// # Memory
//
// Each lane needs one buffer of 128·r·(N+2) bytes (V, 128·r·N bytes, and
// two 128·r-byte working blocks). A call to Key or KeyBatch holds at most
// Lanes() buffers at a time, plus p·128·r bytes per job for PBKDF2's
// output and, for the word-sliced kernel, 4096·r + 1152 bytes of working
// blocks per batch of sixteen. [KeyBatchBytes] adds up every byte a
// batch allocates, rounded as the memory that holds it is. The buffers
// come from a [Pool] (Key and KeyBatch use a package-wide one;
// [Pool.KeyBatch] takes the caller's, and a bound on its lanes). A
// buffer that goes back holds password-derived state until the next
// computation overwrites it, or 100 ms at most: then, or when the pool
// drops it, it is cleared (clearing each as it went back cost 7 % of a
// batch). With S goroutines calling Key or KeyBatch at one parameter
// set, buffers in use and idle stay within S times KeyBatchBytes of one
// call (see [Pool]). [Pool.Release] (and [ReleaseBuffers] for the
// package-wide pool) drops the idle ones.
//
// On Linux a buffer of a huge page (2 MiB) or more lives outside the Go
// heap, in whole pages of the kernel's (32 MiB + 4 KiB at (2^15, 8, 1)),
// backed by huge pages where the kernel allows (buffer_linux.go). The
// garbage collector neither zeroes it again when it is reused nor counts
// it in the live heap that GOGC lets garbage grow beside. Nor does
// GOMEMLIMIT count it: a process that sets GOMEMLIMIT to keep under its
// container's limit must leave the buffers' bytes out of it (a
// Verifier's Options.ScryptMemory bounds them; [OffHeapBytes] tells what
// is mapped now), or the kernel, not the garbage collector, meets the
// limit. Elsewhere the buffers are on the Go heap.
package scrypt
