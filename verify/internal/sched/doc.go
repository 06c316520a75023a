// Package sched decides when a Verifier's scrypt computations run, and
// runs them. It keeps the Verifier's state about computations in
// progress: which are queued, running or storing their result.
//
// One [Job] is one computation shared by every request for its key, and
// also that computation's place in the queue: there is no second object
// to keep in step with it. A [Scheduler] owns the key → job map, the fair
// queue of jobs waiting for one of a fixed number of slots, the slots
// themselves, and the helpers that the policy reads (the repeat-ask log,
// the time estimate), all under one mutex, Scheduler.mu. No method holds
// that mutex while calling out of the package, and nothing else in verify
// takes it, so it never nests with another lock.
//
// # Batches and slots
//
// When a slot frees, it takes the job whose turn it is and the jobs after
// it in turn that share its [Class] (scrypt's N, r and p), up to
// Config.Lanes, and Config.Run computes them together on the slot's own
// goroutine: a batch. A batch stops at the first job of another class, so
// it never delays a job the policy ranks ahead of one it takes; it also
// stops at a second job of a name already in it (the first may verify the
// name, answering the others without scrypt) and at Config.MaxBatchWork.
// Results are published before the slot goes to the next batch. A queued
// job holds no goroutine: only running batches and enrollments reading
// the store (Request.Later, Config.Prepare) have one. A job's context ends
// at its work timeout or at Close, and that ends it if it is not running
// (context.AfterFunc: no goroutine while it waits).
//
// The queue keeps its orders and sums in treaps (tree.go), so joining,
// asking again, waiting, estimating and taking the next job cost
// O(log n) whatever the backlog, and a queued job costs at most 4 KiB of
// heap, its name's share included.
//
// # Policy
//
// Slots are granted to node names in turn (round robin), not in arrival
// order, so that a flood of work for some names cannot starve the others.
//
// A first ask for a name that is failing (the caller says so) or that
// already has work queued or running is a suspect: it runs only when no
// other work is queued. A guesser's passwords are first asks, so guesses
// for a name being attacked wait for spare capacity, and a herd's queue
// holds at most one ordinary job per name. A password asked for again is
// ordinary: an agent retries the same password. The last few passwords
// asked for each name are remembered (as keys), so that a password asked
// again after its job ended still counts as asked again.
//
// Within a name, ordinary jobs go before suspects, a password asked again
// before one asked once, and otherwise the one that arrived first. Asking
// more than twice counts for nothing: asking costs a guesser nothing, and
// a count would let a guess keep passing a password queued before it.
//
// Among the names in turn, those with a caller waiting for one of their
// jobs go first, in the order their callers came; jobs nobody waits for
// (their callers were told to come back later) run when no caller is
// waiting. A node's retry then finds its job done or served next.
//
// # Admission: a name's places
//
// A name may have at most Config.PerName jobs queued or pending, but for
// pinned ones. A new password for a name with no room is not refused: its
// job is parked in the name's line, holding no place, for as long as a
// caller waits for it, and ends when its last caller leaves.
// The line gets the name's places oldest first: a place that frees, or
// the place of a queued suspect whose callers have all left without
// pinning it (displaced). A caller that waits out its whole
// Config.MaxWait, counted from its arrival (WithArrival), for a parked or
// queued job pins it: a pinned job is never displaced, and a parked one
// is then queued at once, over the cap. Nothing else ends a queued job
// before it runs but its context (the work timeout, or Close). When the
// queue as a whole is full (Config.MaxQueue: jobs queued within their
// names' places, pending and parked), a new job takes the place of the
// newest displaceable job of any name, or is refused.
//
// Why waiting, not asking, earns a place: a node's first request cannot
// be told from a guess, and any bounded memory of passwords (queued or
// only remembered) whose freed room goes to whoever asks first is refilled
// by a guesser at once, as asking costs nothing, and a request can leave
// as soon as it is sent. Waiting costs a guesser what it costs the node's
// agent: a request in progress for MaxWait. So the line holds only
// requests whose callers wait, and only waiting out MaxWait earns a place
// that nothing can take away. It is counted from the request's arrival,
// so that a node whose request reached the Verifier late (a TLS handshake
// during a herd) still pins its password before its agent gives up: a
// guesser that dates its request earlier must have kept its connection
// open as long.
//
// # The bound
//
// Assume that the node's agent retries the same password and waits for
// each answer at least MaxWait from its request's arrival (k3s agents: a
// 10 s client timeout from the dial, against a default MaxWait of 9.5 s
// from the accept), that the queue as a whole has room when its
// first request comes (Config.MaxQueue), and that its job does not reach
// its work timeout while queued. Then, whatever other requests for its
// name come, fresh or repeated passwords, steady or timed before its
// retries, and whether their callers wait or leave at once:
//
//  1. its password is queued, never to be displaced, by the end of its
//     agent's first request that is not answered within MaxWait (that
//     request's caller pins it);
//  2. from the agent's next request on, it is ordinary and asked again,
//     so the only jobs of its name that can run before it are those
//     queued or waiting in the name's line when its first request came:
//     at most PerName, plus those queued over the cap (each pinned by a
//     caller that waited a whole MaxWait), plus one per other request then
//     in progress for the name;
//  3. it is therefore computed within that many of its name's turns
//     after the agent's second request: at that request when the name is
//     served that often within MaxWait, otherwise at a later one, each of
//     the name's turns computing one of the jobs ahead of it.
//
// A guesser keeping c requests in progress for a name at once puts at
// most c jobs in its line, and pins at most c per MaxWait over the cap;
// jobs older than the work timeout have ended. The guesser's pinned
// suspects still run only with spare capacity. Jobs pinned over their
// names' caps do not count against Config.MaxQueue, so that guessers who
// wait cannot make the scheduler refuse other names' work; what bounds
// them is the guessers' waiting, each costing a request in progress.
//
// # Holding or sending away
//
// A caller is held until its result comes, or sent away at once, told to
// come back later with an estimate of when its result will be ready; the
// choice is made once, when it comes, with the whole queue in view. It is
// held when its expected wait is within Config.MaxWait, counted from its
// arrival (WithArrival). Sending a caller away at once costs it a retry
// delay (k3s agents: 5-10 s); holding it and sending it away later costs it
// that delay and the time it was held, the most expensive mistake, so a
// held caller is sent away early only when its result cannot come in time
// even at the best. Before any computation has been measured every
// estimate is a guess: a caller that comes then is held and decided on at
// the first measurement (a few milliseconds into a herd).
//
// While callers wait, their jobs go first, in the order the callers came.
// When no waiting caller's job is queued, a free slot takes the job whose
// caller is expected back soonest: ReturnAfter after it was sent away (k3s
// agents come back 5-10 s later), or when it was told to come back, for
// callers that honour it (HonourAfter). So at every moment some waiting
// caller's job is running, and a caller that comes back finds its result
// ready or next in line.
//
// # Estimates
//
// The expected wait of a job is the work ahead of it (128·r·N·p bytes per
// job) spread over the slots, plus its own batch (Lanes jobs like it when
// others are queued), at the CPU time a computation takes per byte (each
// job of a batch counting as the batch's CPU time over its work; the
// median of the last 64: the best case, which contention does not
// inflate), stretched by two measurements of what the throughput the
// scheduler actually reaches makes of the best case:
//
//   - a margin: for the last callers held on a promise of at least
//     MaxWait/4, the wait they got over the wait promised, the 90th
//     percentile of the last 64 (1.1 until 8 are known), between 1 and 4.
//     TLS handshakes, the store, GC and other processes all show in it,
//     but only once such callers are answered, seconds after a herd's
//     decisions were made;
//   - the slowdown of the last 32 completions made with every slot busy:
//     their throughput against that of their CPU time, known within a few
//     dozen computations. It is counted (up to 4) for as long again as it
//     has lasted since every slot became busy, and the margin after that.
//     A herd's arrivals (goroutines, TLS handshakes) can make scrypt three
//     times slower for its first second; counted over the whole wait, that
//     would send away a herd that fits, and a caller sent away comes back
//     5-10 s later. Counted for as long as it has lasted, it adds about a
//     second; a slowdown that has lasted seconds (another process taking a
//     CPU) counts for seconds more.
//
// A caller held is sent away early only when even the least CPU time per
// byte of the last 64 computations cannot bring its result in time.
//
// golang.org/x/sync/singleflight and x/sync/semaphore each do part of
// this, but a caller here must see its job's place in the queue the moment
// it joins, leave while the work goes on, and be served by name rather
// than by arrival, and a slot must take several jobs at once: one map, one
// queue and the slots under one lock give all four.
package sched
