package bench

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/nodepass/nodepass/scrypt"
)

// timeBatched times the verification of the first n nodes as the
// Verifier will compute them once it batches: scrypt.KeyBatch calls of
// scrypt.Lanes() jobs each, on GOMAXPROCS workers, after a warm-up of one
// batch per worker. Each derived key is compared with the stored one.
// The buffers it took from scrypt's package-wide pool are dropped when it
// returns: a Verifier keeps its own (verify.Options.ScryptMemory), and
// these would stay in the heap beside them.
func (h *Herd) timeBatched(ctx context.Context, n int) (time.Duration, error) {
	defer scrypt.ReleaseBuffers()
	lanes, workers := scrypt.Lanes(), runtime.GOMAXPROCS(0)
	nodes := h.Nodes[:min(max(n, workers*lanes), len(h.Nodes))] // those timed or warmed up
	jobs := make([]scrypt.Job, len(nodes))
	want := make([][]byte, len(nodes))
	for i, node := range nodes {
		var err error
		if jobs[i], want[i], err = batchJob(node.Hash, node.Password); err != nil {
			return 0, fmt.Errorf("bench: batched lower bound: %s: %w", node.Name, err)
		}
	}
	// batches runs the jobs from first to last, lanes at a time.
	batches := func(first, last int) error {
		return parallel(ctx, (last-first+lanes-1)/lanes, workers, func(b int) error {
			lo := first + b*lanes
			hi := min(lo+lanes, last)
			batch := jobs[lo:hi]
			labelScrypt(ctx, func() error { scrypt.KeyBatch(batch); return nil })
			for k := range batch {
				if batch[k].Err != nil {
					return batch[k].Err
				}
				if subtle.ConstantTimeCompare(batch[k].Key, want[lo+k]) != 1 {
					return fmt.Errorf("%s: the password does not match its stored hash", h.Nodes[lo+k].Name)
				}
			}
			return nil
		})
	}
	if err := batches(0, min(workers*lanes, len(jobs))); err != nil {
		return 0, fmt.Errorf("bench: batched lower bound warm-up: %w", err)
	}
	runtime.GC()
	start := time.Now()
	if err := batches(0, n); err != nil {
		return 0, fmt.Errorf("bench: batched lower bound: %w", err)
	}
	return time.Since(start), nil
}

// batchJob returns the scrypt.KeyBatch job that verifies password against
// a stored hash in k3s's format ($1:<salt hex>:<logN>:<r>:<p>:<key>, the
// key in unpadded standard base64), and the key it must derive. The herd
// made its hashes with verify.GenerateFromPassword; this reads them back
// without verify's checks, which the benchmark does not measure.
func batchJob(hash, password string) (scrypt.Job, []byte, error) {
	f := strings.Split(hash, ":")
	if len(f) != 6 || f[0] != "$1" {
		return scrypt.Job{}, nil, fmt.Errorf("stored hash is not $1:<salt>:<logN>:<r>:<p>:<key>")
	}
	salt, err := hex.DecodeString(f[1])
	if err != nil {
		return scrypt.Job{}, nil, fmt.Errorf("stored hash's salt: %w", err)
	}
	var nums [3]int
	for i, s := range f[2:5] {
		if nums[i], err = strconv.Atoi(s); err != nil || nums[i] < 1 {
			return scrypt.Job{}, nil, fmt.Errorf("stored hash's field %d, %q: want a positive number", i+3, s)
		}
	}
	if nums[0] > 30 {
		return scrypt.Job{}, nil, fmt.Errorf("stored hash's logN %d: want at most 30", nums[0])
	}
	key, err := base64.RawStdEncoding.DecodeString(f[5])
	if err != nil || len(key) == 0 {
		return scrypt.Job{}, nil, fmt.Errorf("stored hash's key is not unpadded base64")
	}
	return scrypt.Job{Password: []byte(password), Salt: salt, N: 1 << nums[0], R: nums[1], P: nums[2], KeyLen: len(key)}, key, nil
}
