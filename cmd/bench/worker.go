package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/bench"
)

// The parent runs each model in a child: this program re-executed with
// the parent's flags plus -worker=MODEL. The child reads the herd (nodes,
// stored hashes, lower bound) as JSON on stdin and writes JSON lines on
// stdout: progress messages, then one message with the result. It exits
// as soon as the result is written, without waiting for the scrypt calls
// an unbounded model still has running.
//
// Per-model profiles (-cpuprofile-dir) are taken in runModel around
// bench.Run, so that each file covers exactly one model's run.

// message is one line from a worker.
type message struct {
	Progress *progressMsg  `json:"progress,omitempty"`
	Result   *bench.Result `json:"result,omitempty"`
	Error    string        `json:"error,omitempty"`
}

type progressMsg struct {
	Joined   int     `json:"joined"`
	ElapsedS float64 `json:"elapsed_s"`
}

// runWorker is the child: one model, one run.
func runWorker(ctx context.Context, c *config, stdin io.Reader, stdout, stderr io.Writer) int {
	enc := json.NewEncoder(stdout)
	fail := func(err error) int {
		enc.Encode(message{Error: err.Error()})
		fmt.Fprintf(stderr, "bench: worker %s: %v\n", c.worker, err)
		return 1
	}
	var h bench.Herd
	if err := json.NewDecoder(stdin).Decode(&h); err != nil {
		return fail(fmt.Errorf("reading the herd: %w", err))
	}
	sc := c.sc
	sc.NoDrain = true
	sc.Progress = func(p bench.Progress) {
		if !p.Done {
			enc.Encode(message{Progress: &progressMsg{Joined: p.Joined, ElapsedS: p.Elapsed.Seconds()}})
		}
	}
	res, err := runModel(ctx, c, sc, &h, c.worker)
	if err != nil {
		return fail(err)
	}
	if err := enc.Encode(message{Result: res}); err != nil {
		fmt.Fprintf(stderr, "bench: worker %s: writing the result: %v\n", c.worker, err)
		return 1
	}
	return 0
}

// runChild runs model in a child process and returns its result, or a
// Result that says why the child failed.
func runChild(ctx context.Context, c *config, args []string, herd []byte, model string, bar *progressBar, stderr io.Writer) (*bench.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to run a worker: %w", err)
	}
	// A backstop: the child stops itself at the deadline.
	ctx, cancel := context.WithTimeout(ctx, c.sc.Deadline+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, append(append([]string{}, args...), "-worker="+model)...)
	cmd.Stdin = bytes.NewReader(herd)
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("worker %s: %w", model, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting worker %s: %w", model, err)
	}
	guard := watchRSS(cmd.Process.Pid, rssLimit(c.sc.MaxHeap))
	defer guard.stop()
	var res *bench.Result
	var workerErr string
	var last progressMsg
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			workerErr = fmt.Sprintf("unreadable message from worker: %v", err)
			continue
		}
		switch {
		case m.Progress != nil:
			last = *m.Progress
			bar.update(m.Progress.Joined, time.Duration(m.Progress.ElapsedS*float64(time.Second)), false)
		case m.Result != nil:
			res = m.Result
		case m.Error != "":
			workerErr = m.Error
		}
	}
	waitErr := cmd.Wait()
	if res != nil {
		return res, nil
	}
	if rss := guard.stop(); rss > 0 {
		// The worker's own guard did not act in time; the parent's did.
		return &bench.Result{
			Model: model, Nodes: c.sc.Nodes, LogN: c.sc.LogN, Mode: c.sc.Mode, Agent: c.sc.Agent.String(),
			Servers: c.sc.Servers, LB: c.sc.LB, Joined: last.Joined,
			Completion: time.Duration(last.ElapsedS * float64(time.Second)),
			Stopped:    bench.StoppedHeapGuard,
			StopDetail: fmt.Sprintf("the worker process passed %d MiB resident (its heap guard had not stopped it yet) and was killed", rss>>20),
		}, nil
	}
	why := workerErr
	if why == "" {
		why = fmt.Sprint(waitErr)
	}
	return nil, fmt.Errorf("worker %s: %s", model, why)
}

// rssLimit is the resident size at which the parent kills a worker whose
// own heap guard has not stopped it: the guard plus 1 GiB. The worker's
// guard reads the heap from a goroutine, and an unbounded model's hundreds
// of scrypt goroutines can keep that goroutine off the CPUs for seconds
// while they allocate 32 MiB each (seen here: 10 GiB before it ran); the
// parent is another process, which the kernel schedules.
func rssLimit(maxHeap uint64) uint64 { return maxHeap + 1<<30 }

// rssGuard kills a process whose resident size passes a limit. It reads
// /proc; where there is none it does nothing.
type rssGuard struct {
	done   chan struct{}
	killed atomic.Uint64 // resident bytes when killed; 0 if not
	once   sync.Once
	wg     sync.WaitGroup
}

func watchRSS(pid int, limit uint64) *rssGuard {
	g := &rssGuard{done: make(chan struct{})}
	path := fmt.Sprintf("/proc/%d/statm", pid)
	page := uint64(os.Getpagesize())
	g.wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-g.done:
				return
			case <-tick.C:
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return
			}
			var size, resident uint64
			if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
				return
			}
			if rss := resident * page; rss > limit {
				g.killed.Store(rss)
				if p, err := os.FindProcess(pid); err == nil {
					p.Kill()
				}
				return
			}
		}
	})
	return g
}

// stop ends the watch and returns the resident size at which the process
// was killed, or 0.
func (g *rssGuard) stop() uint64 {
	g.once.Do(func() { close(g.done) })
	g.wg.Wait()
	return g.killed.Load()
}
