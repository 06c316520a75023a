package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/nodepass/nodepass/cache"
)

// Defaults of the Options fields left zero.
const (
	DefaultMaxWait      = 9500 * time.Millisecond // Options.MaxWait
	DefaultRetryDelay   = 5 * time.Second         // Agents.RetryDelay
	DefaultMaxFailDelay = 2 * time.Second         // Options.MaxFailDelay

	defaultMaxPasswordLen   = 1024
	defaultMaxMemory        = 256 << 20 // Limits.MaxMemory: 8 times k3s's 32 MiB
	defaultMaxWork          = 1 << 30   // Limits.MaxWork: 32 times k3s's
	defaultMaxQueue         = 4096
	defaultWorkTimeout      = 2 * time.Minute
	defaultMaxQueuedPerNode = 4
	defaultFailOpenFor      = 10 * time.Minute
	// maxNodeNameLen is the longest node name accepted: k3s keeps a
	// node's hash in the secret node + secretSuffix, whose name is at
	// most 253 characters (a DNS-1123 subdomain).
	maxNodeNameLen = 253 - len(secretSuffix)
	secretSuffix   = ".node-password.k3s"
)

// Options configure a Verifier; nil or a zero field means the default,
// a negative one is an error (but MaxFailDelay). verify/internal/sched's
// package doc explains the queue's policy these fields size.
type Options struct {
	// Params hash new nodes' passwords. Zero: DefaultParams.
	Params Params
	Limits Limits // on stored hashes and passwords
	// MaxConcurrent is how many batches of scrypt run at most at once,
	// each holding up to scrypt.Lanes() buffers of 128·r·(N+2) bytes;
	// fewer when ScryptMemory says so. Default GOMAXPROCS.
	MaxConcurrent int
	// ScryptMemory bounds the scrypt memory (128·r·N per lane), in use and
	// idle, of all computations: slots and lanes follow from it, a stored
	// hash one lane of which passes it is ErrInvalidHash. Default
	// DefaultScryptMemory; negative: no bound.
	ScryptMemory int64
	// MaxQueue bounds the computations waiting for a slot; past it a
	// request is refused (OverloadError, Queued false). Default 4096.
	MaxQueue int
	// MaxQueuedPerNode is how many places a node name has in the queue;
	// requests past it wait for one (see the policy). Default 4.
	MaxQueuedPerNode int
	// MaxWait is the longest a request waits, from its arrival (WithArrival),
	// below the agents' client timeout (k3s: 10 s). Default 9.5 s.
	MaxWait time.Duration
	// WorkTimeout bounds a computation's life, store calls included. Default 2 min.
	WorkTimeout time.Duration
	Agents      Agents // how the agents retry; zero: as k3s agents do
	// MaxFailDelay bounds how long a mismatch for a failing name is held
	// back (100 ms after its second, doubling). Negative: none. Default 2 s.
	MaxFailDelay time.Duration
	// FailOpen, if not nil, lets a new node in when its hash cannot be stored.
	FailOpen *FailOpen
	// DigestKey, if not nil, turns on remembered verification through a
	// DigestStore: at least MinDigestKeyLen secret bytes, every server's.
	DigestKey []byte
	Cache     *cache.Options // the verified-tuple cache's; nil: its defaults
	// Tokens, if not nil, holds the join tokens' hashes by basic-auth
	// user, for VerifyToken; Verifier.LoadTokens reads k3s's passwd file
	// instead.
	Tokens Store
	// Observer, if not nil, is told each computation's time and queue wait.
	Observer Observer
}

// Agents describe how the nodes' agents retry; zero: as k3s agents do.
type Agents struct {
	RetryDelay       time.Duration // the soonest an agent sent away asks again; default 5 s
	HonourRetryAfter bool          // agents come back when Retry-After says (k3s's do not)
}

// FailOpen lets a new node in when Store.Create fails (not ErrExists) and a
// fresh read confirms it has no hash, as k3s does: only that password then
// passes, and the Create is retried, 5 s apart doubling to 1 min. At most
// Options.MaxQueue nodes wait so. Such a node has proven nothing else.
// That fresh read is a second GetFresh of the enrollment, made after its
// computation, when it no longer counts against MaxQueue: a store's own
// budget of direct reads (kube's FreshReads) bounds those.
type FailOpen struct {
	// RetryFor bounds the retries of one node's Create. Default 10 min.
	RetryFor time.Duration
	// OnDeferred, if not nil, hears how each node let in ended: nil once
	// stored; ErrMismatchedHashAndPassword when another hash was stored
	// meanwhile; the last store error when the retries ran out or Close.
	OnDeferred func(node string, err error)
}

// Observer receives timings from a Verifier's goroutines: its methods must
// be safe for concurrent use and return quickly. ctx is the computation's
// own context: the values and pprof labels of the request that started it,
// with ProfileLabel=ProfileScrypt.
type Observer interface {
	// ObserveScrypt is told how long each computation's batch took.
	ObserveScrypt(ctx context.Context, d time.Duration)
	// ObserveQueueWait is told how long each computation waited for a slot.
	ObserveQueueWait(ctx context.Context, d time.Duration)
}

// resolve validates o and fills in defaults.
func (o *Options) resolve() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Limits.MaxMemory < 0 || r.Limits.MaxWork < 0 || r.Limits.MaxPasswordLen < 0 {
		return r, fmt.Errorf("verify: Options.Limits: negative limit")
	}
	r.Limits = r.Limits.withDefaults()
	if r.Params == (Params{}) {
		r.Params = DefaultParams
	}
	if err := r.Params.validate(r.Limits); err != nil {
		return r, fmt.Errorf("verify: Options.Params: %w", err)
	}
	if r.FailOpen != nil {
		f := *r.FailOpen
		if f.RetryFor < 0 {
			return r, errors.New("verify: Options.FailOpen.RetryFor is negative")
		}
		r.FailOpen = &f
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxConcurrent", int64(r.MaxConcurrent)},
		{"MaxWait", int64(r.MaxWait)},
		{"Agents.RetryDelay", int64(r.Agents.RetryDelay)},
		{"MaxQueue", int64(r.MaxQueue)},
		{"WorkTimeout", int64(r.WorkTimeout)},
		{"MaxQueuedPerNode", int64(r.MaxQueuedPerNode)},
	} {
		if f.v < 0 {
			return r, fmt.Errorf("verify: Options.%s is negative", f.name)
		}
	}
	if r.DigestKey != nil {
		if len(r.DigestKey) < MinDigestKeyLen {
			return r, fmt.Errorf("verify: Options.DigestKey is %d bytes, want at least %d", len(r.DigestKey), MinDigestKeyLen)
		}
		r.DigestKey = bytes.Clone(r.DigestKey)
	}
	if r.MaxConcurrent == 0 {
		r.MaxConcurrent = runtime.GOMAXPROCS(0)
	}
	switch {
	case r.ScryptMemory == 0:
		r.ScryptMemory = DefaultScryptMemory
	case r.ScryptMemory < 0:
		r.ScryptMemory = 0 // no budget
	}
	if b := lane(r.Params.LogN, r.Params.R); r.ScryptMemory > 0 && b > r.ScryptMemory {
		return r, fmt.Errorf("verify: Options.ScryptMemory %d is less than one lane of Options.Params' scrypt, %d bytes (128·r·N)", r.ScryptMemory, b)
	}
	if r.MaxWait == 0 {
		r.MaxWait = DefaultMaxWait
	}
	if r.Agents.RetryDelay == 0 {
		r.Agents.RetryDelay = DefaultRetryDelay
	}
	if r.MaxQueue == 0 {
		r.MaxQueue = defaultMaxQueue
	}
	if r.WorkTimeout == 0 {
		r.WorkTimeout = defaultWorkTimeout
	}
	if r.MaxQueuedPerNode == 0 {
		r.MaxQueuedPerNode = defaultMaxQueuedPerNode
	}
	if r.FailOpen != nil && r.FailOpen.RetryFor == 0 {
		r.FailOpen.RetryFor = defaultFailOpenFor
	}
	if r.MaxFailDelay == 0 {
		r.MaxFailDelay = DefaultMaxFailDelay
	}
	return r, nil
}

// withDefaults returns l with each zero field at its default.
func (l Limits) withDefaults() Limits {
	if l.MaxMemory == 0 {
		l.MaxMemory = defaultMaxMemory
	}
	if l.MaxWork == 0 {
		l.MaxWork = defaultMaxWork
	}
	if l.MaxPasswordLen == 0 {
		l.MaxPasswordLen = defaultMaxPasswordLen
	}
	return l
}
