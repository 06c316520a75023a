package prom

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodepass/nodepass/verify"
)

var testParams = verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}

type fixedStats verify.Stats

func (f fixedStats) Stats() verify.Stats { return verify.Stats(f) }

// counterNames are the metrics read from Stats.
var counterNames = []string{
	"nodepass_scrypt_runs_total", "nodepass_cache_hits_total", "nodepass_shared_total",
	"nodepass_shed_total", "nodepass_shed_after_wait_total", "nodepass_mismatches_total", "nodepass_known_match_rejects_total", "nodepass_enrollments_total",
	"nodepass_store_errors_total", "nodepass_panics_total",
	"nodepass_scrypt_inflight", "nodepass_scrypt_queued",
	"nodepass_fail_open_enrollments_total", "nodepass_fail_open_failures_total", "nodepass_fail_open_pending",
	"nodepass_digest_hits_total", "nodepass_digest_writes_total", "nodepass_digest_write_failures_total",
}

func TestCollectStats(t *testing.T) {
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(fixedStats{ScryptRuns: 1, CacheHits: 2, Shared: 3, Shed: 4, ShedAfterWait: 18, Mismatches: 5,
		KnownMatchRejects: 11, Enrollments: 6, StoreErrors: 7, Panics: 8, InFlight: 9, Queued: 10,
		FailOpenEnrollments: 12, FailOpenFailures: 13, FailOpenPending: 14,
		DigestHits: 15, DigestWrites: 16, DigestWriteFailures: 17}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP nodepass_cache_hits_total Requests answered from the verified-tuple cache.
# TYPE nodepass_cache_hits_total counter
nodepass_cache_hits_total 2
# HELP nodepass_digest_hits_total Requests answered as a match by a remembered digest, without scrypt.
# TYPE nodepass_digest_hits_total counter
nodepass_digest_hits_total 15
# HELP nodepass_digest_write_failures_total Remembered digests that could not be recorded (store error, full queue, shutdown); each costs a later request one scrypt.
# TYPE nodepass_digest_write_failures_total counter
nodepass_digest_write_failures_total 17
# HELP nodepass_digest_writes_total Remembered digests recorded with the store.
# TYPE nodepass_digest_writes_total counter
nodepass_digest_writes_total 16
# HELP nodepass_enrollments_total Nodes whose hash was created on their first join.
# TYPE nodepass_enrollments_total counter
nodepass_enrollments_total 6
# HELP nodepass_fail_open_enrollments_total New nodes let in although their hash could not be stored (verify.Options.FailOpen).
# TYPE nodepass_fail_open_enrollments_total counter
nodepass_fail_open_enrollments_total 12
# HELP nodepass_fail_open_failures_total Nodes let in by FailOpen whose hash was never stored or lost to another.
# TYPE nodepass_fail_open_failures_total counter
nodepass_fail_open_failures_total 13
# HELP nodepass_fail_open_pending Enrollments let in by FailOpen whose Create is being retried now.
# TYPE nodepass_fail_open_pending gauge
nodepass_fail_open_pending 14
# HELP nodepass_known_match_rejects_total Mismatches answered without scrypt because another password is the verified one for the node (also in cache hits and mismatches).
# TYPE nodepass_known_match_rejects_total counter
nodepass_known_match_rejects_total 11
# HELP nodepass_mismatches_total Requests whose password did not match the stored hash.
# TYPE nodepass_mismatches_total counter
nodepass_mismatches_total 5
# HELP nodepass_panics_total Panics recovered in the store or the hasher.
# TYPE nodepass_panics_total counter
nodepass_panics_total 8
# HELP nodepass_scrypt_inflight Scrypt computations running now.
# TYPE nodepass_scrypt_inflight gauge
nodepass_scrypt_inflight 9
# HELP nodepass_scrypt_queued Computations waiting for a scrypt slot now.
# TYPE nodepass_scrypt_queued gauge
nodepass_scrypt_queued 10
# HELP nodepass_scrypt_runs_total Scrypt computations started (verifications and enrollments).
# TYPE nodepass_scrypt_runs_total counter
nodepass_scrypt_runs_total 1
# HELP nodepass_shared_total Requests that joined an identical computation already in flight.
# TYPE nodepass_shared_total counter
nodepass_shared_total 3
# HELP nodepass_shed_total Requests answered as overloaded, with a time to retry after.
# TYPE nodepass_shed_total counter
nodepass_shed_total 4
# HELP nodepass_shed_after_wait_total Requests held on an estimate within the longest wait, then answered as overloaded all the same.
# TYPE nodepass_shed_after_wait_total counter
nodepass_shed_after_wait_total 18
# HELP nodepass_store_errors_total Failed Store calls, other than not-found and already-exists.
# TYPE nodepass_store_errors_total counter
nodepass_store_errors_total 7
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), counterNames...); err != nil {
		t.Error(err)
	}
}

func TestHistograms(t *testing.T) {
	c, err := New(&Options{ScryptBuckets: []float64{0.1, 1}, QueueWaitBuckets: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	c.ObserveScrypt(context.Background(), 50*time.Millisecond)
	c.ObserveScrypt(context.Background(), 2*time.Second)
	c.ObserveQueueWait(context.Background(), 0)
	want := `
# HELP nodepass_queue_wait_seconds Time a scrypt computation waited for a slot.
# TYPE nodepass_queue_wait_seconds histogram
nodepass_queue_wait_seconds_bucket{le="1"} 1
nodepass_queue_wait_seconds_bucket{le="+Inf"} 1
nodepass_queue_wait_seconds_sum 0
nodepass_queue_wait_seconds_count 1
# HELP nodepass_scrypt_seconds Duration of one scrypt computation (a verification or an enrollment).
# TYPE nodepass_scrypt_seconds histogram
nodepass_scrypt_seconds_bucket{le="0.1"} 1
nodepass_scrypt_seconds_bucket{le="1"} 1
nodepass_scrypt_seconds_bucket{le="+Inf"} 2
nodepass_scrypt_seconds_sum 2.05
nodepass_scrypt_seconds_count 2
`
	// Before Attach a scrape has only the histograms.
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestLint(t *testing.T) {
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(fixedStats{}); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	if n := testutil.CollectAndCount(c); n != len(counterNames)+2 {
		t.Errorf("%d metrics, want %d", n, len(counterNames)+2)
	}
	// Registers cleanly: Describe matches Collect.
	if err := prometheus.NewPedanticRegistry().Register(c); err != nil {
		t.Error(err)
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []*Options{
		{ScryptBuckets: []float64{}},
		{ScryptBuckets: []float64{1, 1}},
		{QueueWaitBuckets: []float64{2, 1}},
	} {
		if _, err := New(o); err == nil || !strings.HasPrefix(err.Error(), "prom: ") {
			t.Errorf("New(%+v) = %v, want a prom: error", o, err)
		}
	}
	c, err := New(&Options{Namespace: "k3s_supervisor", ConstLabels: prometheus.Labels{"server": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(fixedStats{Enrollments: 3}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP k3s_supervisor_enrollments_total Nodes whose hash was created on their first join.
# TYPE k3s_supervisor_enrollments_total counter
k3s_supervisor_enrollments_total{server="a"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "k3s_supervisor_enrollments_total"); err != nil {
		t.Error(err)
	}
}

func TestAttachOnce(t *testing.T) {
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(nil); err == nil {
		t.Error("Attach(nil) succeeded")
	}
	if err := c.Attach(fixedStats{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(fixedStats{}); err == nil {
		t.Error("second Attach succeeded")
	}
}

// TestVerifier wires the Collector into a real Verifier and checks that the
// metrics follow what the requests did, and that the histogram of scrypt
// durations counts exactly the scrypt runs.
func TestVerifier(t *testing.T) {
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.NewMemoryStore(), &verify.Options{Params: testParams, Observer: c})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := c.Attach(v); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, node := range []string{"a", "b", "c"} {
		if err := v.Ensure(ctx, node, "pw-"+node); err != nil { // enrollment
			t.Fatal(err)
		}
		if err := v.Ensure(ctx, node, "pw-"+node); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Verify(ctx, "a", "wrong"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	if err := v.Verify(ctx, "a", "wrong"); !errors.Is(err, verify.ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	// The metrics are the Verifier's Stats, whatever the Verifier counted.
	st := v.Stats()
	if st.Enrollments != 3 || st.ScryptRuns < 3 || st.Mismatches != 2 {
		t.Fatalf("Stats = %+v, want 3 enrollments, 2 mismatches and at least 3 scrypt runs", st)
	}
	for name, want := range map[string]uint64{
		"nodepass_scrypt_runs_total":         st.ScryptRuns,
		"nodepass_enrollments_total":         st.Enrollments,
		"nodepass_cache_hits_total":          st.CacheHits,
		"nodepass_mismatches_total":          st.Mismatches,
		"nodepass_known_match_rejects_total": st.KnownMatchRejects,
		"nodepass_shed_total":                st.Shed,
		"nodepass_shed_after_wait_total":     st.ShedAfterWait,
		"nodepass_store_errors_total":        st.StoreErrors,
		"nodepass_scrypt_inflight":           st.InFlight,
		"nodepass_scrypt_queued":             st.Queued,
	} {
		m := gathered(t, c, name)
		if got := m.GetCounter().GetValue() + m.GetGauge().GetValue(); got != float64(want) {
			t.Errorf("%s = %g, want %d", name, got, want)
		}
	}
	for _, name := range []string{"nodepass_scrypt_seconds", "nodepass_queue_wait_seconds"} {
		if n := gathered(t, c, name).GetHistogram().GetSampleCount(); n != st.ScryptRuns {
			t.Errorf("%s has %d observations, want %d (one per scrypt run)", name, n, st.ScryptRuns)
		}
	}
}
