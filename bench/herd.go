package bench

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/nodepass/nodepass/scrypt"
	"github.com/nodepass/nodepass/verify"
)

// Node is one agent's identity and its stored hash.
type Node struct {
	Name     string `json:"name"`
	Password string `json:"password"`
	Hash     string `json:"hash"` // made at the herd's logN
}

// Herd is what every model's run of one scenario shares: the nodes with
// their stored hashes (every node has joined before) and the lower bounds
// measured on this machine. It is made once and survives a JSON round
// trip, which is how cmd/bench hands it to its workers.
type Herd struct {
	LogN  int    `json:"logn"`
	Nodes []Node `json:"nodes"`
	// Token is the join token's password every agent sends as basic auth
	// ("node:<token>"): 16 random bytes in hex.
	Token string `json:"token"`
	// LowerBound is the time Workers (GOMAXPROCS) workers took to run one
	// scrypt verification per node with x/crypto's scrypt, as k3s runs
	// it; LowerBoundBatch the same with the Verifier's scrypt in batches,
	// the bound nodepass is judged against. 0 until MeasureLowerBound.
	LowerBound      time.Duration `json:"lower_bound_ns"`
	LowerBoundBatch time.Duration `json:"lower_bound_batch_ns,omitempty"`
	Workers         int           `json:"workers"`
	// BoundLoad is the machine's highest 1-minute load average read as
	// MeasureLowerBound began and ended, BoundWaitShare the share of
	// their ready time its threads waited for a CPU, BoundOthersShare the
	// share of its CPUs' time other processes took meanwhile:
	// BoundStarved reads them. 0 where not read.
	BoundLoad        float64 `json:"bound_load,omitempty"`
	BoundWaitShare   float64 `json:"bound_wait_share,omitempty"`
	BoundOthersShare float64 `json:"bound_others_share,omitempty"`
}

// NewHerd makes n nodes named node-0001 and so on, each with a random
// password of 16 bytes in hex, as k3s agents make them, and its stored
// hash at logN.
func NewHerd(ctx context.Context, n, logN int) (*Herd, error) {
	if n < 1 {
		return nil, fmt.Errorf("bench: herd of %d nodes", n)
	}
	params := verify.DefaultParams
	params.LogN = logN
	var token [16]byte
	rand.Read(token[:])
	h := &Herd{LogN: logN, Nodes: make([]Node, n), Token: hex.EncodeToString(token[:])}
	for i := range h.Nodes {
		var pw [16]byte
		rand.Read(pw[:])
		h.Nodes[i] = Node{Name: fmt.Sprintf("node-%04d", i+1), Password: hex.EncodeToString(pw[:])}
	}
	err := parallel(ctx, n, runtime.GOMAXPROCS(0), func(i int) error {
		return labelScrypt(ctx, func() (err error) {
			h.Nodes[i].Hash, err = verify.GenerateFromPassword(h.Nodes[i].Password, params)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("bench: making stored hashes: %w", err)
	}
	return h, nil
}

// MeasureLowerBound sets h's lower bounds: the time to run one scrypt
// verification for every node on GOMAXPROCS workers, after a warm-up,
// with x/crypto's scrypt (LowerBound, the bound every ratio is taken
// against) and with this module's in batches (LowerBoundBatch). It is
// the least time any server on this process's CPUs can let the herd in,
// so nothing else should run meanwhile.
func (h *Herd) MeasureLowerBound(ctx context.Context) error {
	var load loadTrace
	load.begin(time.Now())
	d, err := h.timeVerifications(ctx, len(h.Nodes))
	if err != nil {
		return err
	}
	batch, err := h.timeBatched(ctx, len(h.Nodes))
	if err != nil {
		return err
	}
	h.LowerBound, h.LowerBoundBatch, h.Workers = d, batch, runtime.GOMAXPROCS(0)
	c := load.end()
	h.BoundLoad, h.BoundWaitShare, h.BoundOthersShare = c.load, c.waitShare, c.others
	return nil
}

// LocalBounds is a model's local lower bound, estimated right before its
// run from sc.BoundSample verifications of the first nodes with the
// scrypt the model runs (x/crypto's for k3s, nodepass's in batches of
// scrypt.Lanes(), at least one per worker), times len(Nodes) / sample:
// cheap, and under the load the run itself will see. With transport it
// also returns what the agents' requests add in http mode
// (EstimateTransport). Zero without a sample; h is not changed.
func (h *Herd) LocalBounds(ctx context.Context, sc Scenario, model string, transport bool) (bound, trans time.Duration, err error) {
	sample := sc.BoundSample
	switch {
	case sample <= 0:
		return 0, 0, nil
	case model != ModelNodepass:
		sample = min(sample, len(h.Nodes))
		bound, err = h.timeVerifications(ctx, sample)
	default:
		sample = min(max(sample, scrypt.Lanes()*runtime.GOMAXPROCS(0)), len(h.Nodes))
		bound, err = h.timeBatched(ctx, sample)
	}
	bound = bound * time.Duration(len(h.Nodes)) / time.Duration(sample)
	if err != nil || !transport {
		return bound, 0, err
	}
	trans, err = h.EstimateTransport(ctx, sc)
	return bound, trans, err
}

// timeVerifications times the verification of the first n nodes with
// x/crypto's scrypt on GOMAXPROCS workers, after a warm-up of one per
// worker.
func (h *Herd) timeVerifications(ctx context.Context, n int) (time.Duration, error) {
	workers := runtime.GOMAXPROCS(0)
	check := func(i int) error {
		return labelScrypt(ctx, func() error { return xcryptoCompare(h.Nodes[i].Hash, h.Nodes[i].Password) })
	}
	return timeWarm("lower bound",
		func() error { return parallel(ctx, min(workers, len(h.Nodes)), workers, check) },
		func() error { return parallel(ctx, n, workers, check) })
}

// timeWarm runs warm, collects the garbage, and returns how long run
// takes; what names them in errors.
func timeWarm(what string, warm, run func() error) (time.Duration, error) {
	if err := warm(); err != nil {
		return 0, fmt.Errorf("bench: %s warm-up: %w", what, err)
	}
	runtime.GC()
	start := time.Now()
	if err := run(); err != nil {
		return 0, fmt.Errorf("bench: %s: %w", what, err)
	}
	return time.Since(start), nil
}

func (h *Herd) validate(sc Scenario) error {
	switch {
	case h == nil:
		return fmt.Errorf("bench: nil Herd")
	case len(h.Nodes) != sc.Nodes:
		return fmt.Errorf("bench: herd has %d nodes, scenario wants %d", len(h.Nodes), sc.Nodes)
	case h.LogN != sc.LogN:
		return fmt.Errorf("bench: herd's hashes are at logN %d, scenario wants %d", h.LogN, sc.LogN)
	case h.Token == "":
		return fmt.Errorf("bench: herd has no join token")
	}
	for i, n := range h.Nodes {
		if n.Name == "" || n.Password == "" || n.Hash == "" {
			return fmt.Errorf("bench: herd node %d is incomplete", i)
		}
	}
	return nil
}

// parallel calls fn(0) to fn(n-1) on at most workers goroutines and
// returns the first error; after an error or the end of ctx no new call
// starts.
func parallel(ctx context.Context, n, workers int, fn func(int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

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
	return timeWarm("batched lower bound", func() error { return batches(0, min(workers*lanes, len(jobs))) },
		func() error { return batches(0, n) })
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
