package bench

import (
	"slices"
	"sync"
	"time"
)

// LateShed is how long a request must have been held before a 429 or 503
// for Result.ShedLate to count it: longer than any answer given at once
// takes, even on a loaded machine.
const LateShed = time.Second

// ReturnBuckets are the upper edges of the buckets ReturnHistogram counts
// Result.Returns in; the last bucket has no upper edge.
var ReturnBuckets = []time.Duration{-5 * time.Second, -time.Second, 0, time.Second, 2 * time.Second, 5 * time.Second}

// ReturnHistogram counts returns by ReturnBuckets: counts[i] holds the
// returns below ReturnBuckets[i] and at or above the edge before it; the
// last count holds those at or above the last edge.
func ReturnHistogram(returns []time.Duration) []int {
	counts := make([]int, len(ReturnBuckets)+1)
	for _, d := range returns {
		i, _ := slices.BinarySearch(ReturnBuckets, d)
		if i < len(ReturnBuckets) && ReturnBuckets[i] == d {
			i++ // an edge belongs to the bucket above it
		}
		counts[i]++
	}
	return counts
}

// cpuTrace records the process's CPU time as the run goes, to read it at
// a moment found only afterwards. It is safe for concurrent use.
type cpuTrace struct {
	mu      sync.Mutex
	samples []cpuSample
}

type cpuSample struct{ at, cpu time.Duration }

// add records that the process had used cpu by at (since the run began).
func (c *cpuTrace) add(at, cpu time.Duration) {
	c.mu.Lock()
	c.samples = append(c.samples, cpuSample{at, cpu})
	c.mu.Unlock()
}

// at returns the CPU time used by t, interpolated between the samples
// around it, relative to the first sample; ok is false without samples on
// both sides of t.
func (c *cpuTrace) at(t time.Duration) (cpu time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, _ := slices.BinarySearchFunc(c.samples, t, func(s cpuSample, t time.Duration) int {
		return int(min(max(s.at-t, -1), 1))
	})
	if len(c.samples) == 0 || i == len(c.samples) || i == 0 && c.samples[0].at != t {
		return 0, false
	}
	first, hi := c.samples[0], c.samples[i]
	if hi.at == t || i == 0 {
		return hi.cpu - first.cpu, true
	}
	lo := c.samples[i-1]
	f := float64(t-lo.at) / float64(hi.at-lo.at)
	return lo.cpu + time.Duration(f*float64(hi.cpu-lo.cpu)) - first.cpu, true
}

// readiness fills res's Returns, LastReady and IdlePending: when each
// node that came back did so relative to its result being ready (asks:
// how each agent's asking ended), and the CPU left idle while results
// were pending.
func (s *serverSide) readiness(res *Result, asks []asked) {
	t := s.tracker
	res.LastReady = res.Completion
	if s.raw[0].keepsState() && res.Stopped == "" {
		var last time.Duration
		for i, a := range asks {
			ready := time.Duration(t.verifiedAt[a.server][i].Load())
			if ready <= 1 { // known before the run (1) or never
				for s := range t.verifiedAt {
					ready = max(ready, time.Duration(t.verifiedAt[s][i].Load()))
				}
			}
			last = max(last, ready)
			if a.attempts > 1 && ready > 1 {
				res.Returns = append(res.Returns, a.last-ready)
			}
		}
		if last > 1 {
			res.LastReady = last
		}
	}
	if cpu, ok := s.smp.cpu.at(res.LastReady); ok {
		res.IdlePending = max(time.Duration(res.Procs)*res.LastReady-cpu, 0)
	}
}

// reached fills res's ReachedFirst, ReachedMedian and ReachedLast from
// when each honest node's first request reached a server.
func (s *serverSide) reached(res *Result) {
	var at []time.Duration
	for i := range s.tracker.reachedAt {
		if d := time.Duration(s.tracker.reachedAt[i].Load()); d > 0 {
			at = append(at, d)
		}
	}
	if len(at) == 0 {
		return
	}
	slices.Sort(at)
	res.ReachedFirst, res.ReachedMedian, res.ReachedLast = at[0], at[rank(len(at), 0.50)], at[len(at)-1]
}
