package verify

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/nodepass/nodepass/cache"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxPasswordLen   = 1024
	DefaultMaxWait          = 9500 * time.Millisecond
	DefaultMaxQueue         = 4096
	DefaultWorkTimeout      = 2 * time.Minute
	DefaultMaxQueuedPerNode = 4
	DefaultMaxFailDelay     = 2 * time.Second
	DefaultEnrollRetryFor   = 10 * time.Minute
	DefaultAgentRetryDelay  = 5 * time.Second
	// MaxNodeNameLen is the longest node name accepted: a DNS subdomain.
	MaxNodeNameLen = 253
)

// Options configure a Verifier. A nil *Options means all defaults; a zero
// field means that field's default. Negative values are an error, except
// for MaxFailDelay, where a negative value turns the delays off.
type Options struct {
	// Params hash the passwords of nodes that Ensure enrolls. Zero means
	// DefaultParams, what k3s and RKE2 use.
	Params Params

	// Limits bound the scrypt parameters a stored hash may ask for; a hash
	// beyond them is ErrInvalidHash before anything is allocated. Zero
	// fields mean DefaultMaxMemory (256 MiB) and DefaultMaxWork (1 GiB).
	Limits Limits

	// MaxPasswordLen is the longest password accepted, in bytes. Default
	// 1024.
	MaxPasswordLen int

	// MaxConcurrent is how many batches of scrypt computations run at
	// once, each on a slot of its own: a batch is up to scrypt.Lanes()
	// queued computations with the same parameters, computed together.
	// It bounds CPU and memory: a slot holds at most Lanes() buffers of
	// 128·r·(N+2) bytes (32 MiB + 2 KiB at k3s's parameters), and a batch
	// at most Lanes() × 128·r·N·p of Params' work (a stored hash asking
	// for more runs in a smaller batch, alone if need be), so a herd's
	// heap stays within MaxConcurrent × Lanes() × 128·r·(N+2) plus about
	// 100 MiB for everything else. Idle buffers are released after 30 s
	// without work, and at Close. Default runtime.GOMAXPROCS(0) at New.
	MaxConcurrent int

	// Scrypt chooses the scrypt implementation: ScryptFast (the zero
	// value, the default) or ScryptXCrypto, for deployments that want only
	// golang.org/x/crypto's code on the path.
	Scrypt Scrypt

	// MaxWait is the longest a request waits for a result before it is
	// answered with an OverloadError (the work stays queued and its outcome
	// is cached for the retry), counted from when the request came (see
	// WithArrival; httpauth.ConnContext counts the TLS handshake). Whether
	// a request is held or sent away is decided when it comes: it is
	// answered at once when its expected wait (its estimate times the
	// margin the estimates' recent errors call for) is longer, and once
	// held it is sent away early only when its result cannot come in time
	// even at the best. So MaxWait needs no margin for the estimate's
	// errors, only for the answer's trip: keep it just below the agents'
	// client timeout (10 s for k3s). Default 9.5 s.
	MaxWait time.Duration

	// AgentRetryDelay is how soon an agent sent away (or whose request
	// timed out) is expected to ask again, when agents do not honour
	// Retry-After: k3s agents retry 5-10 s after a failed request, so the
	// default is 5 s. The computations whose agents are away run, when no
	// waiting request needs a slot, in the order their agents are
	// expected back, so that an agent coming back finds its result ready.
	AgentRetryDelay time.Duration

	// AgentsHonourRetryAfter says that agents come back when they are told
	// to (OverloadError.RetryAfter, httpauth's Retry-After header) rather
	// than AgentRetryDelay later: for agents that retry with backoff and
	// honour Retry-After. k3s agents do not.
	AgentsHonourRetryAfter bool

	// MaxQueue is how many computations may wait for a slot, those waiting
	// for room in their node's queue included and those a caller pinned
	// past MaxQueuedPerNode (see there) apart. Past it, new work is
	// refused with an OverloadError (Queued false) instead of being
	// queued, and its agent's next request starts it anew; enrollments
	// (reading the store before they queue) count too. A queued
	// computation holds no goroutine and at most 4 KiB of heap, its node
	// name's share included; the default, 4096, queues a whole 3000-node
	// herd, so that the computations of agents sent away run before they
	// come back.
	MaxQueue int

	// MaxQueuedPerNode is how many computations (distinct passwords) one
	// node name may have queued at once, apart from those pinned below. The
	// queue serves names in turn, so a flood of guesses against some names
	// costs those names' turns, not everyone's. Once a name has had a
	// mismatch, a password asked for it only once is computed only when
	// nothing else is queued.
	//
	// A new password for a name with no room is not refused: its request
	// waits for room, at most MaxWait from its arrival (see WithArrival),
	// and a request that waits out MaxWait (for a password queued or
	// waiting for room) pins it: it is queued, over this limit if need be,
	// and never dropped for another password.
	// Only a first ask for a failing or busy name whose callers all left
	// before MaxWait gives its place to a request waiting for room. Within
	// a name, a password asked for again (agents retry the same password)
	// goes before those asked once, and otherwise the first queued goes
	// first; asking more often gains nothing.
	//
	// So, whatever wrong passwords are sent for a node, fresh or repeated,
	// and however timed: if its agent waits MaxWait for each answer (k3s:
	// 10 s client timeout) and retries the same password, that password is
	// queued by the end of its agent's first request not answered within
	// MaxWait, and from the agent's next request on only the name's
	// passwords queued or waiting before that first request are computed
	// before it: at most MaxQueuedPerNode, plus those pinned over it (each
	// cost a caller a whole MaxWait of waiting), plus one per other request
	// then in progress for the name. It is computed as the name's turns
	// come, unless WorkTimeout ends its wait first. Default 4.
	MaxQueuedPerNode int

	// MaxFailDelay bounds how long a mismatch for a node name that keeps
	// failing is held back: after the second mismatch recorded for a name
	// (computed, or answered from the cache) its mismatches wait 100 ms,
	// after each further one twice as long, up to MaxFailDelay; the count
	// resets on a match or after 10 minutes without a mismatch. (A request
	// for a node name with no room in the queue is held by its wait for
	// room instead; see MaxQueuedPerNode.) The delays slow guessing and
	// misconfigured duplicate nodes without costing CPU, and never delay a
	// matching password. Default 2 s; negative disables them.
	MaxFailDelay time.Duration

	// WorkTimeout bounds one shared computation from the moment it is
	// queued: its wait for a slot and any Store.Create it makes. Shared work
	// runs detached from the callers' contexts, so this is what stops a
	// hanging store from holding it forever. Default 2 min.
	WorkTimeout time.Duration

	// EnrollFailOpen lets a new node in when its hash cannot be stored, as
	// k3s does: an outage of what guards secret creation (a validating
	// webhook whose pods need new nodes to run, say) then does not lock
	// every new node out. It applies only to a node with no stored hash,
	// and only when Store.Create fails with an error other than
	// ErrExists. Ensure then answers nil, the password that was let in is
	// the only one accepted for that node until its hash is stored, and
	// the Verifier retries the Create in the background, one retry loop
	// per node, 5 s apart doubling up to 1 min, for at most
	// EnrollRetryFor; OnDeferredEnrollment hears how it ended. At most
	// MaxQueue nodes wait this way at once; past that, enrollments fail
	// closed. Off by default: a node let in this way has proven nothing
	// but that it knows its own password's hash was not stored yet.
	EnrollFailOpen bool

	// EnrollRetryFor bounds the background retries of an enrollment let
	// in by EnrollFailOpen. Default 10 min.
	EnrollRetryFor time.Duration

	// OnDeferredEnrollment, if not nil, is called once for each enrollment
	// that EnrollFailOpen let in, from the goroutine retrying it: with nil
	// once its hash is stored; with an error wrapping
	// ErrMismatchedHashAndPassword when another hash was stored for the
	// node meanwhile (from then on the node is verified against that
	// hash); or with the last store error when the retries ran out or the
	// Verifier was closed (the node's next request enrolls it anew).
	OnDeferredEnrollment func(node string, err error)

	// DigestKey, if not nil, turns on remembered verification: after each
	// scrypt match the Verifier records, through a Store that implements
	// DigestStore, the digest HMAC-SHA256(DigestKey, node, stored hash,
	// password), and a later request whose password gives the digest
	// remembered for its node and stored hash is a match without scrypt,
	// in any process that shares the store and the key: after a restart,
	// on another server, hours later. At least MinDigestKeyLen (32) bytes,
	// secret, the same on every server (derive it from a secret they all
	// hold; see the README). The key never leaves the process and no
	// password is stored. A remembered digest that does not match a
	// request never makes it fail: the request is computed after the
	// others, scrypt decides, and a match replaces the digest. Recording
	// is asynchronous, coalesced per node and bounded; its failures are
	// counted in Stats and cost a later request one scrypt. nil (the
	// default) leaves the feature off.
	DigestKey []byte

	// Cache configures the verified-tuple cache; nil means its defaults
	// (matches kept until evicted by count, mismatches 1 min).
	Cache *cache.Options

	// Observer, if not nil, is told how long each scrypt computation took
	// and how long each waited for a slot, e.g. to fill histograms.
	Observer Observer
}

// Observer receives timings from a Verifier. Its methods are called from
// the goroutines doing the work, so they must be safe for concurrent use
// and return quickly.
//
// ctx is the computation's own context: detached from the callers (it is
// not cancelled when they leave), it carries the values and pprof labels
// of the request that started the computation, with [ProfileLabel] set to
// [ProfileScrypt]. An observer can therefore tell whose request a
// computation served, e.g. to attach exemplars or to attribute it.
type Observer interface {
	// ObserveScrypt is called after each scrypt computation (verification
	// or enrollment) with its duration.
	ObserveScrypt(ctx context.Context, d time.Duration)
	// ObserveQueueWait is called when a computation gets a slot, with how
	// long it waited in the queue.
	ObserveQueueWait(ctx context.Context, d time.Duration)
}

// resolve validates o and fills in defaults.
func (o *Options) resolve() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Scrypt.key() == nil {
		return r, fmt.Errorf("verify: Options.Scrypt: unknown %v", r.Scrypt)
	}
	if r.Params == (Params{}) {
		r.Params = DefaultParams
	}
	if err := r.Params.validate(r.Limits); err != nil {
		return r, fmt.Errorf("verify: Options.Params: %w", err)
	}
	if r.Limits.MaxMemory < 0 || r.Limits.MaxWork < 0 {
		return r, fmt.Errorf("verify: Options.Limits: negative limit")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxPasswordLen", int64(r.MaxPasswordLen)},
		{"MaxConcurrent", int64(r.MaxConcurrent)},
		{"MaxWait", int64(r.MaxWait)},
		{"AgentRetryDelay", int64(r.AgentRetryDelay)},
		{"MaxQueue", int64(r.MaxQueue)},
		{"WorkTimeout", int64(r.WorkTimeout)},
		{"MaxQueuedPerNode", int64(r.MaxQueuedPerNode)},
		{"EnrollRetryFor", int64(r.EnrollRetryFor)},
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
	if r.MaxPasswordLen == 0 {
		r.MaxPasswordLen = DefaultMaxPasswordLen
	}
	if r.MaxConcurrent == 0 {
		r.MaxConcurrent = runtime.GOMAXPROCS(0)
	}
	if r.MaxWait == 0 {
		r.MaxWait = DefaultMaxWait
	}
	if r.AgentRetryDelay == 0 {
		r.AgentRetryDelay = DefaultAgentRetryDelay
	}
	if r.MaxQueue == 0 {
		r.MaxQueue = DefaultMaxQueue
	}
	if r.WorkTimeout == 0 {
		r.WorkTimeout = DefaultWorkTimeout
	}
	if r.MaxQueuedPerNode == 0 {
		r.MaxQueuedPerNode = DefaultMaxQueuedPerNode
	}
	if r.EnrollRetryFor == 0 {
		r.EnrollRetryFor = DefaultEnrollRetryFor
	}
	if r.MaxFailDelay == 0 {
		r.MaxFailDelay = DefaultMaxFailDelay
	}
	return r, nil
}
