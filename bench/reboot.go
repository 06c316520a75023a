package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// Reboot says what restarted before the measured herd.
type Reboot string

// Reboots.
const (
	// RebootNone is the cold herd: no server has verified a node since it
	// started. The default.
	RebootNone Reboot = "none"
	// RebootAgents reboots the nodes only: every node joined once before
	// (a warm-up, not measured) against servers that stayed up. How long
	// ago does not matter to nodepass: its cache keeps a match until
	// evicted by count (package cache's TestMatchesDoNotExpireByDefault).
	RebootAgents Reboot = "agents"
	// RebootAll restarts the servers too: after the same warm-up, new
	// model instances start over the same store, which keeps the hashes
	// and nodepass's remembered digests.
	RebootAll Reboot = "all"
)

// Set sets r to the reboot called s (flag.Value).
func (r *Reboot) Set(s string) error {
	return setName(r, "reboot", s, RebootNone, RebootAgents, RebootAll)
}

func (r Reboot) String() string { return string(r) }

// serverEnv is what every server of one run shares beside the store.
type serverEnv struct {
	digestKey    []byte // nodepass's DigestKey; nil: none
	scryptMemory int64  // Scenario.ScryptMemory
	// honourRetryAfter: the agents come back when Retry-After says, and
	// nodepass is told so (verify.Options.Agents.HonourRetryAfter).
	honourRetryAfter bool
	token            string // the join token's password; "" for none
}

// newServerEnv returns the servers' environment for a run of sc against
// modelName: for nodepass, unless sc.NoDigestKey, a random DigestKey for
// every server of the run, the restarted ones included.
func newServerEnv(sc Scenario, modelName string, token string) serverEnv {
	env := serverEnv{honourRetryAfter: sc.Agent.honoursRetryAfter(), token: token, scryptMemory: sc.ScryptMemory}
	if modelName == ModelNodepass && !sc.NoDigestKey {
		env.digestKey = make([]byte, verify.MinDigestKeyLen)
		rand.Read(env.digestKey) // never fails
	}
	return env
}

// PasswordLabel's values on the warm-up's requests and on a server's
// start-up work (hashing its join token): the tracker counts neither.
const (
	warmupLabel = "warmup"
	loadLabel   = "load"
)

// loading is the context of a server's start-up work.
var loading = pprof.WithLabels(context.Background(), pprof.Labels(PasswordLabel, loadLabel))

// warmup is what a run's warm-up did: its counts are subtracted from the
// servers' so that the figures are the measured reboot's only.
type warmup struct {
	counts  modelCounts // the servers' after it
	took    time.Duration
	digests int // nodes with a remembered digest in the store after it
}

// warmUp is a reboot's warm-up, with the store's faults off: every node
// joins once, node i on servers[i mod len(servers)] (where its agent
// starts), calling Ensure directly on GOMAXPROCS goroutines. It returns
// the servers' counts after it. Models that keep no state between
// requests (the k3s models: no result cache, nothing written to the store
// for a node that has its hash) are not warmed up: it would cost a scrypt
// per node and leave nothing behind.
func warmUp(ctx context.Context, sc Scenario, nodes []Node, faults *faultStore, servers []model) (warmup, error) {
	var w warmup
	if !servers[0].keepsState() {
		return w, nil
	}
	if faults != nil {
		faults.off.Store(true)
		defer faults.off.Store(false)
	}
	start := time.Now()
	ctx = pprof.WithLabels(ctx, pprof.Labels(PasswordLabel, warmupLabel))
	err := parallel(ctx, len(nodes), runtime.GOMAXPROCS(0), func(i int) error {
		s := i % len(servers)
		rctx, cancel := context.WithTimeout(ctx, sc.scale(sc.ClientTimeout))
		defer cancel()
		// A node shed (verify.ErrOverloaded, every OverloadError) waits as
		// its agent would, and asks again; the warm-up is not measured.
		for {
			err := servers[s].Ensure(rctx, nodes[i].Name, nodes[i].Password)
			if err == nil {
				return nil
			}
			if rctx.Err() != nil || !errors.Is(err, verify.ErrOverloaded) {
				return fmt.Errorf("bench: warm-up of %s on server %d: %w", nodes[i].Name, s, err)
			}
			time.Sleep(sc.scale(10 * time.Millisecond))
		}
	})
	w.took, w.counts = time.Since(start), sumCounts(servers)
	return w, err
}

// waitDigests waits, for at most limit, until every node has a remembered
// digest in store (the Verifier records them off the request path), and
// returns how many have one.
func waitDigests(ctx context.Context, store verify.DigestStore, nodes []Node, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		n := 0
		for _, node := range nodes {
			if _, d, err := store.GetWithDigest(ctx, node.Name); err == nil && d != nil {
				n++
			}
		}
		if n == len(nodes) || time.Now().After(deadline) || ctx.Err() != nil {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}
