package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// AttackNames is how attackers pick the real node names they guess
// passwords for.
type AttackNames string

// Ways attackers pick names.
const (
	// AttackRandom draws a new name from the herd for every guess.
	AttackRandom AttackNames = "random"
	// AttackSticky draws one name per attacker and guesses only for it:
	// the harder case for a server that queues a name's passwords in
	// turn (RELIABILITY.md has both).
	AttackSticky AttackNames = "sticky"
)

// Set sets a to the way of picking names called s (flag.Value).
func (a *AttackNames) Set(s string) error {
	return setName(a, "attack names", s, AttackRandom, AttackSticky)
}

func (a AttackNames) String() string { return string(a) }

// The random streams of the agents other than the honest nodes (stream i
// is honest node i's): far apart so that no herd size makes them meet.
const (
	duplicateStream    = 1 << 40
	attackerStream     = 2 << 40
	passwordStream     = 3 << 40 // the duplicates' passwords
	tokenGuesserStream = 4 << 40
)

// AttackResult has the figures of a run with attackers, duplicates or
// store faults: what the adversaries sent and were answered, and whose
// passwords the servers' scrypt computations checked (ScryptCounts).
type AttackResult struct {
	// Attackers is Scenario.Attackers and AttackNames how they picked
	// names. Guesses counts their requests, answered 200 (accepted, must
	// be 0), 403 (rejected), 429 or 503 (shed), or given up at the client
	// timeout.
	Attackers       int         `json:"attackers"`
	AttackNames     AttackNames `json:"attack_names,omitempty"`
	Guesses         uint64      `json:"guesses"`
	GuessesAccepted uint64      `json:"guesses_accepted"`
	GuessesRejected uint64      `json:"guesses_rejected"`
	GuessesShed     uint64      `json:"guesses_shed"`
	GuessTimeouts   uint64      `json:"guess_timeouts"`
	// TokenGuessers is Scenario.TokenGuessers; TokenGuesses counts their
	// attempts, each ended by its first request with the token: answered
	// 200 (must be 0), 401, or 429 and 503.
	TokenGuessers        int    `json:"token_guessers,omitempty"`
	TokenGuesses         uint64 `json:"token_guesses,omitempty"`
	TokenGuessesAccepted uint64 `json:"token_guesses_accepted,omitempty"`
	TokenGuessesRejected uint64 `json:"token_guesses_rejected,omitempty"`
	TokenGuessesShed     uint64 `json:"token_guesses_shed,omitempty"`
	// Duplicates is Scenario.Duplicates; DuplicateRequests counts their
	// attempts, DuplicatesAccepted the duplicates let in (must be 0),
	// DuplicatesRejected their 403 answers.
	Duplicates         int    `json:"duplicates"`
	DuplicateRequests  uint64 `json:"duplicate_requests"`
	DuplicatesAccepted uint64 `json:"duplicates_accepted"`
	DuplicatesRejected uint64 `json:"duplicates_rejected"`
	ScryptCounts
	// UnfinishedScrypt counts the computations started (Result.ScryptRuns)
	// but not yet attributed when the figures were taken: a nodepass
	// computation is attributed as it ends.
	UnfinishedScrypt uint64 `json:"unfinished_scrypt"`
	// WrongAccepts counts, at the servers, answers that let in a password
	// not the node's own, and HonestRejected the honest ones answered as
	// mismatches. Both must be 0.
	WrongAccepts   uint64 `json:"wrong_accepts"`
	HonestRejected uint64 `json:"honest_rejected"`
}

// ScryptCounts are the servers' scrypt computations by whose password
// they checked, as the run's tracker attributed them (attribution.go).
type ScryptCounts struct {
	// TokenScrypt and TokenGuessScrypt count the computations over the
	// join token and over wrong ones; HonestScrypt, GuessScrypt and
	// DuplicateScrypt those over the nodes', the attackers' and the
	// duplicates' passwords.
	TokenScrypt      uint64 `json:"token_scrypt"`
	TokenGuessScrypt uint64 `json:"token_guess_scrypt"`
	HonestScrypt     uint64 `json:"honest_scrypt"`
	GuessScrypt      uint64 `json:"guess_scrypt"`
	// GuessScryptKnown counts the guesses' computations that started
	// after their server knew the node's own password: a server that
	// looked for a known match then would not have run them.
	GuessScryptKnown uint64 `json:"guess_scrypt_known"`
	DuplicateScrypt  uint64 `json:"duplicate_scrypt"`
	// DuplicateScryptMax is the most over one duplicate's password, and
	// DuplicateScryptAfterReject counts those that finished after their
	// duplicate got its first 403: the cost of its retries.
	DuplicateScryptMax         uint64 `json:"duplicate_scrypt_max"`
	DuplicateScryptAfterReject uint64 `json:"duplicate_scrypt_after_reject"`
	// UnattributedScrypt counts computations whose context carried no
	// labels of the run's agents (a test keeps it at 0).
	UnattributedScrypt uint64 `json:"unattributed_scrypt"`
}

// Accepted is how many wrong passwords or tokens were let in, by the
// agents' count or the servers', whichever is higher. Anything but 0 is
// a security bug.
func (a *AttackResult) Accepted() uint64 {
	if a == nil {
		return 0
	}
	return max(a.GuessesAccepted+a.DuplicatesAccepted+a.TokenGuessesAccepted, a.WrongAccepts)
}

// adversaries are a run's attackers, token guessers and duplicates, and
// what they sent and were answered. A run without adversity has one with
// no agents; its tracker still times each node's result.
type adversaries struct {
	sc      Scenario
	tracker *tracker
	dups    []Node // duplicate d: the name of node twins[d], another password
	twins   []int

	dupTally tally
	mu       sync.Mutex
	counts   AttackResult // the agents' side: guesses, duplicates, token guesses
}

func newAdversaries(sc Scenario, nodes []Node, token string) *adversaries {
	a := &adversaries{sc: sc}
	rng := rand.New(rand.NewPCG(sc.Seed, passwordStream))
	for d := range sc.Duplicates {
		// Spread over the herd: duplicate d is the twin of node d·N/D.
		twin := d * len(nodes) / sc.Duplicates
		a.twins = append(a.twins, twin)
		a.dups = append(a.dups, Node{Name: nodes[twin].Name, Password: guessPassword(rng)})
	}
	a.tracker = newTracker(nodes, a.dups, sc.Servers, token)
	return a
}

// count adds to the agents' counts under a's lock.
func (a *adversaries) count(f func(*AttackResult)) {
	a.mu.Lock()
	f(&a.counts)
	a.mu.Unlock()
}

// guessPassword returns a password as a k3s agent makes them: 16 random
// bytes in hex.
func guessPassword(rng *rand.Rand) string {
	return fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
}

// clientNames returns the node name each client asks for, by client: the
// honest nodes', their duplicates', then "" for each attacker (whose name
// changes) and each token guesser (which names none).
func (r *run) clientNames() []string {
	names := make([]string, 0, r.sc.Nodes+len(r.adv.dups)+r.sc.Attackers+r.sc.TokenGuessers)
	for _, n := range r.nodes {
		names = append(names, n.Name)
	}
	for _, d := range r.adv.dups {
		names = append(names, d.Name)
	}
	return append(names, make([]string, r.sc.Attackers+r.sc.TokenGuessers)...)
}

// startAdversaries starts the duplicates and the attackers, and returns
// once each is about to send its first request; they stop when ctx ends.
// A herd that joins at once would otherwise leave them no time to start.
// tried is done once every token guesser's first attempt is answered (or
// ctx has ended): the run waits for it before it stops them, so that a
// herd that joins within one attempt still meets their guesses.
func (r *run) startAdversaries(ctx context.Context, wg *sync.WaitGroup) (tried *sync.WaitGroup) {
	tried = new(sync.WaitGroup)
	var started sync.WaitGroup
	start := func(f func()) {
		started.Add(1)
		wg.Go(func() {
			started.Done()
			f()
		})
	}
	for d := range r.adv.dups {
		start(func() { r.duplicate(ctx, d) })
	}
	for j := range r.sc.Attackers {
		start(func() { r.attacker(ctx, j) })
	}
	for j := range r.sc.TokenGuessers {
		tried.Add(1)
		start(func() { r.tokenGuesser(ctx, j, sync.OnceFunc(tried.Done)) })
	}
	started.Wait()
	return tried
}

// duplicate is the second machine of a duplicate hostname, a k3s agent
// like its twin with another password. It asks until ctx ends.
func (r *run) duplicate(ctx context.Context, d int) {
	a := r.adv
	twin := a.twins[d]
	got := r.ask(ctx, asker{
		client: r.sc.Nodes + d, server: twin % r.sc.Servers, node: a.dups[d],
		rng: rand.New(rand.NewPCG(r.sc.Seed, duplicateStream+uint64(d))), tally: &a.dupTally,
		onReject: func() { a.tracker.rejected(d) },
	})
	if got.ok {
		a.count(func(c *AttackResult) { c.DuplicatesAccepted++ })
	}
}

// attacker holds the join token and sends wrong passwords for real node
// names, each request (a serving certificate's) as soon as the previous
// one is answered, round the servers, until ctx ends.
func (r *run) attacker(ctx context.Context, j int) {
	a := r.adv
	rng := rand.New(rand.NewPCG(r.sc.Seed, attackerStream+uint64(j)))
	client := r.sc.Nodes + r.sc.Duplicates + j
	name := r.nodes[rng.IntN(len(r.nodes))].Name
	for k := 0; ctx.Err() == nil; k++ {
		if r.sc.AttackNames == AttackRandom {
			name = r.nodes[rng.IntN(len(r.nodes))].Name
		}
		guess := Node{Name: name, Password: guessPassword(rng)}
		actx, cancel := context.WithTimeout(ctx, r.sc.scale(r.sc.ClientTimeout))
		o := r.target.do(actx, client, (j+k)%r.sc.Servers, guess, stepServingCert, r.token)
		cancel()
		a.count(func(c *AttackResult) {
			c.Guesses++
			switch {
			case o.status == http.StatusOK:
				c.GuessesAccepted++
			case o.status == http.StatusForbidden:
				c.GuessesRejected++
			case o.status == http.StatusTooManyRequests || o.status == http.StatusServiceUnavailable:
				c.GuessesShed++
			case o.timeout && ctx.Err() == nil:
				c.GuessTimeouts++
			}
		})
	}
}

// tokenGuesser is a k3s agent with a wrong join token, a new random one
// per attempt, at the herd's pace, until ctx ends: what an agent with a
// stale token does. It calls tried once its first attempt is counted.
func (r *run) tokenGuesser(ctx context.Context, j int, tried func()) {
	defer tried()
	a := r.adv
	rng := rand.New(rand.NewPCG(r.sc.Seed, tokenGuesserStream+uint64(j)))
	client := r.sc.Nodes + r.sc.Duplicates + r.sc.Attackers + j
	for k := 1; ctx.Err() == nil; k++ {
		o, _, _ := attempt(ctx, r.target, r.sc.scale(r.sc.ClientTimeout), client, (j+k)%r.sc.Servers, Node{}, guessPassword(rng))
		if ctx.Err() != nil {
			return
		}
		a.count(func(c *AttackResult) {
			c.TokenGuesses++
			switch o.status {
			case http.StatusOK:
				c.TokenGuessesAccepted++
			case http.StatusUnauthorized:
				c.TokenGuessesRejected++
			case http.StatusTooManyRequests, http.StatusServiceUnavailable:
				c.TokenGuessesShed++
			}
		})
		tried()
		wait := time.NewTimer(r.policy.Delay(k, o.retryAfter, rng))
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
	}
}

// result returns what the adversaries sent and were answered, without the
// servers' side.
func (a *adversaries) result() *AttackResult {
	a.mu.Lock()
	at := a.counts
	a.mu.Unlock()
	at.Attackers, at.Duplicates, at.TokenGuessers = a.sc.Attackers, a.sc.Duplicates, a.sc.TokenGuessers
	at.DuplicateRequests, at.DuplicatesRejected = a.dupTally.attempts.Load(), a.dupTally.rejected.Load()
	if a.sc.Attackers > 0 {
		at.AttackNames = a.sc.AttackNames
	}
	return &at
}

// attackFigures fills res.Attack's computation counts and wrong answers,
// as t attributed them (frozen), once res.ScryptRuns holds the servers'
// count.
func (t *tracker) attackFigures(res *Result) {
	at := res.Attack
	at.ScryptCounts = *t.frozen
	at.WrongAccepts, at.HonestRejected = t.wrongAccepts.Load(), t.honestRejected.Load()
	c := at.ScryptCounts
	if seen := c.HonestScrypt + c.GuessScrypt + c.DuplicateScrypt + c.TokenScrypt + c.TokenGuessScrypt + c.UnattributedScrypt; res.ScryptRuns > seen {
		at.UnfinishedScrypt = res.ScryptRuns - seen
	}
}
