package kube

import (
	"math"
	"strings"
	"testing"
)

// TestNewRefusesNonFiniteRates: a NaN or infinite FreshReads or
// DigestWrites would remove the limit (NaN passes every comparison), so
// New refuses it.
func TestNewRefusesNonFiniteRates(t *testing.T) {
	client := newClient(t)
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, tc := range []struct {
			name string
			opts *Options
		}{{"FreshReads", &Options{FreshReads: v}}, {"DigestWrites", &Options{DigestWrites: v}}} {
			s, err := New(client, tc.opts)
			if err == nil || !strings.HasPrefix(err.Error(), "kube: ") || !strings.Contains(err.Error(), tc.name) {
				t.Errorf("%s %v: New = %v, want a kube: error about %s", tc.name, v, err, tc.name)
			}
			if s != nil {
				s.Close()
			}
		}
	}
}
