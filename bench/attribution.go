package bench

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// kind says whose password a request or a computation carries.
type kind uint8

const (
	kindGuess     kind = iota // anything but a node's own or its duplicate's
	kindHonest                // the node's own password
	kindDuplicate             // the password of the node's duplicate
)

// who is the agent a password belongs to.
type who struct {
	kind kind
	node int // the index of the node whose name it carries
	dup  int // the duplicate's index, for kindDuplicate
}

// tracker attributes every scrypt computation of a run to the password it
// checks, and checks each answer: a wrong password let in, an honest one
// turned away, an injected store fault answered to a request that did not
// meet it. See AttackResult for how computations are attributed.
//
// It is safe for concurrent use. A nil *tracker wraps nothing.
type tracker struct {
	nodes []Node
	index map[string]int // node name -> its index in nodes
	dupOf map[string]int // node name -> its duplicate's index
	dups  []Node
	start time.Time

	honestRuns, guessRuns, dupRuns, unattributed atomic.Uint64
	dupAfter                                     atomic.Uint64
	dupRunsBy                                    []atomic.Uint64
	dupRejected                                  []atomic.Bool
	// verifiedAt[server][node] is when that server first knew the node's
	// own password (its computation ended with a match, or the server let
	// the node in), since start; 0 until then.
	verifiedAt [][]atomic.Int64

	wrongAccepts, honestRejected atomic.Uint64
	faultAnswers, cachedErrors   atomic.Uint64

	// A nodepass computation runs in a goroutine started by the request
	// that queued it; it is observed by that goroutine's ID. The ID of a
	// request's goroutine is looked up (runtime.Stack, microseconds) only
	// when its answer says a computation may be involved, when the request
	// returns: computations observed before are claimed then, those still
	// to come are matched when observed.
	mu      sync.Mutex
	waiting map[uint64]pending // goroutine ID -> request gone, its computation to come
	orphans map[uint64][]span  // goroutine ID -> computations observed, not yet claimed
	guesses []guessRun         // every guess computation
}

// span is when a computation ran, since the tracker was made; end is 0
// when not known.
type span struct{ start, end time.Duration }

// guessRun is one computation over a guess.
type guessRun struct {
	server, node int
	start        time.Duration
}

// pending is a request that may have left a computation behind.
type pending struct {
	who    who
	server int
}

func newTracker(nodes, dups []Node, servers int) *tracker {
	t := &tracker{
		nodes:       nodes,
		index:       make(map[string]int, len(nodes)),
		dupOf:       make(map[string]int, len(dups)),
		dups:        dups,
		start:       time.Now(),
		dupRunsBy:   make([]atomic.Uint64, len(dups)),
		dupRejected: make([]atomic.Bool, len(dups)),
		verifiedAt:  make([][]atomic.Int64, servers),
		waiting:     make(map[uint64]pending),
		orphans:     make(map[uint64][]span),
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

// rejected records that duplicate d got a 403.
func (t *tracker) rejected(d int) { t.dupRejected[d].Store(true) }

// since is the time since the tracker was made, at least 1 ns.
func (t *tracker) since() time.Duration { return max(time.Since(t.start), 1) }

// count attributes to w one computation on server that ran during r.
func (t *tracker) count(w who, server int, r span) {
	switch w.kind {
	case kindHonest:
		t.honestRuns.Add(1)
		if r.end > 0 {
			t.verified(server, w.node, r.end)
		}
	case kindDuplicate:
		t.dupRuns.Add(1)
		t.dupRunsBy[w.dup].Add(1)
		if t.dupRejected[w.dup].Load() {
			t.dupAfter.Add(1)
		}
	default:
		t.guessRuns.Add(1)
		if w.node >= 0 {
			t.mu.Lock()
			t.guesses = append(t.guesses, guessRun{server: server, node: w.node, start: r.start})
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

// observer returns the observer of server's computations, or nil.
func (t *tracker) observer(server int) *serverObserver {
	if t == nil {
		return nil
	}
	return &serverObserver{t: t, server: server}
}

// observeTuple is a k3s model's report of a computation over password,
// as it starts.
func (o *serverObserver) observeTuple(node, password string) {
	o.t.count(o.t.classify(node, password), o.server, span{start: o.t.since()})
}

// ObserveScrypt is a nodepass server's report (verify.Observer) of a
// computation that took d, from the goroutine that ran it.
func (o *serverObserver) ObserveScrypt(_ context.Context, d time.Duration) {
	t := o.t
	end := t.since()
	r := span{start: end - d, end: end}
	id, ok := creatorID()
	if !ok {
		t.unattributed.Add(1)
		return
	}
	t.mu.Lock()
	p, found := t.waiting[id]
	if found {
		delete(t.waiting, id)
	} else {
		t.orphans[id] = append(t.orphans[id], r)
	}
	t.mu.Unlock()
	if found {
		t.count(p.who, p.server, r)
	}
}

// ObserveQueueWait is part of verify.Observer.
func (o *serverObserver) ObserveQueueWait(context.Context, time.Duration) {}

// claim attributes to w the computations started by the calling
// goroutine on server, and those it will be found to have started, when
// err says its computation may still be to come.
func (t *tracker) claim(w who, server int, err error) {
	id, ok := goroutineID()
	if !ok {
		return
	}
	var oe *verify.OverloadError
	later := errors.As(err, &oe) && oe.Queued ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	t.mu.Lock()
	runs := t.orphans[id]
	delete(t.orphans, id)
	if later {
		t.waiting[id] = pending{who: w, server: server}
	}
	t.mu.Unlock()
	for _, r := range runs {
		t.count(w, server, r)
	}
}

// scryptFigures fills a's computation counts.
func (t *tracker) scryptFigures(a *AttackResult) {
	t.mu.Lock()
	var orphans uint64
	for _, runs := range t.orphans {
		orphans += uint64(len(runs))
	}
	for _, g := range t.guesses {
		if at := t.verifiedAt[g.server][g.node].Load(); at > 0 && time.Duration(at) < g.start {
			a.GuessScryptKnown++
		}
	}
	t.mu.Unlock()
	a.HonestScrypt = t.honestRuns.Load()
	a.GuessScrypt = t.guessRuns.Load()
	a.DuplicateScrypt = t.dupRuns.Load()
	a.DuplicateScryptAfterReject = t.dupAfter.Load()
	for i := range t.dupRunsBy {
		a.DuplicateScryptMax = max(a.DuplicateScryptMax, t.dupRunsBy[i].Load())
	}
	a.UnattributedScrypt = t.unattributed.Load() + orphans
	a.WrongAccepts = t.wrongAccepts.Load()
	a.HonestRejected = t.honestRejected.Load()
}

// wrap returns server's model m with every request checked and, for a
// model that computes in goroutines of its own (nodepass), its
// computations attributed.
func (t *tracker) wrap(m model, server int) model {
	if t == nil {
		return m
	}
	_, flights := m.(nodepassModel)
	return trackedModel{model: m, t: t, server: server, flights: flights}
}

// trackedModel is a model whose requests a tracker checks.
type trackedModel struct {
	model
	t       *tracker
	server  int
	flights bool // the model computes in goroutines started by requests
}

// request is what the store learns of the request it serves.
type request struct{ faulted atomic.Bool }

type requestKey struct{}

// requestOf returns the request ctx carries, or nil.
func requestOf(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

func (m trackedModel) Ensure(ctx context.Context, node, password string) error {
	w := m.t.classify(node, password)
	req := new(request)
	err := m.model.Ensure(context.WithValue(ctx, requestKey{}, req), node, password)
	if m.flights && mayCompute(err) {
		m.t.claim(w, m.server, err)
	}
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

// mayCompute reports whether a nodepass answer may involve a computation
// started by the request: all but a refusal before queueing and bad input.
func mayCompute(err error) bool {
	var oe *verify.OverloadError
	return !(errors.As(err, &oe) && !oe.Queued) && !errors.Is(err, verify.ErrInvalidInput)
}

// goroutineID returns the calling goroutine's ID, from the first line of
// its stack trace: "goroutine 123 [running]:".
func goroutineID() (uint64, bool) {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	s, ok := bytes.CutPrefix(s, []byte("goroutine "))
	if !ok {
		return 0, false
	}
	return leadingUint(s)
}

// creatorID returns the ID of the goroutine that started the calling one,
// from the last line of its stack trace: "created by f in goroutine 123".
func creatorID() (uint64, bool) {
	buf := make([]byte, 16<<10)
	s := buf[:runtime.Stack(buf, false)]
	i := bytes.LastIndex(s, []byte("\ncreated by "))
	if i < 0 {
		return 0, false
	}
	line := s[i+1:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	_, after, ok := bytes.Cut(line, []byte(" in goroutine "))
	if !ok {
		return 0, false
	}
	return leadingUint(after)
}

// leadingUint parses the decimal digits at the start of s.
func leadingUint(s []byte) (uint64, bool) {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	id, err := strconv.ParseUint(string(s[:n]), 10, 64)
	return id, err == nil
}
