// Package sched decides when a Verifier's scrypt computations run, and
// runs them. This doc is the one statement of the policy; package verify
// links here.
//
// # Terms
//
//	job          one computation, shared by every request with its Key
//	caller       a goroutine in Wait for a job
//	name         the unit of fairness: a node's name (Request.Name)
//	class        what a job computes with: scrypt's N, r and p
//	slot         one of Config.Slots goroutines that compute, one batch at a time
//	batch        the jobs a slot takes at once: up to Config.Lanes of one class
//	place        one of a name's Config.PerName shares of the queue
//	line         a name's jobs waiting for a place, oldest first
//	asked again  a job whose password the name's last 8 asks held twice or more
//	busy         a name with a job queued, pending or running
//	doubted      Request.Doubted: the name is failing, or the password is not the one remembered
//	suspect      a job first asked while doubted or busy, and not asked again
//	ordinary     a job that is not a suspect
//	wanted       a name with a caller waiting for one of its ordinary jobs
//	due          when a job's caller is expected: its creation, or a shed caller's return
//	earned       a job some caller waited out MaxWait for: never displaced, queued past its places
//	displaceable a queued suspect not earned, whose callers came and all left
//
// # Locking
//
// A [Scheduler] keeps everything under one mutex, Scheduler.mu. A method
// whose name ends in Locked expects the caller to hold it. No method
// holds it while calling out of the package.
//
// # A job's life
//
//	            Join ─┬─▶ queued ──(a slot frees, its turn)──▶ running ──Finish──▶ done
//	                  ├─▶ pending ──Submit──▶ queued          running ──Hold──▶ finishing ──Finish──▶ done
//	                  └─▶ parked ──(a place, or earned)──▶ queued (pending if Later)
//	pending, parked, queued ──(work timeout, Close, displaced, last caller gone)──▶ done
//
// A queued job holds no goroutine; a running batch has its slot's, a
// pending job one of its own. A job's context ends at its work timeout or
// Close, and so does the job unless it is running or finishing.
//
// # Order
//
//  1. Names are served in turn (round robin), not jobs in arrival order.
//  2. Wanted names go first, in the order their callers came to wait.
//  3. Then the names whose first job nobody waits for, soonest due first.
//  4. Then suspects, oldest first.
//  5. Within a name, jobs asked again go first, then ordinary jobs, then
//     suspects; within each, the first to arrive. Asking more than twice
//     counts for nothing: asking costs a guesser nothing.
//
// A batch takes the job whose turn it is, then the jobs after it in turn
// while they share its class, up to Lanes. It stops at another class, so
// it never delays a job ranked ahead of one it takes. It stops at a
// second job of one name: the first may verify the name and answer the
// others without scrypt. It stops before its work passes
// Config.MaxBatchWork. Results are published before the slot takes the
// next batch. A free slot waits for a full batch only while a burst is
// under way, and 10 ms at most (fillWait has the rule).
//
// # Admission
//
//  1. A queued or pending job holds one of its name's places. A new job
//     for a name with none left displaces the name's newest displaceable
//     job. With none, it is parked in its line while a caller waits for
//     it, and ends when its last caller leaves.
//  2. A place that frees goes to the line, oldest first, and so does the
//     place of a displaceable job, displaced for it.
//  3. A parked job a caller waits out is earned, and queued at once, past
//     its name's places.
//  4. Config.MaxQueue bounds the jobs queued within their places, pending
//     and parked: earned jobs past their places do not count. A new job
//     past it displaces the newest displaceable job of any name, or is
//     refused.
//  5. Nothing else ends a queued job before it runs.
//
// Waiting, not asking, earns a place: a node's first request cannot be
// told from a guess, while waiting costs a guesser what it costs the
// node's agent, a request in progress for MaxWait. MaxWait counts from
// the request's arrival (its connection's accept).
//
// # The bound
//
// Assume that the node's agent asks again with the same password, that
// each request waits MaxWait from its arrival (k3s agents time out 10 s
// after the dial, against 9.5 s from the accept), that the queue has room
// at its first request, and that its job does not reach its work
// timeout. Then, whatever other requests for its name come:
//
//  1. Its job is earned by the end of its first request not answered
//     within MaxWait.
//  2. From its next request on, it is asked again. Only its name's jobs
//     queued or in line when its first request came run before it: at
//     most PerName, those earned past the places, and one per other
//     request then in progress for the name.
//  3. So it runs within that many of its name's turns after its second
//     request.
//
// A guesser with g requests in progress for a name puts at most g jobs in
// its line, and earns at most g per MaxWait. Earned suspects still run
// only when nothing else is queued.
//
// # Holding or shedding
//
// A caller is held when its expected wait fits in what is left of
// MaxWait from its arrival; otherwise it is shed at once, told to come
// back MaxWait/2 before its job's expected completion. The choice is made
// once, when it comes, or as the estimates warm. A held caller is shed
// early only when even the fastest recent CPU time per byte cannot bring
// its result in time. Suspects' and parked jobs' callers are never shed
// early. A shed caller is due back Config.ReturnAfter later (k3s agents:
// 5-10 s), or, with Config.HonourAfter, when told.
//
// # Estimates
//
//	eta(j)      = (R + t · A(j)) / S + t · W(j) · n(j)
//	expected(j) = eta(j) × margin, or × slowdown while one lasts
//
// S is Config.Slots, and R the running batches' time left. A(j) is the
// work served before j, in the order above, in bytes. W(j) is j's work,
// 128·r·N·p bytes. n(j) is the jobs its batch is expected to hold: those
// queued, up to Lanes. t is the median CPU time per byte of the last 64
// computations, each job of a batch counting as the batch's CPU time over
// its work. eta(j) is a held caller's promise.
//
// The margin is the 90th percentile of the wait each held caller got over
// its promise, over the last 64 promises of at least MaxWait/4: 1.1 until
// 8 are known, and within 1 to 4. The slowdown compares the throughput of
// the last 32 batches to end with every slot busy with their CPU time, up
// to 4. It counts for as long again as it has lasted: a herd's arrivals
// slow scrypt for its first second only.
//
// A batch teaches the estimator unless it is one of the first Slots
// batches of its kind (its class and how many jobs it computed): those
// pay for their buffers' first use and for the scrypt package timing its
// kernels. The estimates are warm once 4 computations are measured.
//
// # Cost
//
// The queue keeps its orders and sums in treaps (tree.go): every
// operation costs O(log n), whatever the backlog. A queued job costs at
// most 4 KiB of heap, its name's share included.
package sched
