package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodepass/nodepass/cache"
	"github.com/nodepass/nodepass/scrypt"
)

const joinToken = "b2d6c3f1a9e04e7d8c5b4a3f2e1d0c9b"

// newTokenVerifier returns a test Verifier whose Options.Tokens knows the
// user "node" with joinToken, and the token store.
func newTokenVerifier(t *testing.T, nodes Store, opts *Options) (*Verifier, *MemoryStore) {
	t.Helper()
	tokens := NewMemoryStore()
	tokens.Set("node", mustHash(t, joinToken))
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Tokens = tokens
	if nodes == nil {
		nodes = NewMemoryStore()
	}
	return newTestVerifier(t, nodes, &o), tokens
}

// TestTokenOneScryptShared: concurrent first checks of the right token
// share one computation, later ones are cache hits, and once it is
// verified every other token for the user is refused without scrypt.
func TestTokenOneScryptShared(t *testing.T) {
	v, _ := newTokenVerifier(t, nil, nil)
	g := newGate()
	g.install(t, v)
	ctx := context.Background()
	const callers = 100
	errs := make(chan error, callers)
	for range callers {
		go func() { errs <- v.VerifyToken(ctx, "node", joinToken) }()
	}
	<-g.entered
	waitFor(t, "every caller to join the computation", func() bool { return v.Stats().Shared == callers-1 })
	g.open()
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		if err := v.VerifyToken(ctx, "node", joinToken); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		if err := v.VerifyToken(ctx, "node", fmt.Sprint("guess-", i)); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("wrong token: %v, want a mismatch", err)
		}
	}
	st := v.Stats()
	if st.ScryptRuns != 1 || st.CacheHits != 100 || st.KnownMatchRejects != 50 {
		t.Fatalf("stats %+v: want 1 scrypt run, 100 cache hits, 50 known-match rejects", st)
	}
}

// TestTokenErrors: what VerifyToken refuses, and with which error.
func TestTokenErrors(t *testing.T) {
	v, tokens := newTokenVerifier(t, nil, nil)
	ctx := context.Background()
	for _, c := range []struct {
		user, password string
		want           error
	}{
		{"", joinToken, ErrInvalidInput},
		{"node", "", ErrInvalidInput},
		{"no\x00de", joinToken, ErrInvalidInput},
		{"no\nde", joinToken, ErrInvalidInput},
		{strings.Repeat("u", maxUserLen+1), joinToken, ErrInvalidInput},
		{"node", strings.Repeat("p", defaultMaxPasswordLen+1), ErrInvalidInput},
		{"\xff", joinToken, ErrInvalidInput},
		{"Node", joinToken, ErrNotFound}, // users are case-sensitive, as in k3s
		{"server", joinToken, ErrNotFound},
		{"node", "wrong", ErrMismatchedHashAndPassword},
	} {
		err := v.VerifyToken(ctx, c.user, c.password)
		if !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), "verify: ") {
			t.Errorf("VerifyToken(%q, %q) = %v, want %v", c.user, c.password, err, c.want)
		}
	}
	tokens.Set("broken", "$1:zz:15:8:1:abc")
	if err := v.VerifyToken(ctx, "broken", joinToken); !errors.Is(err, ErrInvalidHash) || !strings.Contains(err.Error(), `token user "broken"`) {
		t.Errorf("corrupt token hash: %v", err)
	}
	if st := v.Stats(); st.ScryptRuns != 1 {
		t.Errorf("stats %+v: want the one wrong token computed", st)
	}
	plain := newTestVerifier(t, NewMemoryStore(), nil)
	if err := plain.VerifyToken(ctx, "node", joinToken); !errors.Is(err, ErrNotFound) {
		t.Errorf("no Options.Tokens: %v, want ErrNotFound", err)
	}
}

// TestTokenApartFromNodes: a node named like a token user shares nothing
// with it: not its cache entries, not its verified password.
func TestTokenApartFromNodes(t *testing.T) {
	nodes := NewMemoryStore()
	nodes.Set("node", mustHash(t, "node-password"))
	v, tokens := newTokenVerifier(t, nodes, nil)
	ctx := context.Background()
	if err := v.Verify(ctx, "node", "node-password"); err != nil {
		t.Fatal(err)
	}
	if err := v.VerifyToken(ctx, "node", "node-password"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatalf("a node's password as the token: %v", err)
	}
	if err := v.VerifyToken(ctx, "node", joinToken); err != nil {
		t.Fatalf("the token after a mismatch: %v", err)
	}
	// One stored hash under both: still two names, two computations.
	h, _ := tokens.Get(ctx, "node")
	nodes.Set("node", h)
	if err := v.Verify(ctx, "node", joinToken); err != nil {
		t.Fatal(err)
	}
	if st := v.Stats(); st.ScryptRuns != 4 {
		t.Fatalf("stats %+v: want 4 computations", st)
	}
}

// TestTokenAllocations: a token check answered from the cache allocates
// nothing, as a node's does.
func TestTokenAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	v, _ := newTokenVerifier(t, nil, nil)
	ctx := context.Background()
	if err := v.VerifyToken(ctx, "node", joinToken); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := v.VerifyToken(ctx, "node", joinToken); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("a cached token check allocates %v times", n)
	}
}

// TestTokenGuessersQueueFairly: wrong tokens queued before the right one
// was verified take the user's share of the queue, not the nodes': a
// rebooted node asking behind 50 queued guesses on one slot is computed
// in the first batch after the slot frees, and the guesses beyond the
// user's places wait.
func TestTokenGuessersQueueFairly(t *testing.T) {
	nodes := NewMemoryStore()
	nodes.Set("rebooted-node", mustHash(t, "node-password"))
	v, _ := newTokenVerifier(t, nodes, &Options{MaxConcurrent: 1})
	var mu sync.Mutex
	var batches [][]string // the passwords of each batch, in order
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	derive := v.derive
	v.derive = func(keys []scrypt.Job, lanes int) {
		var pws []string
		for _, k := range keys {
			pws = append(pws, string(k.Password))
		}
		mu.Lock()
		batches = append(batches, pws)
		first := len(batches) == 1
		mu.Unlock()
		if first {
			entered <- struct{}{}
			<-release
		}
		derive(keys, lanes)
	}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	guess := func(i int) {
		defer wg.Done()
		v.VerifyToken(ctx, "node", fmt.Sprint("guess-", i))
	}
	wg.Add(1)
	go guess(0)
	<-entered // the first guess holds the slot
	for i := 1; i < 50; i++ {
		wg.Add(1)
		go guess(i)
	}
	waitFor(t, "the guesses to queue", func() bool {
		_, waiting := v.sched.Load()
		return waiting == 49
	})
	enrolled := make(chan error, 1)
	go func() { enrolled <- v.Verify(context.Background(), "rebooted-node", "node-password") }()
	waitFor(t, "the node to queue", func() bool {
		_, waiting := v.sched.Load()
		return waiting == 50
	})
	close(release)
	if err := <-enrolled; err != nil {
		t.Fatal(err)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	at := -1
	for i, b := range batches {
		for _, pw := range b {
			if pw == "node-password" {
				at = i
			}
		}
	}
	if at < 0 || at > 1 {
		t.Fatalf("the node was hashed in batch %d of %v; want the first after the slot freed", at, batches)
	}
}

// TestLoadTokens: a passwd file's tokens, hashed once each at load and
// known as verified: checking them costs no scrypt.
func TestLoadTokens(t *testing.T) {
	const file = "tok1,node,node,k3s:agent\n" +
		"tok2,server,server,\"k3s:server,system:masters\"\n"
	v := newTestVerifier(t, NewMemoryStore(), nil)
	if err := v.LoadTokens(context.Background(), strings.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	if st := v.Stats(); st.ScryptRuns != 2 {
		t.Fatalf("stats %+v after loading two tokens, want 2 scrypt runs", st)
	}
	ctx := context.Background()
	for range 3 {
		for user, tok := range map[string]string{"node": "tok1", "server": "tok2"} {
			if err := v.VerifyToken(ctx, user, tok); err != nil {
				t.Errorf("%s: %v", user, err)
			}
		}
	}
	if err := v.VerifyToken(ctx, "node", "tok2"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Errorf("another user's token: %v", err)
	}
	if st := v.Stats(); st.ScryptRuns != 2 || st.KnownMatchRejects != 1 {
		t.Fatalf("stats %+v: want no scrypt after the load", st)
	}
	h, _ := v.tokens().Get(ctx, "node")
	if strings.Contains(h, "tok1") || !strings.HasPrefix(h, "$1:") {
		t.Errorf("stored %q: want a hash, not the token", h)
	}
	// A bad file loads nothing: the tokens before stay.
	if err := v.LoadTokens(context.Background(), strings.NewReader("new,node,node\nbad\n")); err == nil {
		t.Fatal("a bad file loaded")
	}
	if err := v.VerifyToken(ctx, "node", "tok1"); err != nil {
		t.Errorf("the tokens loaded before a bad file: %v", err)
	}
	// A good one replaces them.
	if err := v.LoadTokens(context.Background(), strings.NewReader("new,node,node\n")); err != nil {
		t.Fatal(err)
	}
	if err := v.VerifyToken(ctx, "server", "tok2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a user of the replaced file: %v", err)
	}
	withStore := newTestVerifier(t, NewMemoryStore(), &Options{Tokens: NewMemoryStore()})
	if err := withStore.LoadTokens(context.Background(), strings.NewReader("a,b,c\n")); err == nil {
		t.Error("LoadTokens with Options.Tokens set succeeded")
	}
}

func TestLoadTokensErrors(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"two fields", "tok1,node,node\ntok2,server\n", "line 2: 2 fields"},
		{"empty password", "tok1,node,node\n,server,server\n", "line 2: verify: invalid input: empty token"},
		{"empty user", ",,x\n", "line 1: verify: invalid input: empty token user"},
		{"control character", "tok,no\x01de,uid\n", "line 1: verify: invalid input: token user contains control character"},
		{"duplicate", "a,node,1\nb,node,2\n", `line 2: user "node" was given on line 1`},
		{"bad quote", "tok1,node,node\n\"unterminated,x,y\n", "line 2"},
		{"empty", "", "holds no token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newTestVerifier(t, NewMemoryStore(), nil)
			err := v.LoadTokens(context.Background(), strings.NewReader(c.file))
			if err == nil {
				t.Fatal("LoadTokens succeeded")
			}
			if !strings.HasPrefix(err.Error(), "verify: token file") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to contain %q", err, c.want)
			}
			if v.tokens() != nil || v.Stats().ScryptRuns != 0 {
				t.Fatalf("a bad file hashed or loaded something: %+v", v.Stats())
			}
		})
	}
}

// TestTokenGuessesStayDelayed: the agents' matches do not reset the
// failure delay of their shared user, so a guesser keeps meeting it
// while the herd joins.
func TestTokenGuessesStayDelayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v, _ := newTokenVerifier(t, nil, &Options{MaxFailDelay: 500 * time.Millisecond})
		ctx := context.Background()
		guess := func(i int) time.Duration {
			start := time.Now()
			if err := v.VerifyToken(ctx, "node", fmt.Sprint("guess-", i)); !errors.Is(err, ErrMismatchedHashAndPassword) {
				t.Fatalf("guess %d: %v", i, err)
			}
			return time.Since(start)
		}
		guess(0)
		guess(1) // 100 ms
		for range 5 {
			if err := v.VerifyToken(ctx, "node", joinToken); err != nil {
				t.Fatal(err)
			}
		}
		if d := guess(2); d != 200*time.Millisecond {
			t.Fatalf("a guess after the agents' matches delayed %v, want 200ms: the matches reset the count", d)
		}
		v.Close()
	})
}

// TestTokenKeepsKnownRejects: the token in constant use keeps its record
// as the user's verified password while many more other matches than
// Cache.MatchSize come (node joins), so a wrong token still costs no
// scrypt, and a variant of the token (see TestTokenVariantsOneToken)
// still gets in.
func TestTokenKeepsKnownRejects(t *testing.T) {
	for _, load := range []bool{false, true} {
		opts := &Options{Cache: &cache.Options{MatchSize: 8}}
		var v *Verifier
		if load {
			v = newTestVerifier(t, NewMemoryStore(), opts)
			if err := v.LoadTokens(context.Background(), strings.NewReader(joinToken+",node,node\n")); err != nil {
				t.Fatal(err)
			}
		} else {
			v, _ = newTokenVerifier(t, nil, opts)
		}
		ctx := context.Background()
		for i := range 40 {
			if err := v.VerifyToken(ctx, "node", joinToken); err != nil {
				t.Fatal(err)
			}
			if err := v.Ensure(ctx, fmt.Sprint("node-", i), "node-password"); err != nil {
				t.Fatal(err)
			}
		}
		runs := v.Stats().ScryptRuns
		if err := v.VerifyToken(ctx, "node", "guess"); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("load %v: wrong token: %v", load, err)
		}
		if st := v.Stats(); st.ScryptRuns != runs || st.KnownMatchRejects != 1 {
			t.Fatalf("load %v: stats %+v: want the wrong token refused without scrypt", load, st)
		}
		if err := v.VerifyToken(ctx, "node", joinToken+"\x00"); err != nil {
			t.Fatalf("load %v: the token's variant: %v", load, err)
		}
	}
}
