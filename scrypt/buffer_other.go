//go:build !linux

package scrypt

// Buffers live on the Go heap here (see buffer_linux.go).

// newWords returns n zero words that start on a 64-byte boundary.
func newWords(n int) []uint32 { return alignedWords(n) }

// mapping is the memory mapped for a buffer outside the Go heap: none here.
type mapping struct{}

func mappingOf([]uint32) mapping { return mapping{} }

func (mapping) unmap() {}

// bufferBytes is what a buffer of n words takes of memory.
func bufferBytes(n int64) int64 { return heapBuffer(n) }
