//go:build linux

package scrypt

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Large buffers live outside the Go heap here (see the package doc):
// mapped on a huge-page boundary, advised to be backed by huge pages
// (MADV_HUGEPAGE; transparent huge pages are often "madvise" only)
// before their first touch, and unmapped when their Pool drops them. 4
// KiB pages cost 8,192 faults for a 32 MiB buffer's first use against
// 16, and a TLB miss on most of SMix's reads of V. The heap would zero a
// buffer again, count it in the live heap GOGC grows by, and keep it
// until its scavenger returns it. Smaller buffers stay on the heap, where
// a page of their own would waste most of it.
//
// A buffer carries its mapping: one of hugePage or more whose capacity
// is its length starts its mapping, of mappedBytes.

// hugePage is a transparent huge page on x86-64 and on arm64 with 4 KiB
// pages, and the smallest buffer mapped; where it is larger, the advice
// changes nothing.
const hugePage = 2 << 20

// newWords returns n zero words that start on a 64-byte boundary,
// mapped outside the Go heap where they are large (mappingOf says).
func newWords(n int) []uint32 {
	size := int(mappedBytes(int64(n)))
	if size < hugePage {
		return alignedWords(n)
	}
	// A huge page more, of which the part before the boundary and after
	// the buffer is unmapped.
	raw, err := unix.MmapPtr(-1, 0, nil, uintptr(size+hugePage), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return alignedWords(n + 1)[:n] // the heap may still have room; a capacity past the length says so
	}
	head := (hugePage - int(uintptr(raw)%hugePage)) % hugePage
	start := unsafe.Add(raw, head)
	if head > 0 {
		_ = unix.MunmapPtr(raw, uintptr(head))
	}
	if tail := hugePage - head; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(start, size), uintptr(tail))
	}
	offHeap.Add(int64(size))
	_ = unix.Madvise(unsafe.Slice((*byte)(start), size), unix.MADV_HUGEPAGE) // only advice
	return unsafe.Slice((*uint32)(start), n)
}

// mapping is the memory mapped for a buffer; zero for one on the heap.
type mapping struct {
	addr unsafe.Pointer
	len  uintptr
}

// mappingOf returns the memory mapped for b, a buffer from newWords.
func mappingOf(b []uint32) mapping {
	if size := mappedBytes(int64(len(b))); size >= hugePage && cap(b) == len(b) {
		return mapping{unsafe.Pointer(unsafe.SliceData(b)), uintptr(size)}
	}
	return mapping{}
}

// unmap gives m back to the kernel.
func (m mapping) unmap() {
	if m.len > 0 {
		_ = unix.MunmapPtr(m.addr, m.len)
		offHeap.Add(-int64(m.len))
	}
}

// bufferBytes is what a buffer of n words takes of memory.
func bufferBytes(n int64) int64 {
	if size := mappedBytes(n); size >= hugePage {
		return size
	}
	return heapBuffer(n)
}

// mappedBytes is n words in whole pages of the kernel's.
func mappedBytes(n int64) int64 {
	page := int64(unix.Getpagesize())
	return (4*n + page - 1) / page * page
}
