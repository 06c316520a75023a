package verify

import (
	"reflect"
	"sync/atomic"
)

// Stats are a Verifier's counts since New, and gauges (names without
// _total), named and described by their tags (prom).
type Stats struct {
	ScryptRuns          uint64 `stat:"scrypt_runs_total" help:"Scrypt computations started (verifications and enrollments)."`
	CacheHits           uint64 `stat:"cache_hits_total" help:"Requests answered from the verified-tuple cache."`
	Shared              uint64 `stat:"shared_total" help:"Requests that joined an identical computation already in flight."`
	Shed                uint64 `stat:"shed_total" help:"Requests answered as overloaded, with a time to retry after."`
	ShedAfterWait       uint64 `stat:"shed_after_wait_total" help:"Requests held on an estimate within the longest wait, then answered as overloaded all the same."`
	Mismatches          uint64 `stat:"mismatches_total" help:"Requests whose password did not match the stored hash."`
	KnownMatchRejects   uint64 `stat:"known_match_rejects_total" help:"Mismatches answered without scrypt because another password is the verified one for the node (also in cache hits and mismatches)."`
	Enrollments         uint64 `stat:"enrollments_total" help:"Nodes whose hash was created on their first join."`
	StoreErrors         uint64 `stat:"store_errors_total" help:"Failed Store calls, other than not-found and already-exists."`
	Panics              uint64 `stat:"panics_total" help:"Panics recovered in the store or the hasher."`
	FailOpenEnrollments uint64 `stat:"fail_open_enrollments_total" help:"New nodes let in although their hash could not be stored (verify.Options.FailOpen)."`
	FailOpenFailures    uint64 `stat:"fail_open_failures_total" help:"Nodes let in by FailOpen whose hash was never stored or lost to another."`
	FailOpenPending     uint64 `stat:"fail_open_pending" help:"Enrollments let in by FailOpen whose Create is being retried now."`
	DigestHits          uint64 `stat:"digest_hits_total" help:"Requests answered as a match by a remembered digest, without scrypt."`
	DigestWrites        uint64 `stat:"digest_writes_total" help:"Remembered digests recorded with the store."`
	DigestWriteFailures uint64 `stat:"digest_write_failures_total" help:"Remembered digests that could not be recorded (store error, full queue, shutdown); each costs a later request one scrypt."`
	InFlight            uint64 `stat:"scrypt_inflight" help:"Scrypt computations running now."`
	Queued              uint64 `stat:"scrypt_queued" help:"Computations waiting for a scrypt slot now."`
}

// Stats returns the Verifier's counters.
func (v *Verifier) Stats() Stats {
	var s Stats
	from, to := reflect.ValueOf(v.stats).Elem(), reflect.ValueOf(&s).Elem()
	for i := range to.NumField() {
		to.Field(i).SetUint(atomic.LoadUint64(from.Field(i).Addr().Interface().(*uint64)))
	}
	running, queued := v.sched.Load()
	s.FailOpenPending = uint64(v.pendingCount.Load())
	s.InFlight, s.Queued = uint64(running), uint64(queued)
	return s
}
