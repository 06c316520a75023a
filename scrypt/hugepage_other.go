//go:build !linux

package scrypt

// adviseHuge does nothing here (see hugepage_linux.go).
func adviseHuge([]uint32) {}
