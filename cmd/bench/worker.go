package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodepass/nodepass/bench"
)

// The parent runs each model in a child: this program re-executed with
// the parent's flags plus -worker=MODEL. The child reads the herd as JSON
// on stdin and writes JSON lines on stdout: progress, then the result. It
// exits as soon as the result is written, without waiting for the scrypt
// calls an unbounded model still has running. A split run's children
// (split.go) also get -worker-role: servers or agents, which read control
// lines after the herd, or bound, which measures the lower bounds.

// message is one line from a worker.
type message struct {
	Progress *bench.Progress `json:"progress,omitempty"`
	Result   *bench.Result   `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	// Ready: a split run's worker is set up, its servers at Endpoint
	// (servers only), on CPUs; Agents: the agents' report at the end;
	// Tripped: the servers' heap guard tripped; Bounds: a bound worker's
	// herd with its lower bounds (no nodes).
	Ready    bool               `json:"ready,omitempty"`
	Endpoint *bench.Endpoint    `json:"endpoint,omitempty"`
	CPUs     []int              `json:"cpus,omitempty"`
	Agents   *bench.AgentReport `json:"agents,omitempty"`
	Tripped  bool               `json:"tripped,omitempty"`
	Bounds   *bench.Herd        `json:"bounds,omitempty"`
}

// control is a line the parent writes to a split run's worker after the
// herd: the servers' endpoint (to the agents, before they are ready), when
// the run starts (to both), that the servers' heap guard tripped (to the
// agents), and the agents' report (to the servers, to finish).
type control struct {
	Endpoint *bench.Endpoint    `json:"endpoint,omitempty"`
	StartAt  int64              `json:"start_at_unix_ns,omitempty"`
	Stop     bool               `json:"stop,omitempty"`
	Agents   *bench.AgentReport `json:"agents,omitempty"`
}

// encoder writes messages from several goroutines, one line each.
type encoder struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (e *encoder) send(m message) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.enc.Encode(m)
}

// runWorker is the child: one model, one run, or one side of a split run
// (c.role).
func runWorker(ctx context.Context, c *config, stdin io.Reader, stdout, stderr io.Writer) int {
	enc := &encoder{enc: json.NewEncoder(stdout)}
	dec := json.NewDecoder(stdin)
	var h bench.Herd
	err := dec.Decode(&h)
	sc := c.sc
	sc.NoDrain = true
	if err != nil {
		err = fmt.Errorf("reading the herd: %w", err)
	} else {
		switch c.role {
		case "":
			sc.Progress = enc.progress
			var res *bench.Result
			if res, err = runModel(ctx, c, sc, &h, c.worker); err == nil {
				err = enc.send(message{Result: res})
			}
		case roleServers:
			err = runServersWorker(ctx, sc, c.worker, &h, dec, enc)
		case roleAgents:
			sc.Progress = enc.progress
			err = runAgentsWorker(ctx, sc, &h, dec, enc)
		case roleBound:
			if err = h.MeasureLowerBound(ctx); err == nil {
				h.Nodes = nil
				err = enc.send(message{Bounds: &h})
			}
		}
	}
	if err != nil {
		enc.send(message{Error: err.Error()})
		fmt.Fprintf(stderr, "bench: worker %s %s: %v\n", c.worker, c.role, err)
		return 1
	}
	return 0
}

// progress is a Scenario.Progress that sends progress messages.
func (e *encoder) progress(p bench.Progress) {
	if !p.Done {
		e.send(message{Progress: &p})
	}
}

// syncWriter serializes writes to w: the stderr of workers that run at
// once (a split run's two), when it is not a file, which exec would share
// between its copying goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// workerStderr returns w for workers' stderr: as it is if a file, else
// behind a lock.
func workerStderr(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return &syncWriter{w: w}
}

// worker is a child process of this program, running one model's run or
// one side of it, and the messages it writes.
type worker struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	enc  *json.Encoder
	msgs chan message // closed when the child's stdout ends
	last bench.Progress
	rss  *rssGuard // nil unless watched
}

// startWorker starts this program as a worker for model in role ("" for a
// whole run), pinned to cpus (nil: not pinned), and writes it the herd and
// then each of lines. It ends with ctx; on an error it is stopped.
func startWorker(ctx context.Context, args []string, model, role string, cpus []int, stderr io.Writer, herd []byte, lines ...control) (_ *worker, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to run a worker: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, append(slices.Clip(args), "-worker="+model, "-worker-role="+role)...)
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	if cpus != nil {
		cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", len(cpus)))
	}
	w := &worker{name: strings.TrimSpace("worker " + model + " " + role), cmd: cmd, msgs: make(chan message, 64)}
	if w.in, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("%s: %w", w.name, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", w.name, err)
	}
	if cpus != nil {
		err = startPinned(cmd, cpus)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", w.name, err)
	}
	go w.read(out)
	w.enc = json.NewEncoder(w.in)
	if _, err = w.in.Write(herd); err != nil {
		err = fmt.Errorf("%s: writing the herd: %w", w.name, err)
	}
	for _, l := range lines {
		err = cmp.Or(err, w.send(l))
	}
	if err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}

// read passes the child's messages on, an unreadable one as an error.
func (w *worker) read(out io.Reader) {
	defer close(w.msgs)
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			m = message{Error: fmt.Sprintf("unreadable message from worker: %v", err)}
		}
		w.msgs <- m
	}
}

func (w *worker) send(c control) error {
	if err := w.enc.Encode(c); err != nil {
		return fmt.Errorf("%s: writing to the worker: %w", w.name, err)
	}
	return nil
}

// next returns w's next message that want picks, showing its progress
// messages on bar (if not nil) on the way. An error message, or the end
// of w's output, is an error.
func (w *worker) next(bar *progressBar, want func(message) bool) (message, error) {
	for m := range w.msgs {
		switch {
		case want(m):
			return m, nil
		case m.Error != "":
			return m, fmt.Errorf("%s: %s", w.name, m.Error)
		case m.Progress != nil:
			w.last = *m.Progress
			if bar != nil {
				bar.update(w.last.Joined, w.last.Elapsed, false)
			}
		}
	}
	return message{}, fmt.Errorf("%s: ended early: %v", w.name, w.cmd.Wait())
}

// wait closes the child's stdin, drains its messages and waits for it to
// exit.
func (w *worker) wait() error {
	w.in.Close()
	for range w.msgs {
	}
	return w.cmd.Wait()
}

// stop kills the child, if it started, and waits for it. A nil *worker
// does nothing.
func (w *worker) stop() {
	if w != nil {
		w.cmd.Process.Kill()
		w.wait()
	}
}

// runChild runs model in a child process and returns its result, or the
// Result of a run the parent killed for its resident size.
func runChild(ctx context.Context, c *config, args []string, herd []byte, model string, bar *progressBar, stderr io.Writer) (*bench.Result, error) {
	// A backstop: the child stops itself at the deadline.
	ctx, cancel := context.WithTimeout(ctx, c.sc.Deadline+2*time.Minute)
	defer cancel()
	w, err := startWorker(ctx, args, model, "", nil, stderr, herd)
	if err != nil {
		return nil, err
	}
	w.in.Close()
	w.rss = watchRSS(w.cmd.Process.Pid, c.sc.MaxHeap)
	defer w.rss.stop()
	m, err := w.next(bar, func(m message) bool { return m.Result != nil })
	w.wait()
	if r := w.killedResult(c, model); err != nil && r != nil {
		return r, nil
	}
	return m.Result, err
}

// killedResult is the Result of a run whose worker the parent killed for
// its resident size, or nil if it did not.
func (w *worker) killedResult(c *config, model string) *bench.Result {
	rss := w.rss.stop()
	if rss == 0 {
		return nil
	}
	// The worker's own guard did not act in time; the parent's did.
	return &bench.Result{
		Model: model, Nodes: c.sc.Nodes, LogN: c.sc.LogN, Mode: c.sc.Mode, Agent: c.sc.Agent.String(),
		Servers: c.sc.Servers, LB: c.sc.LB, Joined: w.last.Joined, Completion: w.last.Elapsed, Stopped: bench.StoppedHeapGuard,
		StopDetail: fmt.Sprintf("the worker process passed %d MiB resident (its heap guard had not stopped it yet) and was killed", rss>>20),
	}
}

// rssGuard kills a worker whose resident size passes its heap guard plus
// 1 GiB, in case that guard has not stopped it: an unbounded model's
// hundreds of scrypt goroutines can keep the worker's own checks off the
// CPUs while they allocate 32 MiB each (seen here: 10 GiB before they
// ran); the parent is another process, which the kernel schedules. It
// reads /proc; where there is none it does nothing. A nil *rssGuard does
// nothing.
type rssGuard struct {
	done   chan struct{}
	killed uint64 // resident bytes when killed; 0 if not; read after done
	once   sync.Once
	wg     sync.WaitGroup
}

func watchRSS(pid int, maxHeap uint64) *rssGuard {
	g, limit := &rssGuard{done: make(chan struct{})}, maxHeap+1<<30
	path, page := fmt.Sprintf("/proc/%d/statm", pid), uint64(os.Getpagesize())
	g.wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-g.done:
				return
			case <-tick.C:
			}
			var size, resident uint64
			b, err := os.ReadFile(path)
			if _, scanErr := fmt.Sscan(string(b), &size, &resident); err != nil || scanErr != nil {
				return
			}
			if rss := resident * page; rss > limit {
				g.killed = rss
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
	if g == nil {
		return 0
	}
	g.once.Do(func() { close(g.done) })
	g.wg.Wait()
	return g.killed
}
