package pprofreport

import (
	"errors"
	"fmt"
	"os"

	"github.com/google/pprof/profile"
)

// scryptKey is the function whose allocations count scrypt calls.
const scryptKey = "golang.org/x/crypto/scrypt.Key"

// ScryptCalls counts the scrypt computations in a heap profile: the
// objects golang.org/x/crypto/scrypt.Key itself allocated at its largest
// size, which is its 128·r·N-byte work buffer, one per call (alloc_objects
// of the samples whose leaf is scrypt.Key and whose "bytes" label is the
// largest among them). It also returns that size. At the runtime's
// default sampling rate (one allocation per 512 KiB on average) a buffer
// of 4 MiB (logN 12) goes unsampled with probability exp(-8), 1 in 3000,
// and one of 32 MiB (logN 15) practically never; the profile scales the
// sampled ones back by the inverse of their probability. The count is
// independent of the model's own counter (Result.ScryptRuns): it sees
// every call, including any the model does not count.
func ScryptCalls(p *profile.Profile) (calls, buffer int64, err error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "alloc_objects" {
			idx = i
		}
	}
	if idx < 0 {
		return 0, 0, errors.New("pprofreport: not a heap profile (no alloc_objects sample type)")
	}
	var frames []string
	for _, s := range p.Sample {
		if frames = stack(s, frames); len(frames) == 0 || frames[0] != scryptKey || s.Value[idx] == 0 {
			continue
		}
		size := int64(0)
		if b := s.NumLabel["bytes"]; len(b) == 1 {
			size = b[0]
		}
		switch {
		case size > buffer:
			buffer, calls = size, s.Value[idx]
		case size == buffer:
			calls += s.Value[idx]
		}
	}
	return calls, buffer, nil
}

// AttachHeap sets r.ScryptCalls and r.ScryptBuffer from the heap profile
// of the same run.
func (r *Report) AttachHeap(p *profile.Profile) error {
	calls, buffer, err := ScryptCalls(p)
	if err != nil {
		return err
	}
	r.ScryptCalls, r.ScryptBuffer, r.HaveCalls = calls, buffer, true
	return nil
}

// ReadHeapFile reads the heap profile at path into r (see AttachHeap).
func (r *Report) ReadHeapFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("pprofreport: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return fmt.Errorf("pprofreport: reading %s: %w", path, err)
	}
	if err := r.AttachHeap(p); err != nil {
		return fmt.Errorf("pprofreport: %s: %s", path, err)
	}
	return nil
}
