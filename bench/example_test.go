package bench_test

import (
	"context"
	"fmt"

	"github.com/nodepass/nodepass/bench"
)

// A small herd in-process against nodepass: make the herd once, measure
// its lower bound, run a model.
func ExampleRun() {
	ctx := context.Background()
	h, err := bench.NewHerd(ctx, 8, 4) // 8 nodes, scrypt logN 4
	if err != nil {
		panic(err)
	}
	if err := h.MeasureLowerBound(ctx); err != nil {
		panic(err)
	}
	res, err := bench.Run(ctx, bench.Scenario{Nodes: 8, LogN: 4}, h, bench.ModelNodepass)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d of %d joined, %.2f scrypt runs per node, stopped %q\n",
		res.Model, res.Joined, res.Nodes, res.ScryptRunsPerNode, res.Stopped)
	// Output: nodepass: 8 of 8 joined, 1.00 scrypt runs per node, stopped ""
}
