package prom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gathered returns the single metric of family name that c collects.
func gathered(t *testing.T, c prometheus.Collector, name string) *dto.Metric {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			if len(f.Metric) != 1 {
				t.Fatalf("%s has %d series, want 1", name, len(f.Metric))
			}
			return f.Metric[0]
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}
