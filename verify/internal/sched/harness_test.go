package sched

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// keyOf makes a distinct key for a test password.
func keyOf(s string) Key { return Key(sha256.Sum256([]byte(s))) }

// harness is a Scheduler in a synctest bubble whose Run holds each batch
// until the test ends it (end, done), so that a test sees every state in
// between; Prepare submits at once unless prepared is set.
type harness struct {
	t       *testing.T
	s       *Scheduler
	mu      sync.Mutex
	batches map[*Job]*heldBatch
	ran     [][]*Job // every batch Run was given, in order
	// prepared, if not nil, is called by Prepare instead of Submit.
	prepared func(j *Job)
}

type heldBatch struct {
	jobs []*Job
	end  chan [2]time.Duration // wall and CPU time
}

// newHarness returns a harness over cfg; call it inside synctest.Test.
// Lanes 0 means 1.
func newHarness(t *testing.T, cfg Config) *harness {
	h := &harness{t: t, batches: make(map[*Job]*heldBatch)}
	if cfg.Lanes == 0 {
		cfg.Lanes = 1
	}
	cfg.Run = func(jobs []*Job) (int, time.Duration, time.Duration) {
		b := &heldBatch{jobs: jobs, end: make(chan [2]time.Duration, 1)}
		h.mu.Lock()
		for _, j := range jobs {
			h.batches[j] = b
		}
		h.ran = append(h.ran, jobs)
		h.mu.Unlock()
		d := <-b.end
		return len(jobs), d[0], d[1]
	}
	cfg.Prepare = func(j *Job) {
		if h.prepared != nil {
			h.prepared(j)
			return
		}
		h.s.Submit(j)
	}
	h.s = New(cfg)
	return h
}

// newTest returns a harness with slots slots, a queue of maxQueue and
// perName places per name, holding callers up to an hour.
func newTest(t *testing.T, slots, maxQueue, perName int) *harness {
	return newHarness(t, Config{Slots: slots, MaxQueue: maxQueue, PerName: perName, MaxWait: time.Hour})
}

// settle waits until every goroutine of the bubble is blocked: the slots
// taken and the preparations submitted, a slot waiting for a full batch
// included (fillWait): the time it waits passes.
func (h *harness) settle() {
	for {
		synctest.Wait()
		h.s.mu.Lock()
		at := h.s.fill.at
		idle := !h.s.closed && len(h.s.running) < h.s.cfg.Slots && h.s.queue.len > 0
		h.s.mu.Unlock()
		if at.IsZero() {
			if idle {
				h.t.Fatal("a free slot idles with jobs queued and no wait for a full batch armed")
			}
			return
		}
		if !at.After(time.Now()) {
			h.t.Fatalf("the wait for a full batch was due at %v and did not end", at)
		}
		time.Sleep(time.Until(at))
	}
}

// join joins the job for password under name, of 1 MiB of work.
func (h *harness) join(name, password string, failing bool) (*Job, *Overload) {
	j, _, err := h.s.Join(context.Background(), Request{Key: keyOf(password), Name: name, Work: 1 << 20, Doubted: failing})
	h.settle()
	var o *Overload
	if err != nil && !errors.As(err, &o) {
		h.t.Fatalf("join %s/%s: %v", name, password, err)
	}
	return j, o
}

// enqueue joins a new password for name, which must be taken.
func (h *harness) enqueue(name string) *Job {
	h.t.Helper()
	j, o := h.join(name, name+fmt.Sprint(h.s.asks.seq), false)
	if o != nil {
		h.t.Fatalf("enqueue %s: %v", name, o)
	}
	return j
}

// end ends running j's batch, each of its jobs finished with err, after
// wall and cpu; a job not running is finished with err.
func (h *harness) end(j *Job, wall, cpu time.Duration, err error) {
	h.mu.Lock()
	b := h.batches[j]
	h.mu.Unlock()
	if b == nil || j.state != running {
		h.s.Finish(j, err)
		h.settle()
		return
	}
	for _, o := range b.jobs {
		h.s.Finish(o, err)
	}
	b.end <- [2]time.Duration{wall, cpu}
	h.settle()
}

// done ends j (its batch, if running) with a nil result.
func (h *harness) done(j *Job) { h.end(j, 0, 0, nil) }

// stop ends every batch still held and closes the scheduler, so that the
// bubble's goroutines end.
func (h *harness) stop() {
	go h.s.Close()
	h.settle()
	h.mu.Lock()
	var bs []*heldBatch
	for _, b := range h.batches {
		bs = append(bs, b)
	}
	h.batches = map[*Job]*heldBatch{}
	h.mu.Unlock()
	for _, b := range bs {
		select {
		case b.end <- [2]time.Duration{}:
		default:
		}
	}
	h.settle()
}

// run runs f inside a bubble with a fresh harness (see newTest), and
// stops it at the end.
func run(t *testing.T, slots, maxQueue, perName int, f func(h *harness)) {
	synctest.Test(t, func(t *testing.T) {
		h := newTest(t, slots, maxQueue, perName)
		defer h.stop()
		f(h)
	})
}

// granted reports whether j holds a slot.
func granted(j *Job) bool { return j.state == running }

// eta is the estimate a waiting caller of j is given.
func (h *harness) eta(j *Job) time.Duration {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.s.expectedWaitLocked(j, time.Now())
}

// watch counts a caller that starts (1) or stops (-1) waiting for j,
// without a Wait.
func (h *harness) watch(j *Job, delta int) {
	h.s.mu.Lock()
	h.s.watchLocked(j, delta)
	h.s.unlock()
	h.settle()
}

// earn marks j as waited out, without a Wait.
func (h *harness) earn(j *Job) {
	h.s.mu.Lock()
	h.s.earnLocked(j)
	h.s.unlock()
	h.settle()
}

// runningOf returns name's running job, if any.
func (h *harness) runningOf(name string) *Job {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	for b := range h.s.running {
		for _, j := range b.jobs {
			if j.name == name && j.state == running {
				return j
			}
		}
	}
	return nil
}

// anyRunning returns a running job, if any.
func (h *harness) anyRunning() *Job {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	for b := range h.s.running {
		for _, j := range b.jobs {
			if j.state == running {
				return j
			}
		}
	}
	return nil
}

// queued returns how many of name's jobs are queued.
func (h *harness) queued(name string) int {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if nq := h.s.names[name]; nq != nil {
		n, _ := nq.jobs.len()
		return n
	}
	return 0
}

// calibrate makes s's estimates take work bytes to cost d of CPU time, as
// if measured: they are warm, and later measurements still move them.
func calibrate(s *Scheduler, d time.Duration, work int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &s.est
	e.cpu, e.nextCPU = append(e.cpu[:0], float64(d)/float64(work)), 0
	e.nsPerByte = e.cpu[0]
	e.samples = max(e.samples, warmSamples)
	e.slow = e.slowdown()
	s.warmedLocked()
}

// jobs returns how many of s's jobs are not done.
func jobs(s *Scheduler) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}
