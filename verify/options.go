package verify

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/nodepass/nodepass/cache"
	"github.com/nodepass/nodepass/internal/dnsname"
)

// Defaults of Options.MaxWait (below k3s agents' 10 s timeout),
// Agents.RetryDelay and Options.MaxFailDelay.
const (
	DefaultMaxWait      = 9500 * time.Millisecond
	DefaultRetryDelay   = 5 * time.Second
	DefaultMaxFailDelay = 2 * time.Second

	defaultMaxPasswordLen   = 1024
	defaultMaxMemory        = 256 << 20 // Limits.MaxMemory: 8 times k3s's 32 MiB
	defaultMaxWork          = 1 << 30   // Limits.MaxWork: 32 times k3s's
	defaultMaxQueue         = 4096
	defaultWorkTimeout      = 2 * time.Minute
	defaultMaxQueuedPerNode = 4
	defaultFailOpenFor      = 10 * time.Minute
	defaultMaxPending       = 4096
	// maxNodeNameLen is the longest node name accepted: k3s keeps a
	// node's hash in the secret node + secretSuffix, whose name is at
	// most 253 characters (a DNS-1123 subdomain).
	maxNodeNameLen = dnsname.MaxSubdomain - len(secretSuffix)
	secretSuffix   = ".node-password.k3s"
)

// Options configure a Verifier: a zero field means the default, a
// negative one an error but where said.
type Options struct {
	Params        Params // of new hashes; default DefaultParams
	Limits        Limits
	MaxConcurrent int // batches of scrypt at once; default GOMAXPROCS
	// ScryptMemory bounds every byte scrypt allocates, idle buffers included; negative: none. Default: a twelfth
	// of the process's memory (cgroup limit, else the machine's), from one hash of Params to DefaultScryptMemory.
	ScryptMemory     int64
	MaxQueue         int           // computations waiting for a slot, more refused; default 4096
	MaxQueuedPerNode int           // a node's places in the queue; default 4
	MaxWait          time.Duration // a request's longest wait, from its arrival
	WorkTimeout      time.Duration // a computation's, store calls included; default 2 min
	Agents           Agents
	MaxFailDelay     time.Duration  // delays a failing name's mismatch (100 ms doubling); negative: none
	FailOpen         *FailOpen      // if not nil, see FailOpen
	DigestKey        []byte         // remembers nodes' verifications (DigestStore); MinDigestKeyLen bytes or more
	Cache            *cache.Options // the verified-tuple cache's
	Tokens           Store          // join tokens' hashes by user, for VerifyToken
	Observer         Observer       // if not nil, see Observer
}

// Agents describe how the nodes' agents retry.
type Agents struct {
	RetryDelay       time.Duration // the soonest one sent away asks again
	HonourRetryAfter bool          // they come back when Retry-After says (k3s's do not)
}

// FailOpen lets a new node in when Store.Create fails and a fresh read
// finds no hash, as k3s does: only its password passes while the Create
// is retried.
type FailOpen struct {
	RetryFor   time.Duration // bounds one node's retries; default 10 min
	MaxPending int           // bounds the nodes let in and not stored; default 4096
	// OnDeferred, if not nil, hears how each ended: nil once stored, or why not.
	OnDeferred func(node string, err error)
}

// Observer hears of each computation, with its request's context, on a
// goroutine it must not hold up.
type Observer interface {
	ObserveScrypt(ctx context.Context, d time.Duration)    // a computation's batch took d
	ObserveQueueWait(ctx context.Context, d time.Duration) // a computation waited d for its slot
}

// resolve validates o and fills in defaults.
func (o *Options) resolve() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	var failOpen FailOpen
	if r.FailOpen != nil {
		failOpen = *r.FailOpen
		r.FailOpen = &failOpen
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"Limits.MaxMemory", r.Limits.MaxMemory}, {"Limits.MaxWork", r.Limits.MaxWork},
		{"Limits.MaxPasswordLen", int64(r.Limits.MaxPasswordLen)}, {"MaxConcurrent", int64(r.MaxConcurrent)},
		{"MaxWait", int64(r.MaxWait)}, {"Agents.RetryDelay", int64(r.Agents.RetryDelay)}, {"MaxQueue", int64(r.MaxQueue)},
		{"WorkTimeout", int64(r.WorkTimeout)}, {"MaxQueuedPerNode", int64(r.MaxQueuedPerNode)},
		{"FailOpen.RetryFor", int64(failOpen.RetryFor)}, {"FailOpen.MaxPending", int64(failOpen.MaxPending)}} {
		if f.v < 0 {
			return r, fmt.Errorf("verify: Options.%s is negative", f.name)
		}
	}
	r.Limits = r.Limits.withDefaults()
	r.Params = cmp.Or(r.Params, DefaultParams)
	if err := r.Params.validate(r.Limits); err != nil {
		return r, fmt.Errorf("verify: Options.Params: %w", err)
	}
	if r.DigestKey != nil {
		if len(r.DigestKey) < MinDigestKeyLen {
			return r, fmt.Errorf("verify: Options.DigestKey is %d bytes, want at least %d", len(r.DigestKey), MinDigestKeyLen)
		}
		r.DigestKey = bytes.Clone(r.DigestKey)
	}
	r.MaxConcurrent = cmp.Or(r.MaxConcurrent, runtime.GOMAXPROCS(0))
	// A zero ScryptMemory is the default, read at the first computation
	// (sized).
	if least := jobBytes(r.Params.LogN, r.Params.R, r.Params.P, r.Params.KeyLen); r.ScryptMemory > 0 && least > r.ScryptMemory {
		return r, fmt.Errorf("verify: Options.ScryptMemory %d is less than one hash of Options.Params takes, %d bytes", r.ScryptMemory, least)
	}
	r.MaxWait = cmp.Or(r.MaxWait, DefaultMaxWait)
	r.Agents.RetryDelay = cmp.Or(r.Agents.RetryDelay, DefaultRetryDelay)
	r.MaxQueue = cmp.Or(r.MaxQueue, defaultMaxQueue)
	r.WorkTimeout = cmp.Or(r.WorkTimeout, defaultWorkTimeout)
	r.MaxQueuedPerNode = cmp.Or(r.MaxQueuedPerNode, defaultMaxQueuedPerNode)
	r.MaxFailDelay = cmp.Or(r.MaxFailDelay, DefaultMaxFailDelay)
	if r.FailOpen != nil {
		r.FailOpen.RetryFor = cmp.Or(r.FailOpen.RetryFor, defaultFailOpenFor)
		r.FailOpen.MaxPending = cmp.Or(r.FailOpen.MaxPending, defaultMaxPending)
	}
	return r, nil
}

// withDefaults returns l with each zero field at its default.
func (l Limits) withDefaults() Limits {
	l.MaxMemory = cmp.Or(l.MaxMemory, defaultMaxMemory)
	l.MaxWork = cmp.Or(l.MaxWork, defaultMaxWork)
	l.MaxPasswordLen = cmp.Or(l.MaxPasswordLen, defaultMaxPasswordLen)
	return l
}
