// Package sched decides when a Verifier's scrypt computations run. It is
// the only place in verify that keeps state about work in progress.
//
// One [Job] is one computation shared by every request for its key, and
// also that computation's place in the queue: there is no second object
// to keep in step with it. A [Scheduler] owns the key → job map, the fair
// queue of jobs waiting for one of a fixed number of slots, and the
// helpers that the policy reads (the repeat-ask log, the time estimate),
// all under one mutex, Scheduler.mu. No method holds that mutex while
// calling out of the package, and nothing else in verify takes it, so it
// never nests with another lock.
//
// # Policy
//
// Slots are granted to node names in turn (round robin), not in arrival
// order, so that a flood of work for some names cannot starve the others.
// A name may have at most Config.PerName jobs queued. Within a name, a
// password asked for again goes first: a node's agent retries the same
// password, a guesser rarely does. The last few passwords asked for each
// name are remembered (as keys), and a password asked for more often takes
// the place of a less-asked queued one when the name has no room.
//
// A first ask for a name that is failing (the caller says so) or that
// already has work queued or running is a suspect: it runs only when no
// other work is queued. A guesser's passwords are first asks, so guesses
// for a name being attacked wait for spare capacity, and a herd's queue
// holds at most one ordinary job per name.
//
// Among the names in turn, those with a caller waiting for one of their
// jobs go first, in the order their callers came; jobs nobody waits for
// (their callers were told to come back later) run when no caller is
// waiting. A node's retry then finds its job done or served next.
//
// # Estimates
//
// A waiting caller is told to come back later rather than held past
// Config.MaxWait, with an estimate of when its result will be ready. The
// estimate spreads the work (128·r·N·p bytes per job) ahead of a job over
// the slots, at a time per byte with two parts measured apart: the CPU
// time a computation takes (a moving average that settles within a few
// jobs) and how much longer than that it takes on the wall clock because
// others want the CPU too (a slow moving average, from 1). A burst of
// contention, such as a herd's TLS handshakes in its first second, then
// does not make every estimate of that second many times too long, while
// lasting contention is learnt within a few dozen jobs.
//
// golang.org/x/sync/singleflight and x/sync/semaphore each do part of
// this, but a caller here must see its job's place in the queue the moment
// it joins, leave while the work goes on, and be served by name rather
// than by arrival: one map and one queue under one lock give all three.
package sched
