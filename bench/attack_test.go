package bench

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// adversityScenario is a small in-process herd at testLogN with retries
// scaled down and timeouts long enough for a starved machine.
func adversityScenario() Scenario {
	return Scenario{Nodes: 30, LogN: testLogN, TimeScale: 0.05,
		ClientTimeout: 100 * time.Second, Deadline: 40 * time.Minute}
}

// TestAttackersNeverAccepted runs attackers of both kinds against every
// model: no guess may get in, every computation is attributed, and the
// nodes still join.
func TestAttackersNeverAccepted(t *testing.T) {
	h := testHerd(t)
	for _, names := range []AttackNames{AttackSticky, AttackRandom} {
		for _, model := range Models() {
			t.Run(string(names)+"/"+model, func(t *testing.T) {
				sc := adversityScenario()
				sc.Attackers, sc.AttackNames = 6, names
				res, err := Run(t.Context(), sc, h, model)
				if err != nil {
					t.Fatal(err)
				}
				a := res.Attack
				if a == nil || a.Attackers != 6 || a.AttackNames != names {
					t.Fatalf("attack figures %+v", a)
				}
				if a.Accepted() != 0 || a.HonestRejected != 0 {
					t.Errorf("accepted %d guesses (servers: %d), rejected %d honest passwords", a.GuessesAccepted, a.WrongAccepts, a.HonestRejected)
				}
				if res.Joined != 30 || res.Stopped != "" {
					t.Errorf("joined %d, stopped %q", res.Joined, res.Stopped)
				}
				if a.Guesses == 0 || a.GuessesRejected+a.GuessesShed > a.Guesses {
					t.Errorf("guesses %d, rejected %d, shed %d", a.Guesses, a.GuessesRejected, a.GuessesShed)
				}
				checkAttribution(t, res, 30)
			})
		}
	}
}

// TestTokenGuessersNeverAccepted runs join-token guessers against every
// model, in one process (checkTokenGuessers says what holds).
func TestTokenGuessersNeverAccepted(t *testing.T) {
	h := testHerd(t)
	for _, model := range Models() {
		t.Run(model, func(t *testing.T) {
			sc := adversityScenario()
			sc.TokenGuessers = 6
			res, err := Run(t.Context(), sc, h, model)
			if err != nil {
				t.Fatal(err)
			}
			checkTokenGuessers(t, res, model, 6, 30)
		})
	}
}

// checkTokenGuessers checks a run of nodes honest agents beside guessers
// join-token guessers against model: no wrong token got in, every node
// joined, and the tokens computed are the model's: none for nodepass
// (it knows the token from its load) and k3s-v1.25 (which compares the
// plaintext), one per request for the others, checked before anything
// else (the caps too).
func checkTokenGuessers(t *testing.T, res *Result, model string, guessers, nodes int) {
	t.Helper()
	a := res.Attack
	if a == nil || a.TokenGuessers != guessers || a.TokenGuesses == 0 {
		t.Fatalf("attack figures %+v", a)
	}
	if a.Accepted() != 0 || a.TokenGuessesAccepted != 0 || a.TokenGuessesRejected+a.TokenGuessesShed > a.TokenGuesses {
		t.Errorf("token guesses %d: accepted %d (servers: %d), rejected %d, shed %d",
			a.TokenGuesses, a.TokenGuessesAccepted, a.WrongAccepts, a.TokenGuessesRejected, a.TokenGuessesShed)
	}
	if res.Joined != nodes || res.Stopped != "" {
		t.Errorf("joined %d, stopped %q", res.Joined, res.Stopped)
	}
	switch model {
	case ModelNodepass, ModelK3s125:
		if a.TokenGuessScrypt != 0 || a.TokenScrypt != 0 {
			t.Errorf("%s computed %d guessed and %d right tokens, want none", model, a.TokenGuessScrypt, a.TokenScrypt)
		}
	default:
		answered := a.TokenGuessesRejected + a.TokenGuessesShed
		if a.TokenGuessScrypt < answered || a.TokenGuessScrypt > answered+uint64(guessers) || a.TokenScrypt < 7*uint64(nodes) {
			t.Errorf("%s computed %d guessed tokens for %d answered (%d may be in flight), %d right ones",
				model, a.TokenGuessScrypt, answered, guessers, a.TokenScrypt)
		}
	}
	checkAttribution(t, res, uint64(nodes))
	if res.TokenScryptRuns != a.TokenScrypt+a.TokenGuessScrypt {
		t.Errorf("Result.TokenScryptRuns %d, attributed %d + %d", res.TokenScryptRuns, a.TokenScrypt, a.TokenGuessScrypt)
	}
}

// checkAttribution checks that the computations attributed add up to
// those the servers counted, honest ones included.
func checkAttribution(t *testing.T, res *Result, honest uint64) {
	t.Helper()
	a := res.Attack
	sum := a.HonestScrypt + a.GuessScrypt + a.DuplicateScrypt + a.TokenScrypt + a.TokenGuessScrypt + a.UnattributedScrypt + a.UnfinishedScrypt
	if sum != res.ScryptRuns {
		t.Errorf("attributed %d honest + %d guesses + %d duplicates + %d tokens + %d token guesses + %d unattributed + %d unfinished = %d, servers counted %d",
			a.HonestScrypt, a.GuessScrypt, a.DuplicateScrypt, a.TokenScrypt, a.TokenGuessScrypt, a.UnattributedScrypt, a.UnfinishedScrypt, sum, res.ScryptRuns)
	}
	// Every computation carries its request's labels.
	if a.UnattributedScrypt != 0 {
		t.Errorf("%d unattributed computations", a.UnattributedScrypt)
	}
	// A run that ends may leave a few computations still running, whose
	// client has left; never more than one per slot.
	if a.UnfinishedScrypt > uint64(2*runtime.GOMAXPROCS(0)) {
		t.Errorf("%d unfinished computations", a.UnfinishedScrypt)
	}
	if a.HonestScrypt < honest {
		t.Errorf("%d honest computations for %d nodes that joined", a.HonestScrypt, honest)
	}
	if res.Model == ModelNodepass && a.GuessScryptKnown > a.GuessScrypt {
		t.Errorf("%d guess computations after the join, of %d", a.GuessScryptKnown, a.GuessScrypt)
	}
}

// TestDuplicatesNeverJoin runs duplicate hostnames against every model:
// the run completes on the honest nodes, no duplicate gets in, and under
// nodepass a duplicate costs at most one computation.
func TestDuplicatesNeverJoin(t *testing.T) {
	h := testHerd(t)
	for _, model := range Models() {
		t.Run(model, func(t *testing.T) {
			sc := adversityScenario()
			sc.Duplicates = 5
			res, err := Run(t.Context(), sc, h, model)
			if err != nil {
				t.Fatal(err)
			}
			a := res.Attack
			if res.Joined != 30 || res.Stopped != "" {
				t.Fatalf("joined %d, stopped %q", res.Joined, res.Stopped)
			}
			if a.Duplicates != 5 || a.DuplicateRequests < 5 || a.Accepted() != 0 {
				t.Errorf("duplicates %d, requests %d, accepted %d (servers %d)", a.Duplicates, a.DuplicateRequests, a.DuplicatesAccepted, a.WrongAccepts)
			}
			if a.Guesses != 0 || a.GuessScrypt != 0 {
				t.Errorf("%d guesses, %d guess computations without attackers", a.Guesses, a.GuessScrypt)
			}
			if model == ModelNodepass && (a.DuplicateScryptMax > 1 || a.DuplicateScryptAfterReject != 0) {
				t.Errorf("nodepass: up to %d computations per duplicate, %d after a 403", a.DuplicateScryptMax, a.DuplicateScryptAfterReject)
			}
			checkAttribution(t, res, 30)
		})
	}
}

// TestAttribution sends known requests one at a time through a tracked
// model and checks whose password each computation is counted for.
func TestAttribution(t *testing.T) {
	h := testHerd(t)
	node, dup := h.Nodes[0], Node{Name: h.Nodes[0].Name, Password: "duplicate"}
	guess := Node{Name: h.Nodes[1].Name, Password: "guess"}
	for _, c := range []struct {
		model                       string
		honest, guesses, dups, late uint64 // late: duplicate computations after its 403
	}{
		// nodepass: the duplicate costs one computation, then its mismatch
		// is cached and, once its twin is in, known; a guess for a node
		// whose password is known costs nothing.
		{ModelNodepass, 2, 1, 1, 0},
		{ModelK3s128, 3, 2, 3, 2},
	} {
		t.Run(c.model, func(t *testing.T) {
			store := verify.NewMemoryStore()
			for _, n := range h.Nodes {
				store.Set(n.Name, n.Hash)
			}
			tr := newTracker(h.Nodes, []Node{dup}, 1, h.Token)
			inner, err := newModel(c.model, store, verify.DefaultParams, 1, nil, tr.observer(0), serverEnv{})
			if err != nil {
				t.Fatal(err)
			}
			m := tr.wrap(inner, 0)
			defer m.close(true)
			ask := func(n Node, want error) {
				t.Helper()
				if err := m.Ensure(t.Context(), n.Name, n.Password); !errors.Is(err, want) {
					t.Fatalf("Ensure(%s, %s) = %v, want %v", n.Name, n.Password, err, want)
				}
			}
			ask(guess, verify.ErrMismatchedHashAndPassword) // before node 1 is in: a computation
			ask(dup, verify.ErrMismatchedHashAndPassword)
			tr.rejected(0)
			ask(dup, verify.ErrMismatchedHashAndPassword)
			ask(node, nil)
			ask(h.Nodes[1], nil)
			ask(guess, verify.ErrMismatchedHashAndPassword) // node 1 is in
			ask(dup, verify.ErrMismatchedHashAndPassword)
			if c.model != ModelNodepass {
				ask(node, nil)
			}
			a := trackerFigures(tr)
			if a.HonestScrypt != c.honest || a.GuessScrypt != c.guesses || a.DuplicateScrypt != c.dups ||
				a.DuplicateScryptAfterReject != c.late || a.UnattributedScrypt != 0 {
				t.Errorf("honest %d guesses %d duplicates %d (%d after its 403) unattributed %d; want %d %d %d (%d)",
					a.HonestScrypt, a.GuessScrypt, a.DuplicateScrypt, a.DuplicateScryptAfterReject, a.UnattributedScrypt,
					c.honest, c.guesses, c.dups, c.late)
			}
			if a.HonestScrypt+a.GuessScrypt+a.DuplicateScrypt != m.counts().scrypt {
				t.Errorf("attributed %d computations, the model counted %d", a.HonestScrypt+a.GuessScrypt+a.DuplicateScrypt, m.counts().scrypt)
			}
			// The k3s model computes the second guess after node 1 joined.
			if want := c.guesses - 1; a.GuessScryptKnown != want {
				t.Errorf("%d guess computations after the join, want %d", a.GuessScryptKnown, want)
			}
			if a.WrongAccepts != 0 || a.HonestRejected != 0 {
				t.Errorf("wrong accepts %d, honest rejected %d", a.WrongAccepts, a.HonestRejected)
			}
		})
	}
}

// acceptAll is a broken model that lets every password in.
type acceptAll struct{ model }

func (acceptAll) Ensure(context.Context, string, string) error { return nil }

// TestWrongAcceptCounted checks that a server letting a guess in shows,
// both at the agents and at the server.
func TestWrongAcceptCounted(t *testing.T) {
	h := testHerd(t)
	tr := newTracker(h.Nodes, nil, 1, h.Token)
	m := tr.wrap(acceptAll{}, 0)
	if err := m.Ensure(t.Context(), h.Nodes[0].Name, "guess"); err != nil {
		t.Fatal(err)
	}
	a := trackerFigures(tr)
	if a.WrongAccepts != 1 || a.Accepted() != 1 {
		t.Errorf("wrong accepts %d, Accepted() %d; want 1", a.WrongAccepts, a.Accepted())
	}

	sc := Scenario{Nodes: 4, Attackers: 3, Duplicates: 1}.WithDefaults()
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		r := newRun(sc, fakeNodes(sc.Nodes), fakeToken)
		// Every attempt is let in after a millisecond, honest or not.
		slowOK := func(ctx context.Context, _, _, _ int) outcome {
			time.Sleep(time.Millisecond)
			return outcome{status: http.StatusOK}
		}
		r.target = &fakeTarget{answer: slowOK, later: slowOK}
		res := r.execute(t.Context(), time.Now())
		if a := res.Attack; a.GuessesAccepted == 0 || a.GuessesAccepted != a.Guesses || a.DuplicatesAccepted != 1 {
			t.Errorf("guesses %d, accepted %d; duplicates accepted %d", a.Guesses, a.GuessesAccepted, a.DuplicatesAccepted)
		}
	})
}

func TestParseAttackNames(t *testing.T) {
	for _, s := range []string{"sticky", "Random"} {
		if err := new(AttackNames).Set(s); err != nil {
			t.Errorf("AttackNames.Set(%q): %v", s, err)
		}
	}
	if err := new(AttackNames).Set("smart"); err == nil {
		t.Error("AttackNames.Set(smart) did not fail")
	}
}

func TestAdversityValidation(t *testing.T) {
	for _, sc := range []Scenario{
		{Attackers: -1}, {Duplicates: 321}, {StoreFaults: 1}, {StoreFaults: -0.1},
		{StoreSpikes: 1.5}, {StoreSpike: -time.Second, StoreSpikes: 0.1}, {AttackNames: "smart"},
	} {
		if err := sc.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v: no error", sc)
		}
	}
	if err := (Scenario{Attackers: 200, Duplicates: 32, StoreFaults: 0.3, StoreSpikes: 0.3}).WithDefaults().Validate(); err != nil {
		t.Error(err)
	}
}

// TestAttributionByLabels: a computation is counted for the agent its
// context's labels name, and as unattributed without them or with labels
// that name no agent of the run.
func TestAttributionByLabels(t *testing.T) {
	h := testHerd(t)
	dup := Node{Name: h.Nodes[2].Name, Password: "duplicate"}
	tr := newTracker(h.Nodes, []Node{dup}, 1, h.Token)
	o := tr.observer(0)
	observe := func(labels pprof.LabelSet) {
		o.ObserveScrypt(pprof.WithLabels(t.Context(), labels), time.Millisecond)
	}
	o.ObserveScrypt(t.Context(), time.Millisecond)
	observe(pprof.Labels(PasswordLabel, "honest", NodeLabel, "999"))
	observe(pprof.Labels(PasswordLabel, "duplicate", NodeLabel, "2"))
	observe(pprof.Labels(PasswordLabel, "friend"))
	for _, n := range []Node{h.Nodes[0], h.Nodes[1], dup, {Name: h.Nodes[3].Name, Password: "guess"}, {Name: "nobody", Password: "guess"}} {
		observe(tr.classify(n.Name, n.Password).labels())
	}
	a := trackerFigures(tr)
	if a.HonestScrypt != 2 || a.DuplicateScrypt != 1 || a.GuessScrypt != 2 || a.UnattributedScrypt != 4 {
		t.Errorf("honest %d, duplicates %d, guesses %d, unattributed %d; want 2, 1, 2, 4",
			a.HonestScrypt, a.DuplicateScrypt, a.GuessScrypt, a.UnattributedScrypt)
	}
	if at := tr.verifiedAt[0][1].Load(); at == 0 {
		t.Error("node 1's honest computation did not mark its password known")
	}
}

// TestScryptLabelled: a k3s model's scrypt runs under verify's scrypt
// label merged with the labels of the request, as a nodepass server's
// does, so that a CPU profile classifies and splits both alike.
func TestScryptLabelled(t *testing.T) {
	m := newK3s(verify.NewMemoryStore(), verify.DefaultParams)
	defer m.close(true)
	ctx := pprof.WithLabels(t.Context(), who{kind: kindGuess, node: 3}.labels())
	var dump bytes.Buffer
	err := m.scrypt(ctx, func() error { return pprof.Lookup("goroutine").WriteTo(&dump, 1) })
	if err != nil {
		t.Fatal(err)
	}
	want := `# labels: {"nodepass.bench.node":"3", "nodepass.bench.password":"guess", "nodepass.verify":"scrypt"}`
	if !strings.Contains(dump.String(), want) {
		t.Errorf("no goroutine with %s:\n%s", want, dump.String())
	}
	if m.counts().scrypt != 1 {
		t.Errorf("%d scrypt runs counted, want 1", m.counts().scrypt)
	}
}

// trackerFigures returns the computation counts and wrong answers tr
// attributed.
func trackerFigures(tr *tracker) *AttackResult {
	res := &Result{Attack: &AttackResult{}}
	tr.freeze()
	tr.attackFigures(res)
	return res.Attack
}
