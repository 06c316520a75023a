//go:build !linux

package verify

// threadCPU is not available here: estimates use wall time alone.
func threadCPU() int64 { return 0 }
