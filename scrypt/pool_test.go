package scrypt

import (
	"bytes"
	"fmt"
	"testing"
	"time"
	"unsafe"
)

// TestPoolsApart: a Pool's Release drops its own idle buffers and leaves
// another Pool's, and the package-wide one's, alone.
func TestPoolsApart(t *testing.T) {
	var a, b Pool
	job := func() []Job {
		return []Job{{Password: []byte("pw"), Salt: []byte("s"), N: 1 << 8, R: 1, P: 1, KeyLen: 32}}
	}
	a.KeyBatch(job(), Lanes())
	b.KeyBatch(job(), Lanes())
	a.Release()
	if n, _ := a.Idle(); n != 0 {
		t.Errorf("%d idle after Release", n)
	}
	if n, size := b.Idle(); n != 1 || size != 128*(1<<8+2) {
		t.Errorf("the other Pool: %d idle, %d bytes; want its buffer kept", n, size)
	}
}

// TestPoolKeyBatchLanes: Pool.KeyBatch with maxLanes holds at most that
// many buffers (a power of two at most Lanes()), whatever the jobs' P,
// and gives the keys Key gives.
func TestPoolKeyBatchLanes(t *testing.T) {
	for _, most := range []int{0, 1, 2, 3, 4, 8, 64} {
		t.Run(fmt.Sprint("lanes=", most), func(t *testing.T) {
			var p Pool
			jobs := []Job{
				{Password: []byte("a"), Salt: []byte("s"), N: 1 << 6, R: 2, P: 13, KeyLen: 32}, // 17 blocks: more than Lanes()
				{Password: []byte("b"), Salt: []byte("s"), N: 1 << 6, R: 2, P: 1, KeyLen: 32},
				{Password: []byte("c"), Salt: []byte("s"), N: 1 << 6, R: 2, P: 3, KeyLen: 32},
			}
			p.KeyBatch(jobs, most)
			for _, j := range jobs {
				want, _ := Key(j.Password, j.Salt, j.N, j.R, j.P, j.KeyLen)
				if j.Err != nil || !bytes.Equal(j.Key, want) {
					t.Fatalf("job %s: %x, %v; want Key's %x", j.Password, j.Key, j.Err, want)
				}
			}
			held := max(1, min(most, Lanes()))
			for held&(held-1) != 0 {
				held--
			}
			if n, _ := p.Idle(); n != held {
				t.Errorf("%d buffers held, want %d", n, held)
			}
		})
	}
}

// TestPerHash: PerHash reports the fastest kernel measured at (N, r) of
// each width, and nothing for widths or classes not measured.
func TestPerHash(t *testing.T) {
	resetChoices(t)
	ch := choiceFor(class{N: 1 << 12, r: 8, n: 1})
	for _, k := range ch.cands {
		ch.record(k, 100, time.Duration(16-int(k))*time.Millisecond)
	}
	d, ok := PerHash(1<<12, 8, 1)
	var want float64
	for _, k := range ch.cands {
		if v := ch.fastest[k] * float64(1<<12); want == 0 || v < want {
			want = v
		}
	}
	if !ok || d != time.Duration(want) {
		t.Errorf("one lane: %v, %v; want %v", d, ok, time.Duration(want))
	}
	if _, ok := PerHash(1<<12, 8, 2); ok && lanes >= 2 {
		t.Error("a width no class measured has a time")
	}
	if _, ok := PerHash(1<<13, 8, 1); ok {
		t.Error("a class never measured has a time")
	}
}

// TestPoolBuffersAligned: every buffer a Pool hands out starts on a
// 64-byte boundary, a cache line, whatever its size: the word-sliced
// kernel writes V in whole lines with non-temporal stores, which fault
// on a buffer that is not.
func TestPoolBuffersAligned(t *testing.T) {
	var p Pool
	defer p.Release()
	for _, words := range []int{1, 7, 16, 33, 100, 1000, 4099, 1 << 14, 1<<16 + 3} {
		for range 4 {
			b := p.get(words)
			if len(b) != words {
				t.Fatalf("get(%d): %d words", words, len(b))
			}
			if a := uintptr(unsafe.Pointer(&b[0])) % 64; a != 0 {
				t.Fatalf("get(%d): the buffer starts %d bytes past a 64-byte boundary", words, a)
			}
			defer p.put(b)
		}
	}
}
