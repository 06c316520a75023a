package scrypt

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHuge asks the kernel to back b with huge pages (MADV_HUGEPAGE)
// before its first use. Linux maps a buffer's 32 MiB in 4 KiB pages
// unless told otherwise (transparent huge pages are often "madvise"
// only): 8,192 page faults on first use, which took longer than eight
// hashes here, and a TLB miss on most of SMix's random reads of V after.
// The advice is only advice: an error, or no huge page to give, changes
// nothing else. unsafe gives the bytes' address only; nothing is read or
// written through it.
func adviseHuge(b []uint32) {
	if len(b) == 0 {
		return
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), 4*len(b)), unix.MADV_HUGEPAGE)
}
