// Package stats holds the small statistics the module's packages share.
package stats

import "slices"

// Median returns the median of v, which must not be empty; v is left as
// it is.
func Median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
