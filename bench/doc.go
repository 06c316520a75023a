// Package bench reproduces the reboot of a large k3s cluster: hundreds of
// nodes whose passwords must be verified at once, each agent retrying on
// its own schedule. It runs the herd against server models side by side,
// in one process (ModeInproc) or over real HTTPS (ModeHTTP), and reports
// for each how long the herd took against the lower bound measured on the
// same machine, how much scrypt work and heap it cost, and how many
// requests were shed or timed out.
//
// The agents are k3s agents (agent.go): each attempt to get a node's
// configuration runs k3s's sequence of requests again (three of /cacerts,
// then with the join token as basic auth the configuration, the two CA
// files and four certificate POSTs, two of them guarded by the node's
// password, each on a new TLS connection), and the Result counts
// attempts, requests and TLS handshakes per node. In-process an attempt
// is its seven authenticated requests.
//
// The server models (see Models) follow upstream k3s (BENCHMARKS.md says
// which code each follows). Each checks the join token of every
// authenticated request first: k3s-v1.25 compares the plaintext, the
// later ones run scrypt against the hash made at start, unbounded.
// k3s-v1.25 fetches each node's hash through a 5 QPS limiter, k3s-v1.28
// reads it from a local cache, k3s-latest from an informer cache behind
// k3s's max-in-flight caps (20 GETs, 10 POSTs; past them 429 with
// Retry-After: 1; the token is checked before them), and all three run
// scrypt on both guarded requests, without bound and without a result
// cache. nodepass is verify.New with its defaults, the token loaded with
// Verifier.LoadTokens and checked with VerifyToken (httpauth), and,
// unless Scenario.NoDigestKey, remembered verification: a DigestKey made
// for the run, the same for every server of it (the k3s models have no
// equivalent).
//
// A run: make the herd once with NewHerd (the stored hashes) and measure
// its lower bound with Herd.MeasureLowerBound, then call Run once per
// model. A run can also be cut in two, its servers (StartServers) and its
// agents (NewAgents) in processes of their own, so that each side has its
// own CPUs; see split.go. cmd/bench is the command line over this
// package (its -split pins the two processes); go test -bench runs
// BenchmarkHerd.
//
// A Scenario may also put the herd under attack: Attackers flood the
// servers with wrong passwords for real node names (holding the join
// token), TokenGuessers with wrong join tokens, Duplicates give some
// nodes a second machine with the same hostname and another password, and
// StoreFaults make the store fail or answer late. Result.Attack and
// Result.Faults then say whether anything wrong got in, where the scrypt
// work went (each computation attributed to whose password it checked),
// and whether a store error was ever answered from a cache.
//
// A Scenario may also measure a second reboot (Scenario.Reboot): every
// node joins once first (a warm-up, not measured), then either only the
// agents reboot, against servers that stayed up, or the servers restart
// too, as new model instances over the same store. Result.ScryptRuns, DigestHits and CacheHits are then the
// reboot's, and Result.Ratio is still to the cold lower bound.
//
// # No stable API
//
// The exported names (Scenario, Result, Run and the rest) serve cmd/bench
// and this package's own benchmarks, and change with them without
// notice: nothing outside this repository should import the package. It
// is a module of its own rather than under cmd/internal because its herd
// benchmarks (go test -bench ./bench/, make benchmarks) and its results
// directory are what BENCHMARKS.md cites and reruns.
package bench
