// Package sched decides when a Verifier's scrypt computations run, and
// runs them. This doc is the one explanation of the policy; the verify
// package's docs link here.
//
// A [Scheduler] owns the key → job map, the fair queue, the slots and the
// helpers the policy reads (the ask log, the estimator), all under one
// mutex, Scheduler.mu. Fields after mu are guarded by it; a method whose
// name ends in Locked expects the caller to hold it. No method holds it
// while calling out of the package.
//
// # Terms
//
//	job          one computation, shared by every request with its Key
//	class        what a job computes with: scrypt's N, r and p
//	slot         one of Config.Slots computations at once; it runs a batch
//	batch        the jobs a slot takes at once: up to Config.Lanes of one class
//	place        a name's share of the queue: Config.PerName jobs queued or pending
//	line         a name's jobs waiting for a place, oldest first (parked)
//	pending      holds a place; its runner reads the store before it queues
//	doubted      the caller says so: the name is failing, or the password
//	             does not give the digest remembered for it
//	suspect      a first ask that was doubted, or whose name was busy
//	             (had a job queued or running); it runs only when nothing
//	             else is queued
//	ordinary     not a suspect
//	asked again  asked for a second time, now or after its job ended (the
//	             ask log keeps each name's last 8 passwords as keys)
//	waited out   a caller waited MaxWait from its arrival for the job
//	pinned       waited out: never displaced, queued over its name's places
//	displaced    a queued suspect whose callers all left without pinning
//	             it, ended so that a job in the line takes its place
//	wanted       a name with a caller waiting for one of its ordinary jobs
//	held         a caller kept waiting for its result
//	sent away    a caller told to come back (an Overload with After)
//	due          when a job's caller is expected: its creation, or when a
//	             caller sent away should come back
//
// # A job's life
//
//	            Join ─┬─▶ queued ──(a slot frees, its turn)──▶ running ──Finish──▶ done
//	                  ├─▶ pending ──Submit──▶ queued          running ──Hold──▶ finishing ──Finish──▶ done
//	                  └─▶ parked ──(a place, or pinned)──▶ queued (pending if Later)
//	pending, parked, queued ──(work timeout, Close, displaced, last caller gone)──▶ done
//
// A queued job holds no goroutine. Running batches (Config.Run, on the
// slot's goroutine) and pending jobs (Config.Prepare) have one. A job's
// context ends at its work timeout or at Close; that ends it unless it
// is running or finishing.
//
// # Order
//
//  1. Names are served in turn (round robin), not jobs in arrival order.
//  2. Wanted names go first, in the order their callers came to wait.
//  3. Then names whose first job nobody waits for, soonest due first.
//  4. Then suspects, oldest first.
//  5. Within a name: asked again, then ordinary, then suspects; within
//     each, the first to arrive. Asking more than twice counts for
//     nothing: asking costs a guesser nothing.
//
// A batch takes the job in turn and the jobs after it in turn while they
// share its class, up to Lanes. It stops at another class (it never
// delays a job ranked ahead of one it takes), at a second job of one name
// (the first may verify the name, answering the others without scrypt),
// and at Config.MaxBatchWork. Results are published before the slot takes
// the next batch.
//
// # Admission
//
//  1. A name has Config.PerName places. A job for a name with none left
//     parks in its line, holding no place, while a caller waits for it; it
//     ends when its last caller leaves.
//  2. A place that frees goes to the line, oldest first; so does the place
//     of a displaced suspect.
//  3. A caller that waits out MaxWait pins its job; a pinned parked job is
//     queued at once, over its name's places.
//  4. Config.MaxQueue bounds jobs queued within their places, pending and
//     parked; pinned jobs past their places do not count. A new job past
//     it displaces the newest displaceable job of any name, or is refused.
//  5. Nothing else ends a queued job before it runs.
//
// Waiting, not asking, earns a place. A node's first request cannot be
// told from a guess, and room freed for whoever asks first is taken by a
// guesser at once: asking costs nothing. Waiting costs a guesser what it
// costs the node's agent, a request in progress for MaxWait. It is counted
// from the request's arrival (WithArrival: the connection's accept), so a
// request that arrives late still waits out MaxWait before its agent's
// client gives up.
//
// # The bound
//
// Assume the node's agent retries the same password, each request waits
// MaxWait from its arrival (k3s: a 10 s client timeout from the dial,
// against 9.5 s from the accept), the queue has room at its first
// request, and its job does not reach its work timeout. Then, whatever
// other requests for its name come:
//
//  1. Its password is pinned by the end of its first request not answered
//     within MaxWait.
//  2. From its next request on, it is asked again. Only jobs of its name
//     queued or in line when its first request came run before it: at
//     most PerName, those pinned past the places, and one per other
//     request then in progress for the name.
//  3. So it runs within that many of its name's turns after its second
//     request.
//
// A guesser with c requests in progress for a name puts at most c jobs in
// its line and pins at most c per MaxWait. Pinned suspects still run only
// with spare capacity.
//
// # Holding or sending away
//
// A caller is held when its expected wait fits in what is left of
// MaxWait from its arrival, and sent away at once otherwise, told to come
// back MaxWait/2 before its estimated completion. The choice is made once,
// when it comes. A held caller is sent away early only when even the
// fastest recent CPU time per byte cannot bring its result in time.
// Until the estimates are warm (see Warm-up), callers are held, and
// decided on as they warm. Suspects and parked jobs are never
// sent away early: they wait out MaxWait. A caller sent away is due back
// Config.ReturnAfter later (k3s agents: 5-10 s), or when told with
// Config.HonourAfter.
//
// # Estimates
//
//	wait(j)  = (remaining(running) + ahead(j)) / Slots + c · work(j) · n(j)
//	expected = wait(j) × margin, or × slowdown for as long as it has lasted
//
// where ahead(j) is the work served before j in the order above,
// remaining the running batches' estimated work left, work(j) is
// 128·r·N·p, n(j) the jobs of its batch (Lanes when others are queued),
// and c the median CPU time per byte of the last 64 computations (each
// job of a batch counting the batch's CPU time over its work). In a herd
// most of those are full batches, whose kernels are the widest and
// cheapest per byte: a job that runs alone (a class of its own, a hash
// planted with odd parameters) costs up to Lanes times more per byte
// (one lane against eight: about 4 times on AVX-512) than it is
// estimated, which the margin and the slowdown, learnt from the herd,
// do not correct. The margin
// is the 90th percentile, over the last 64 callers held on a promise of
// at least MaxWait/4, of their actual wait over the promised one (1.1
// until 8 are known; 1 to 4). The slowdown is the last 32 completions'
// throughput, every slot busy, against their CPU time (up to 4), counted
// for as long again as it has lasted: a herd's arrivals slow scrypt for
// its first second, which must not send a herd that fits away.
//
// # Warm-up
//
// A batch teaches the estimates unless it is one of the first Slots
// batches of its kind, its class and how many jobs it computed: those pay
// for their buffers' first use and for the scrypt package timing its
// kernels. The estimates are warm once 4 computations are measured.
//
// # Cost
//
// The queue keeps its orders and sums in treaps (tree.go): joining,
// asking again, waiting, estimating and taking the next job cost
// O(log n), whatever the backlog. A queued job costs at most 4 KiB of
// heap, its name's share included.
package sched
