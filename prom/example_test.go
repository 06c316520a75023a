package prom_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodepass/nodepass/prom"
	"github.com/nodepass/nodepass/verify"
)

// The two steps of wiring: the Collector goes into verify.Options as the
// Observer, then the Verifier is attached to it for its counters.
func Example() {
	m, err := prom.New(nil)
	if err != nil {
		panic(err)
	}
	params := verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8} // small for the example
	v, err := verify.New(verify.NewMemoryStore(), &verify.Options{Params: params, Observer: m})
	if err != nil {
		panic(err)
	}
	defer v.Close()
	if err := m.Attach(v); err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry() // or prometheus.MustRegister(m)
	reg.MustRegister(m)

	ctx := context.Background()
	_ = v.Ensure(ctx, "worker-1", "0123456789abcdef") // enrolls
	_ = v.Ensure(ctx, "worker-1", "0123456789abcdef") // from the cache

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "nodepass_enrollments_total", "nodepass_cache_hits_total":
			fmt.Println(f.GetName(), f.Metric[0].GetCounter().GetValue())
		case "nodepass_scrypt_seconds":
			fmt.Println(f.GetName(), "count", f.Metric[0].GetHistogram().GetSampleCount())
		}
	}
	// Output:
	// nodepass_cache_hits_total 1
	// nodepass_enrollments_total 1
	// nodepass_scrypt_seconds count 1
}
