package verify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodepass/nodepass/scrypt"
)

// TestFailDelay: consecutive mismatches for a name are answered later and
// later, up to MaxFailDelay; a match is never delayed and resets the count;
// the caller's context cuts the delay short.
func TestFailDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewMemoryStore()
		s.Set("n", mustHash(t, "right"))
		v := newTestVerifier(t, s, &Options{MaxFailDelay: 500 * time.Millisecond})
		ctx := context.Background()
		elapsed := func(pw string) (time.Duration, error) {
			start := time.Now()
			err := v.Verify(ctx, "n", pw)
			return time.Since(start), err
		}
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}
		for i, w := range want {
			d, err := elapsed(fmt.Sprint("guess-", i))
			if !errors.Is(err, ErrMismatchedHashAndPassword) || d != w {
				t.Fatalf("mismatch %d: %v after %v, want mismatch after %v", i+1, err, d, w)
			}
		}
		if d, err := elapsed("right"); err != nil || d != 0 {
			t.Fatalf("match: %v after %v, want no delay", err, d)
		}
		if d, _ := elapsed("guess-0"); d != 0 {
			t.Fatalf("first mismatch after a match delayed %v", d)
		}
		if d, _ := elapsed("guess-0"); d != 100*time.Millisecond {
			t.Fatalf("second mismatch delayed %v", d)
		}
		// The count starts again after a quiet failWindow.
		time.Sleep(failWindow + time.Second)
		if d, _ := elapsed("guess-0"); d != 0 {
			t.Fatalf("mismatch after a quiet window delayed %v", d)
		}
		// A caller that leaves is not held.
		elapsed("guess-1")
		cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := v.Verify(cctx, "n", "guess-2"); !errors.Is(err, ErrMismatchedHashAndPassword) || time.Since(start) != 10*time.Millisecond {
			t.Fatalf("cancelled caller: %v after %v", err, time.Since(start))
		}
		v.Close()
	})
}

// TestDuplicateHostname: a second machine with the same name retrying a
// wrong password costs one scrypt, however often it retries.
func TestDuplicateHostname(t *testing.T) {
	s := NewMemoryStore()
	s.Set("dup", mustHash(t, "first-machine"))
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	for range 50 {
		if err := v.Ensure(ctx, "dup", "second-machine"); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatal(err)
		}
	}
	if err := v.Ensure(ctx, "dup", "first-machine"); err != nil {
		t.Fatal(err)
	}
	if st := v.Stats(); st.ScryptRuns != 2 {
		t.Fatalf("%d scrypt runs, want 2", st.ScryptRuns)
	}
}

// TestFullNameHeld: when a name has no room in the queue, a new password
// for it waits in the name's line for its whole MaxWait, so that a
// guesser cannot spin on answers; a caller that waits it out gets the
// password queued (over the name's cap), to be computed for its retry.
func TestFullNameHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewMemoryStore()
		s.Set("busy", mustHash(t, "pw"))
		s.Set("n", mustHash(t, "right"))
		v := newTestVerifier(t, s, &Options{MaxConcurrent: 1, MaxQueuedPerNode: 2, MaxFailDelay: time.Second, MaxWait: 3 * time.Second})
		ctx := context.Background()
		for i := range 3 { // three computed mismatches
			v.Verify(ctx, "n", fmt.Sprint("old-guess-", i))
		}
		g := newGate()
		g.install(t, v)
		go v.Verify(ctx, "busy", "pw")
		<-g.entered
		sctx, cancel := context.WithCancel(ctx)
		for i := range 2 {
			go v.Verify(sctx, "n", fmt.Sprint("queued-guess-", i))
		}
		synctest.Wait()
		start := time.Now()
		err := v.Verify(ctx, "n", "waiting-guess")
		var oe *OverloadError
		if !errors.As(err, &oe) || !oe.Queued {
			t.Fatalf("err %v, want an overload with the work queued", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("held %v, want MaxWait (3 s)", d)
		}
		if st := v.Stats(); st.Queued != 3 {
			t.Fatalf("%d queued, want 3: the name's two and the one that waited", st.Queued)
		}
		cancel()
		g.open()
		v.Close()
	})
}

// TestGuessForFailingNameWaits: once a name has failed, a new password for
// it (a first ask) is computed only after other nodes' work.
func TestGuessForFailingNameWaits(t *testing.T) {
	s := NewMemoryStore()
	for _, n := range []string{"busy", "attacked", "honest"} {
		s.Set(n, mustHash(t, "right"))
	}
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1})
	ctx := context.Background()
	if err := v.Verify(ctx, "attacked", "guess-0"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	derive := v.derive
	g := newGate()
	v.derive = func(keys []scrypt.Job, lanes int) {
		g.entered <- struct{}{}
		<-g.release
		mu.Lock()
		for _, k := range keys {
			order = append(order, string(k.Password))
		}
		mu.Unlock()
		derive(keys, lanes)
	}
	go v.Verify(ctx, "busy", "right")
	<-g.entered
	done := make(chan error, 2)
	go func() { done <- v.Verify(ctx, "attacked", "guess-1") }()
	waitFor(t, "the guess to queue", func() bool { return v.Stats().Queued == 1 })
	go func() { done <- v.Verify(ctx, "honest", "right") }()
	waitFor(t, "the honest node to queue", func() bool { return v.Stats().Queued == 2 })
	g.open()
	for range 2 {
		<-done
	}
	waitFor(t, "work to finish", func() bool { return idle(v) })
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 3 || order[1] != "right" || order[2] != "guess-1" {
		t.Fatalf("computed in order %q, want busy, honest, then the guess", order)
	}
}

// adversary is a way of sending wrong passwords for one node name.
type adversary struct {
	name string
	// conns is how many requests the guesser keeps in progress at once.
	conns int
	// repeat is how often each guess is sent, one after the other (1:
	// fresh guesses only).
	repeat int
	// burst, if not zero, is how many fresh guesses are sent at once,
	// half a second before each of the agent's asks (the guesser is told
	// when they come), on top of the conns.
	burst int
	// abandon makes every request leave 10 ms after it was sent, its
	// connection at once ready for the next one.
	abandon bool
}

// TestAdversaryCannotKeepPasswordOut: whatever wrong passwords are sent
// for a node name, fresh or repeated, steady or timed just before the
// agent's retries, the node's own password is computed within the bound
// of the package doc: it is queued, never to be displaced, by the end of
// the agent's first request (which waits out MaxWait), and computed while
// its next request waits, the name being served every other turn here.
// So the agent joins at its second request at the latest. The server is
// busy throughout: one slot, always wanted by other names.
func TestAdversaryCannotKeepPasswordOut(t *testing.T) {
	for _, a := range []adversary{
		{name: "fresh guesses, 2 connections", conns: 2, repeat: 1},
		{name: "fresh guesses, 8 connections", conns: 8, repeat: 1},
		{name: "each guess twice, 4 connections", conns: 4, repeat: 2},
		{name: "each guess 5 times, 8 connections", conns: 8, repeat: 5},
		{name: "bursts of 8 before each retry, 4 connections", conns: 4, repeat: 1, burst: 8},
		{name: "bursts of 8 repeated guesses before each retry, 2 connections", conns: 2, repeat: 3, burst: 8},
		{name: "abandoned requests, 4 connections", conns: 4, repeat: 1, abandon: true},
	} {
		t.Run(a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runAdversary(t, a) })
		})
	}
}

// agentMaxAsks is the bound the test holds the agent to: its first
// request queues its password, its second finds it computed.
const agentMaxAsks = 2

func runAdversary(t *testing.T, a adversary) {
	const node = "attacked"
	s := NewMemoryStore()
	s.Set(node, mustHash(t, "right"))
	loadHash := mustHash(t, "load")
	v := newTestVerifier(t, s, &Options{MaxConcurrent: 1, MaxWait: 8 * time.Second, MaxFailDelay: 2 * time.Second})
	derive := v.derive
	v.derive = func(keys []scrypt.Job, lanes int) {
		time.Sleep(time.Duration(len(keys)) * 100 * time.Millisecond) // 100 ms a computation, in fake time
		derive(keys, lanes)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup

	// Other names keep the one slot busy: two clients, each asking for a
	// new node as soon as the last is answered.
	var loadNodes atomic.Int64
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				name := fmt.Sprint("load-", loadNodes.Add(1))
				s.Set(name, loadHash)
				v.Verify(ctx, name, "load")
			}
		})
	}

	// The node has failed before (a guesser was there first): its new
	// passwords are suspects from the start.
	var guesses atomic.Int64
	guess := func() string { return fmt.Sprint("guess-", guesses.Add(1)) }
	send := func(pw string) error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if a.abandon {
			rctx, cancel = context.WithTimeout(ctx, 10*time.Millisecond)
		}
		defer cancel()
		err := v.Verify(rctx, node, pw)
		if err == nil {
			t.Errorf("guess %q accepted", pw)
		}
		return err
	}
	send(guess())

	// The guessers send their next request as soon as the last is answered.
	for range a.conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				pw := guess()
				for range a.repeat {
					send(pw)
				}
			}
		})
	}

	// The agent: the k3s retry policy, 10 s client timeout, 5-10 s between
	// requests; it tells the bursting guesser when it will ask next.
	var mu sync.Mutex
	nextAsk := time.Now().Add(time.Second)
	agentAsks := make(chan time.Time, 1)
	if a.burst > 0 {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case at := <-agentAsks:
					time.Sleep(time.Until(at.Add(-500 * time.Millisecond)))
					var burst sync.WaitGroup
					for range a.burst {
						pw := guess()
						burst.Go(func() {
							for range a.repeat {
								send(pw)
							}
						})
					}
					burst.Wait()
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(13, 1))
	asks := 0
	var answers []string
	for asks < 10 {
		mu.Lock()
		at := nextAsk
		mu.Unlock()
		select {
		case agentAsks <- at:
		default:
		}
		time.Sleep(time.Until(at))
		asks++
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := v.Ensure(rctx, node, "right")
		cancel()
		if err == nil {
			break
		}
		answers = append(answers, err.Error())
		if !errors.Is(err, ErrOverloaded) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the node's own password: %v", err)
		}
		mu.Lock()
		nextAsk = time.Now().Add(5*time.Second + time.Duration(rng.Int64N(int64(5*time.Second))))
		mu.Unlock()
	}
	stop()
	wg.Wait()
	v.Close()
	t.Logf("agent asked %d times; %d guesses, %d load computations, stats %+v",
		asks, guesses.Load(), loadNodes.Load(), v.Stats())
	if asks > agentMaxAsks {
		t.Fatalf("the node's own password took %d requests (bound %d); answers %q", asks, agentMaxAsks, answers)
	}
}
