package sched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// herd is a cold herd on fake time: agents agents ask at once, one
// password each, for computations of took each; an agent sent away comes
// back after the scheduler's ReturnAfter plus a random jitter (k3s agents:
// 5 s plus up to 5 s), or after Overload.After when the scheduler is told
// that agents honour it. Results are kept, as the Verifier's cache keeps
// them: a computed password is answered without the scheduler.
type herd struct {
	cfg    Config
	agents int
	took   time.Duration
	jitter time.Duration
	warm   bool // the scheduler measured a computation before the herd came
	// spread: agent i first asks at i/agents of it (0: all at once).
	spread time.Duration
	// burst: computations starting in the herd's first burst take
	// burstSlow times took on the wall clock (for took of CPU time), as
	// when the herd's arrivals take the CPU.
	burst     time.Duration
	burstSlow float64
}

// herdFigures is what happened to a herd's agents.
type herdFigures struct {
	completion time.Duration // until the last agent had its answer
	sentAway   int           // answers telling an agent to come back
	late       []string      // those that came after the agent was held
	attempts   []int         // by agent: requests sent
	// returns are, for each request of an agent that came back, when it
	// came relative to its result being ready (negative: before).
	returns []time.Duration
	// overWait are the requests that came back and neither found their
	// result ready nor got it within MaxWait.
	overWait int
}

// bound is the herd's lower bound: its work spread over the slots.
func (h herd) bound() time.Duration {
	return h.took * time.Duration(h.agents) / time.Duration(h.cfg.Slots)
}

// run runs h on fake time; call it inside a synctest bubble. A batch of
// k jobs takes k times took (batches change when results come, not the
// cost of a computation).
func (h herd) run(t *testing.T) herdFigures {
	var s *Scheduler
	start := time.Now()
	var mu sync.Mutex
	ready := map[Key]time.Time{}
	cfg := h.cfg
	cfg.Run = func(jobs []*Job) (int, time.Duration, time.Duration) {
		wall := h.took * time.Duration(len(jobs))
		if time.Since(start) < h.burst {
			wall = time.Duration(float64(wall) * h.burstSlow)
		}
		time.Sleep(wall)
		mu.Lock()
		for _, j := range jobs {
			ready[j.key] = time.Now() // cached before the slot is given back
		}
		mu.Unlock()
		for _, j := range jobs {
			s.Finish(j, nil)
		}
		return len(jobs), wall, h.took * time.Duration(len(jobs))
	}
	s = New(cfg)
	defer s.Close()
	if h.warm {
		calibrate(s, h.took, 1<<20)
	}
	var f herdFigures
	f.attempts = make([]int, h.agents)
	var wg sync.WaitGroup
	for i := range h.agents {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			key := keyOf(fmt.Sprint("pw", i))
			time.Sleep(h.spread * time.Duration(i) / time.Duration(h.agents))
			for attempt := 1; ; attempt++ {
				came := time.Now()
				mu.Lock()
				f.attempts[i] = attempt
				at, done := ready[key]
				mu.Unlock()
				if done {
					mu.Lock()
					f.returns = append(f.returns, came.Sub(at))
					mu.Unlock()
					return
				}
				err := h.ask(s, key, fmt.Sprint("node", i))
				mu.Lock()
				if attempt > 1 {
					if at, ok := ready[key]; ok {
						f.returns = append(f.returns, came.Sub(at))
					}
				}
				mu.Unlock()
				if err == nil {
					return
				}
				var o *Overload
				if !errors.As(err, &o) {
					t.Errorf("agent %d: %v", i, err)
					return
				}
				mu.Lock()
				f.sentAway++
				if attempt > 1 {
					f.overWait++
				}
				// A cold scheduler decides once it has measured warmSamples
				// computations, after each slot's first batch (one job).
				decided := h.took * time.Duration(1+warmSamples/h.cfg.Slots)
				if waited := time.Since(came); o.Held || waited > decided {
					f.late = append(f.late, fmt.Sprintf("agent %d at %v after %v (held %v)", i, came.Sub(start), waited, o.Held))
				}
				mu.Unlock()
				back := h.cfg.ReturnAfter + time.Duration(rng.Int64N(int64(h.jitter)+1))
				if h.cfg.HonourAfter {
					back = o.After
				}
				time.Sleep(back)
			}
		})
	}
	wg.Wait()
	f.completion = time.Since(start)
	return f
}

// ask is one request: join the password's job and wait for it.
func (h herd) ask(s *Scheduler, key Key, name string) error {
	j, _, err := s.Join(context.Background(), Request{Key: key, Name: name, Work: 1 << 20})
	if err != nil {
		return err
	}
	return s.Wait(context.Background(), j, time.Time{})
}

func k3sHerd(agents int, warm bool) herd {
	return herd{
		cfg: Config{Slots: 2, Lanes: 1, MaxQueue: 10000, PerName: 4, MaxWait: 8 * time.Second,
			ReturnAfter: 5 * time.Second},
		agents: agents, took: 50 * time.Millisecond, jitter: 5 * time.Second, warm: warm,
	}
}

// TestHerdWithinMaxWait: a herd whose work fits in MaxWait sends nobody
// away, whether or not the scheduler had measured a computation before
// it came, and finishes when the work does.
func TestHerdWithinMaxWait(t *testing.T) {
	for _, warm := range []bool{true, false} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := k3sHerd(280, warm) // 7 s of work
				f := h.run(t)
				if f.sentAway != 0 {
					t.Fatalf("%d agents sent away (late: %q), want none", f.sentAway, f.late)
				}
				if f.completion > h.bound()+h.took {
					t.Fatalf("finished in %v, want the work's %v", f.completion, h.bound())
				}
			})
		})
	}
}

// TestHerdWithinMaxWaitAfterBurst: a herd whose work fits in MaxWait,
// arriving over its first second while its arrivals make computations
// three times slower, sends nobody away: the burst is counted for about
// as long as it has lasted, not over the whole wait.
func TestHerdWithinMaxWaitAfterBurst(t *testing.T) {
	for _, warm := range []bool{true, false} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := k3sHerd(240, warm) // 6 s of work
				h.spread, h.burst, h.burstSlow = time.Second, time.Second, 3
				f := h.run(t)
				if f.sentAway != 0 {
					t.Fatalf("%d agents sent away (late: %q), want none", f.sentAway, f.late)
				}
				t.Logf("finished in %v (%.3f x the work)", f.completion, float64(f.completion)/float64(h.bound()))
			})
		})
	}
}

// TestHerdTwiceMaxWait: a herd of twice the work MaxWait holds sends
// agents away only as they come (once the first computations are
// measured, for a scheduler that had none), and every agent that comes back finds
// its result ready or gets it within MaxWait: nobody asks three times,
// and the herd finishes within 10% of its work, with k3s agents and with
// agents that honour Overload.After.
func TestHerdTwiceMaxWait(t *testing.T) {
	for _, honour := range []bool{false, true} {
		for _, warm := range []bool{true, false} {
			t.Run(fmt.Sprintf("honour=%v/warm=%v", honour, warm), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := k3sHerd(640, warm) // 16 s of work
					h.cfg.HonourAfter = honour
					f := h.run(t)
					if f.sentAway == 0 {
						t.Fatal("nobody sent away")
					}
					if len(f.late) > 0 {
						t.Fatalf("%d of %d sent away after being held: %q", len(f.late), f.sentAway, f.late[:min(len(f.late), 5)])
					}
					if f.overWait > 0 {
						t.Fatalf("%d agents that came back were sent away again", f.overWait)
					}
					for i, n := range f.attempts {
						if n > 2 {
							t.Fatalf("agent %d asked %d times", i, n)
						}
					}
					t.Logf("%d sent away, finished in %v (%.3f x the work)", f.sentAway, f.completion, float64(f.completion)/float64(h.bound()))
					if limit := h.bound() * 11 / 10; f.completion > limit {
						t.Fatalf("finished in %v, want within %v (the work %v)", f.completion, limit, h.bound())
					}
				})
			})
		}
	}
}
