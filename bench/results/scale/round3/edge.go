//go:build ignore

// Edge models, from the results of real runs, what deciding at arrival
// can reach at the edge: a herd of k3s agents whose work is about as long
// as MaxWait (320 nodes at logN 15 here). Run it from this directory:
//
//	go run edge.go '../round2/*k3s-320-15-*.json' '../*k3s-320-15-*.json' 'k3s-320-15-*.json'
//
// For each run it takes the nodepass result's fast bound (completion over
// ratio_fast: the herd's scrypt on 2 workers with nothing else running)
// and its last result ready (last_ready_s: when the herd's whole work was
// done, CPU shared with the agents and their TLS included). Then, for
// margins m, it replays one decision the way the Scheduler makes it:
//
//   - the herd reaches the kernel at arrival and is decided at decide
//     (0.45 s into the herd: when every run above sent its requests away);
//     each request must be answered by arrival + MaxWait;
//   - the i-th of N requests is held when decide + (i/N)·bound·m is within
//     that, and sent away otherwise (n of them): the estimate is the best
//     case (the bound) times the margin;
//   - the held work ends at (N−n)/N of the run's last result ready; if
//     that is later than the answer is due, the last held requests are
//     sent away then (held, then sent away) and the herd ends about a
//     MaxWait and a retry (10 s) after that;
//   - otherwise the herd ends at the later of its last result ready and
//     the expected return of the last of the n agents sent away at decide:
//     decide + 5 + 5·n/(n+1) s (the largest of n delays uniform in 5-10 s).
//
// It prints each run (ready over bound, the ratio the run measured, the
// oracle: the best any margin reaches on that run, knowing its
// throughput) and, per margin, the
// median and mean of the modelled ratios and how many runs end in a
// request held and then sent away. A model, not a measurement: it ignores
// the slowdown term, the requests' spread of arrivals and the agents'
// actual draws.
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
)

const (
	maxWait = 9.5  // s, verify.DefaultMaxWait
	arrival = 0.2  // s, when the herd's connections reach the kernel
	decide  = 0.45 // s, when the requests sent away were answered
)

type run struct {
	name                   string
	nodes                  int
	bound, ready, measured float64 // measured: completion over bound
}

func main() {
	var runs []run
	for _, pattern := range os.Args[1:] {
		files, err := filepath.Glob(pattern)
		if err != nil {
			fail(err)
		}
		for _, f := range files {
			r, ok, err := load(f)
			if err != nil {
				fail(err)
			}
			if ok {
				runs = append(runs, r)
			}
		}
	}
	if len(runs) == 0 {
		fail(fmt.Errorf("no nodepass result with last_ready_s in %q", os.Args[1:]))
	}
	margins := []float64{1.00, 1.03, 1.05, 1.07, 1.10, 1.13, 1.15, 1.20}
	fmt.Printf("%-40s %7s %7s %12s %9s %7s\n", "run", "bound", "ready", "ready/bound", "measured", "oracle")
	var oracles, measured []float64
	for _, r := range runs {
		best := math.Inf(1)
		for m := 0.90; m <= 1.50; m += 0.005 {
			ratio, _, _ := r.outcome(m)
			best = min(best, ratio)
		}
		oracles = append(oracles, best)
		measured = append(measured, r.measured)
		fmt.Printf("%-40s %6.2fs %6.2fs %12.2f %9.2f %7.2f\n", r.name, r.bound, r.ready, r.ready/r.bound, r.measured, best)
	}
	fmt.Printf("\n%d runs; measured median %.3f, mean %.3f; oracle median %.3f\n\n",
		len(runs), median(measured), mean(measured), median(oracles))
	fmt.Printf("%6s %8s %8s %12s %13s\n", "margin", "median", "mean", "sent away", "held, then")
	for _, m := range margins {
		var ratios, sent []float64
		late := 0
		for _, r := range runs {
			ratio, n, held := r.outcome(m)
			ratios = append(ratios, ratio)
			sent = append(sent, float64(n))
			if held {
				late++
			}
		}
		fmt.Printf("%6.2f %8.3f %8.3f %12.0f %13d\n", m, median(ratios), mean(ratios), median(sent), late)
	}
}

// outcome models r's herd decided with margin m: its completion over the
// bound, how many requests were sent away at once, and whether held ones
// were sent away later.
func (r run) outcome(m float64) (ratio float64, n int, heldThenSent bool) {
	due := arrival + maxWait
	held := int(math.Floor(float64(r.nodes) * (due - decide) / (r.bound * m)))
	held = min(max(held, 0), r.nodes)
	n = r.nodes - held
	if r.ready*float64(held)/float64(r.nodes) > due {
		return (due + 10) / r.bound, n, true
	}
	end := r.ready
	if n > 0 {
		end = max(end, decide+5+5*float64(n)/float64(n+1))
	}
	return end / r.bound, n, false
}

func load(path string) (run, bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return run{}, false, err
	}
	var results []struct {
		Model       string  `json:"model"`
		Nodes       int     `json:"nodes"`
		CompletionS float64 `json:"completion_s"`
		RatioFast   float64 `json:"ratio_fast"`
		LastReadyS  float64 `json:"last_ready_s"`
	}
	if err := json.Unmarshal(b, &results); err != nil {
		return run{}, false, fmt.Errorf("%s: %w", path, err)
	}
	for _, x := range results {
		if x.Model == "nodepass" && x.LastReadyS > 0 && x.RatioFast > 0 {
			return run{path, x.Nodes, x.CompletionS / x.RatioFast, x.LastReadyS, x.RatioFast}, true, nil
		}
	}
	return run{}, false, nil
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func mean(v []float64) float64 {
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "edge:", err)
	os.Exit(1)
}
