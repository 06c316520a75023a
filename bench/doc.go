// Package bench reproduces the reboot of a large k3s cluster: hundreds of
// nodes whose passwords must be verified at once, each agent retrying on
// its own schedule. It runs the herd against server models side by side,
// in one process (ModeInproc) or over real HTTPS (ModeHTTP), and reports
// for each how long the herd took against the lower bound measured on the
// same machine, how much scrypt work and heap it cost, and how many
// requests were shed or timed out.
//
// The agents are k3s agents (agent.go): each attempt runs k3s's sequence
// of requests again, each on a new TLS connection, and the join token
// goes with every request but /cacerts. ClientPolicy agents are this
// module's agent.Client instead. The server models follow upstream k3s
// (model.go; BENCHMARKS.md says which code each follows); nodepass is
// verify.New with its defaults, the token loaded with LoadTokens and a
// DigestKey shared by the run's servers.
//
// A run: make the herd once with NewHerd (the stored hashes), measure its
// lower bound with Herd.MeasureLowerBound, then call Run once per model.
// A run can also be cut in two, its servers (StartServers) and its agents
// (NewAgents) in processes of their own (split.go). A Scenario may put the
// herd under attack (attack.go), make the store fail (faults.go) or
// measure a second reboot (reboot.go).
//
// The exported names serve cmd/bench and this package's benchmarks, and
// change with them: nothing outside this repository should import the
// package. It is a module of its own because its benchmarks (go test
// -bench ./bench/) and its results directory are what BENCHMARKS.md cites.
package bench
