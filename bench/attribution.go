package bench

import (
	"context"
	"errors"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// kind says whose password a request or a computation carries.
type kind uint8

const (
	kindGuess      kind = iota // anything but a node's own or its duplicate's
	kindHonest                 // the node's own password
	kindDuplicate              // the password of the node's duplicate
	kindToken                  // the join token
	kindTokenGuess             // a wrong join token
)

var kindNames = [...]string{kindGuess: "guess", kindHonest: "honest", kindDuplicate: "duplicate",
	kindToken: "token", kindTokenGuess: "token-guess"}

func (k kind) String() string { return kindNames[k] }

// The pprof labels every request of a run reaches its server under,
// saying whose password it carries. The server's work runs under them,
// and so does every scrypt computation the request starts: verify runs it
// under the labels of the request that started it and gives its Observer
// that context. A CPU profile splits the scrypt work by them too (go tool
// pprof -tagfocus=nodepass.bench.password=guess).
const (
	// PasswordLabel is a kind's name: "honest", "guess", "duplicate",
	// "token" or "token-guess".
	PasswordLabel = "nodepass.bench.password"
	// NodeLabel is the index in the herd of the node whose name the
	// request carries, DuplicateLabel the duplicate's.
	NodeLabel      = "nodepass.bench.node"
	DuplicateLabel = "nodepass.bench.duplicate"
)

// who is the agent a password belongs to.
type who struct {
	kind kind
	node int // the index of the node whose name it carries, or -1
	dup  int // the duplicate's index, for kindDuplicate
}

// labels returns w as pprof labels: its kind, and the indexes it has.
func (w who) labels() pprof.LabelSet {
	args := []string{PasswordLabel, w.kind.String()}
	if w.node >= 0 {
		args = append(args, NodeLabel, strconv.Itoa(w.node))
	}
	if w.kind == kindDuplicate {
		args = append(args, DuplicateLabel, strconv.Itoa(w.dup))
	}
	return pprof.Labels(args...)
}

// scryptLabelSet is the label verify runs its scrypt computations under.
var scryptLabelSet = pprof.Labels(verify.ProfileLabel, verify.ProfileScrypt)

// labelScrypt runs fn, one scrypt computation made by bench itself (a k3s
// model's, the lower bound's), under the label verify gives its own,
// merged with ctx's labels: a CPU profile finds every model's scrypt work
// by the same label.
func labelScrypt(ctx context.Context, fn func() error) (err error) {
	pprof.Do(ctx, scryptLabelSet, func(context.Context) { err = fn() })
	return err
}

// tracker attributes every scrypt computation of a run to the password it
// checks, by the labels of its context (a k3s model reports each as it
// starts, a nodepass Verifier as it ends), and checks each answer: a
// wrong password let in, an honest one turned away, a store fault
// answered to a request that did not meet it. It is safe for concurrent
// use.
type tracker struct {
	nodes []Node
	index map[string]int // node name -> its index in nodes
	dupOf map[string]int // node name -> its duplicate's index
	dups  []Node
	token string // the join token's password
	start time.Time

	runs         [len(kindNames)]atomic.Uint64 // computations by kind
	unattributed atomic.Uint64
	dupAfter     atomic.Uint64   // over a duplicate's password after its first 403
	dupRunsBy    []atomic.Uint64 // by duplicate
	dupRejected  []atomic.Bool
	// verifiedAt[server][node] is when that server first knew the node's
	// own password (its computation ended with a match, or it let the
	// node in), since start; 0 until then, 1 from before the run.
	verifiedAt [][]atomic.Int64
	// reachedAt[node] is when the node's first request with its own
	// password reached a server's model, since start; 0 until then.
	reachedAt []atomic.Int64

	wrongAccepts, honestRejected atomic.Uint64
	faultAnswers, cachedErrors   atomic.Uint64

	mu      sync.Mutex
	guesses []guessRun // every guess computation for a node's name

	frozen *ScryptCounts // the computation counts at finish (freeze)
}

// guessRun is one computation over a guess, started at start.
type guessRun struct {
	server, node int
	start        time.Duration
}

func newTracker(nodes, dups []Node, servers int, token string) *tracker {
	t := &tracker{
		nodes: nodes, dups: dups, token: token, start: time.Now(),
		index:       make(map[string]int, len(nodes)),
		dupOf:       make(map[string]int, len(dups)),
		dupRunsBy:   make([]atomic.Uint64, len(dups)),
		dupRejected: make([]atomic.Bool, len(dups)),
		verifiedAt:  make([][]atomic.Int64, servers),
		reachedAt:   make([]atomic.Int64, len(nodes)),
	}
	for i, n := range nodes {
		t.index[n.Name] = i
	}
	for d, n := range dups {
		t.dupOf[n.Name] = d
	}
	for s := range t.verifiedAt {
		t.verifiedAt[s] = make([]atomic.Int64, len(nodes))
	}
	return t
}

// classify says whose password password is, for node.
func (t *tracker) classify(node, password string) who {
	i, ok := t.index[node]
	switch {
	case !ok:
		return who{kind: kindGuess, node: -1}
	case t.nodes[i].Password == password:
		return who{kind: kindHonest, node: i}
	}
	if d, ok := t.dupOf[node]; ok && t.dups[d].Password == password {
		return who{kind: kindDuplicate, node: i, dup: d}
	}
	return who{kind: kindGuess, node: i}
}

// whoOf reads whose password a request carries from the labels ctx
// carries (see who.labels); ok is false when ctx has none, or labels this
// tracker did not make.
func (t *tracker) whoOf(ctx context.Context) (w who, ok bool) {
	name, _ := pprof.Label(ctx, PasswordLabel)
	// index is a label's index: -1 without the label, -2 for one out of range.
	index := func(key string, n int) int {
		v, found := pprof.Label(ctx, key)
		i, err := strconv.Atoi(v)
		switch {
		case !found:
			return -1
		case err != nil || i < 0 || i >= n:
			return -2
		}
		return i
	}
	w = who{kind: kind(slices.Index(kindNames[:], name)), node: index(NodeLabel, len(t.nodes)), dup: index(DuplicateLabel, len(t.dups))}
	switch w.kind {
	case kindHonest:
		return w, w.node >= 0
	case kindDuplicate:
		return w, w.node >= 0 && w.dup >= 0
	case kindGuess:
		return w, w.node >= -1
	case kindToken, kindTokenGuess:
		return who{kind: w.kind, node: -1}, true
	}
	return who{}, false
}

func (t *tracker) rejected(d int) { t.dupRejected[d].Store(true) }

// since is the time since the tracker was made, at least 1 ns.
func (t *tracker) since() time.Duration { return max(time.Since(t.start), 1) }

// countIn attributes one computation on server, which started at start
// and, if end is not 0, ended at end, to the agent ctx's labels name, or
// counts it unattributed.
func (t *tracker) countIn(ctx context.Context, server int, start, end time.Duration) {
	if l, _ := pprof.Label(ctx, PasswordLabel); l == warmupLabel || l == loadLabel {
		return // a reboot's warm-up or a server's start, not measured
	}
	w, ok := t.whoOf(ctx)
	if !ok {
		t.unattributed.Add(1)
		return
	}
	t.runs[w.kind].Add(1)
	switch w.kind {
	case kindHonest:
		if end > 0 {
			t.verified(server, w.node, end)
		}
	case kindDuplicate:
		t.dupRunsBy[w.dup].Add(1)
		if t.dupRejected[w.dup].Load() {
			t.dupAfter.Add(1)
		}
	case kindGuess:
		if w.node >= 0 {
			t.mu.Lock()
			t.guesses = append(t.guesses, guessRun{server: server, node: w.node, start: start})
			t.mu.Unlock()
		}
	}
}

// verified records that server knew node's own password at.
func (t *tracker) verified(server, node int, at time.Duration) {
	v := &t.verifiedAt[server][node]
	for {
		old := v.Load()
		if old != 0 && old <= int64(at) || v.CompareAndSwap(old, int64(at)) {
			return
		}
	}
}

// serverObserver is told of one server's computations.
type serverObserver struct {
	t      *tracker
	server int
}

func (t *tracker) observer(server int) *serverObserver { return &serverObserver{t, server} }

// started is a k3s model's report of a computation, as it starts, from
// the goroutine of the request that runs it.
func (o *serverObserver) started(ctx context.Context) {
	o.t.countIn(ctx, o.server, o.t.since(), 0)
}

// ObserveScrypt is a nodepass server's report (verify.Observer) of a
// computation that took d, as it ends. ctx is the computation's: it
// carries the labels of the request that started it.
func (o *serverObserver) ObserveScrypt(ctx context.Context, d time.Duration) {
	end := o.t.since()
	o.t.countIn(ctx, o.server, end-d, end)
}

// ObserveQueueWait is part of verify.Observer.
func (o *serverObserver) ObserveQueueWait(context.Context, time.Duration) {}

// freeze takes the computation counts, now: finish calls it right
// before it reads the servers' own counts. A model counts a computation
// before the tracker hears of it, so the servers' count, read after, is
// never below the attributed one, however many requests are under way.
func (t *tracker) freeze() {
	f := &ScryptCounts{
		HonestScrypt: t.runs[kindHonest].Load(), GuessScrypt: t.runs[kindGuess].Load(), DuplicateScrypt: t.runs[kindDuplicate].Load(),
		TokenScrypt: t.runs[kindToken].Load(), TokenGuessScrypt: t.runs[kindTokenGuess].Load(),
		DuplicateScryptAfterReject: t.dupAfter.Load(), UnattributedScrypt: t.unattributed.Load(),
	}
	t.mu.Lock()
	for _, g := range t.guesses {
		if at := t.verifiedAt[g.server][g.node].Load(); at > 0 && time.Duration(at) < g.start {
			f.GuessScryptKnown++
		}
	}
	t.mu.Unlock()
	for i := range t.dupRunsBy {
		f.DuplicateScryptMax = max(f.DuplicateScryptMax, t.dupRunsBy[i].Load())
	}
	t.frozen = f
}

// wrap returns server's model m with its requests labelled and its
// answers checked.
func (t *tracker) wrap(m model, server int) model { return trackedModel{m, t, server} }

// trackedModel is server's model, whose requests the tracker labels with
// whose password they carry, and whose answers it checks.
type trackedModel struct {
	model
	t      *tracker
	server int
}

// request is what the store learns of the request it serves.
type request struct{ faulted atomic.Bool }

type requestKey struct{}

// VerifyToken labels the request as the join token's or a wrong one's,
// and counts a wrong token let in.
func (m trackedModel) VerifyToken(ctx context.Context, user, password string) error {
	w := who{kind: kindTokenGuess, node: -1}
	if user == tokenUser && password == m.t.token {
		w.kind = kindToken
	}
	var err error
	pprof.Do(ctx, w.labels(), func(ctx context.Context) { err = m.model.VerifyToken(ctx, user, password) })
	if err == nil && w.kind == kindTokenGuess {
		m.t.wrongAccepts.Add(1)
	}
	return err
}

func (m trackedModel) Ensure(ctx context.Context, node, password string) error {
	w := m.t.classify(node, password)
	if w.kind == kindHonest {
		m.t.reachedAt[w.node].CompareAndSwap(0, int64(m.t.since()))
	}
	req := new(request)
	var err error
	pprof.Do(context.WithValue(ctx, requestKey{}, req), w.labels(), func(ctx context.Context) {
		err = m.model.Ensure(ctx, node, password)
	})
	switch {
	case err == nil && w.kind == kindHonest:
		m.t.verified(m.server, w.node, m.t.since())
	case err == nil:
		m.t.wrongAccepts.Add(1)
	case w.kind == kindHonest && errors.Is(err, verify.ErrMismatchedHashAndPassword):
		m.t.honestRejected.Add(1)
	case errors.Is(err, errStoreFault):
		m.t.faultAnswers.Add(1)
		if !req.faulted.Load() {
			// Not this request's own fault: it came from a cache.
			m.t.cachedErrors.Add(1)
		}
	}
	return err
}
