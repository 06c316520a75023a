package main

// -split: each model's servers and its agents run in two processes of
// their own, each pinned to its own CPUs (sched_setaffinity) with its
// GOMAXPROCS set to match, so that the servers' figures are the servers'
// alone: the agents' TLS handshakes no longer run on the servers' CPUs.
// The lower bounds are measured on the servers' CPUs only, in a third
// pinned process. See bench.StartServers for what a split run is.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nodepass/nodepass/bench"
)

// The roles of a split run's workers (-worker-role).
const (
	roleServers = "servers"
	roleAgents  = "agents"
	roleBound   = "bound"
)

// startDelay is how far ahead the parent sets a split run's start, so
// that both workers have it before it comes.
const startDelay = 100 * time.Millisecond

// splitPlan is where a split run's two sides run: the CPUs of each; both
// nil when the run is not split.
type splitPlan struct {
	agents, servers []int
}

func (p splitPlan) on() bool { return p.servers != nil }

// splitUnsupported returns the flag that keeps c's scenario from running
// split, or "".
func splitUnsupported(c *config) string {
	switch {
	case c.sc.Mode != bench.ModeHTTP:
		return "-mode " + string(c.sc.Mode) + " (no network between agents and servers)"
	case c.sc.Attackers > 0:
		return "-attackers (attackers run in one process with the servers)"
	case c.sc.Duplicates > 0:
		return "-duplicates (duplicates run in one process with the servers)"
	case c.cpuprofileDir != "":
		return "-cpuprofile-dir (profiles cover one process)"
	case !c.isolate:
		return "-isolate=false"
	}
	return ""
}

// planSplit decides where c's run goes, from the CPUs this process may
// use (allowedCPUs), and says so in a line for stderr. A split that
// cannot be made falls back to one process.
func planSplit(c *config, allowedCPUs func() ([]int, error)) (splitPlan, string) {
	if c.split == "off" {
		return splitPlan{}, "split: off (-split off): agents and servers share the CPUs, in one process per model"
	}
	if why := splitUnsupported(c); why != "" {
		return splitPlan{}, "split: off: not with " + why + "; agents and servers share the CPUs, in one process per model"
	}
	allowed, allowedErr := allowedCPUs()
	switch {
	case allowedErr != nil:
		return splitPlan{}, fmt.Sprintf("split: off, cannot pin processes here: %v; agents and servers share the CPUs, in one process per model", allowedErr)
	case len(allowed) < 2:
		return splitPlan{}, fmt.Sprintf("split: off, this process may use %d CPU (%s), and each side needs one; agents and servers share it, in one process per model",
			len(allowed), cpuString(allowed))
	}
	n := len(allowed) / 2 // the agents' CPUs
	p := splitPlan{servers: allowed[:len(allowed)-n], agents: allowed[len(allowed)-n:]}
	return p, fmt.Sprintf("split: agents on CPU %s (GOMAXPROCS %d), servers on CPU %s (GOMAXPROCS %d); lower bounds on the servers' CPUs",
		cpuString(p.agents), len(p.agents), cpuString(p.servers), len(p.servers))
}

// cpuString lists cpus as "0", "0,1" or "none".
func cpuString(cpus []int) string {
	return cmp.Or(strings.ReplaceAll(strings.Trim(fmt.Sprint(cpus), "[]"), " ", ","), "none")
}

// measureBounds measures h's lower bounds in a worker pinned to cpus (the
// servers' CPUs of a split run).
func measureBounds(ctx context.Context, args []string, h *bench.Herd, cpus []int, stderr io.Writer) error {
	herd, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encoding the herd: %w", err)
	}
	w, err := startWorker(ctx, args, bench.ModelNodepass, roleBound, cpus, stderr, herd)
	if err != nil {
		return err
	}
	w.in.Close()
	m, err := w.next(nil, func(m message) bool { return m.Bounds != nil })
	w.wait()
	if err != nil {
		return fmt.Errorf("measuring the lower bounds on CPU %s: %w", cpuString(cpus), err)
	}
	b := m.Bounds
	h.LowerBound, h.LowerBoundBatch, h.Workers = b.LowerBound, b.LowerBoundBatch, b.Workers
	h.BoundLoad, h.BoundWaitShare, h.BoundOthersShare = b.BoundLoad, b.BoundWaitShare, b.BoundOthersShare
	return nil
}

// runSplit runs model with its servers and its agents in two workers,
// pinned as p says, and returns the result with the CPUs each reported.
func runSplit(ctx context.Context, c *config, args []string, herd []byte, model string, p splitPlan, bar *progressBar, stderr io.Writer) (_ *bench.Result, err error) {
	// A backstop: the agents stop themselves at the deadline.
	ctx, cancel := context.WithTimeout(ctx, c.sc.Deadline+2*time.Minute)
	defer cancel()
	var servers, agents *worker
	defer func() {
		if err != nil {
			servers.stop()
			agents.stop()
		}
	}()
	isReady := func(m message) bool { return m.Ready }
	if servers, err = startWorker(ctx, args, model, roleServers, p.servers, stderr, herd); err != nil {
		return nil, err
	}
	servers.rss = watchRSS(servers.cmd.Process.Pid, c.sc.MaxHeap)
	defer servers.rss.stop()
	srvReady, err := servers.next(nil, isReady)
	if err != nil {
		return nil, err
	}
	if agents, err = startWorker(ctx, args, model, roleAgents, p.agents, stderr, herd, control{Endpoint: srvReady.Endpoint}); err != nil {
		return nil, err
	}
	agReady, err := agents.next(nil, isReady)
	if err != nil {
		return nil, err
	}
	start := time.Now().Add(startDelay)
	for _, w := range []*worker{servers, agents} {
		if err := w.send(control{StartAt: start.UnixNano()}); err != nil {
			return nil, err
		}
	}
	rep, err := awaitReport(agents, servers, bar)
	if err != nil {
		return nil, err
	}
	if err := agents.wait(); err != nil {
		return nil, fmt.Errorf("%s: %w", agents.name, err)
	}
	servers.last = agents.last
	m, err := message{}, servers.send(control{Agents: rep})
	if err == nil {
		m, err = servers.next(nil, func(m message) bool { return m.Result != nil })
		servers.wait()
	}
	if r := servers.killedResult(c, model); err != nil && r != nil {
		return r, nil
	} else if err != nil {
		return nil, err
	}
	m.Result.Split.AgentCPUs, m.Result.Split.ServerCPUs = agReady.CPUs, srvReady.CPUs
	return m.Result, nil
}

// awaitReport returns the agents' report, their progress on bar on the
// way. The servers may trip their heap guard meanwhile, or be killed for
// their resident size: the agents are told to stop then.
func awaitReport(agents, servers *worker, bar *progressBar) (*bench.AgentReport, error) {
	srvMsgs := servers.msgs
	for {
		select {
		case m, ok := <-agents.msgs:
			if !ok || m.Error != "" {
				return nil, fmt.Errorf("%s: %s", agents.name, cmp.Or(m.Error, fmt.Sprint("ended without a report: ", agents.cmd.Wait())))
			}
			if m.Progress != nil {
				agents.last = *m.Progress
				bar.update(m.Progress.Joined, m.Progress.Elapsed, false)
			}
			if m.Agents != nil {
				return m.Agents, nil
			}
		case m, ok := <-srvMsgs:
			if m.Error != "" {
				return nil, fmt.Errorf("%s: %s", servers.name, m.Error)
			}
			if !ok || m.Tripped {
				srvMsgs = nil
				if err := agents.send(control{Stop: true}); err != nil {
					return nil, err
				}
			}
		}
	}
}

// ready says this worker is set up, and where it runs.
func ready(enc *encoder, ep *bench.Endpoint) error {
	cpus, err := allowedCPUs()
	if err != nil {
		return err
	}
	return enc.send(message{Ready: true, Endpoint: ep, CPUs: cpus})
}

// runServersWorker is a split run's servers: it starts them, says where
// they listen, begins at the start the parent sends, says when the heap
// guard trips, and finishes with the agents' report.
func runServersWorker(ctx context.Context, sc bench.Scenario, model string, h *bench.Herd, dec *json.Decoder, enc *encoder) error {
	srv, err := bench.StartServers(ctx, sc, h, model)
	if err != nil {
		return err
	}
	ep := srv.Endpoint()
	if err := ready(enc, &ep); err != nil {
		return err
	}
	var ctl control
	if err := expect(dec, &ctl, "the start", func(c control) bool { return c.StartAt != 0 }); err != nil {
		return err
	}
	srv.Begin(time.Unix(0, ctl.StartAt))
	go func() {
		<-srv.Tripped()
		enc.send(message{Tripped: true})
	}()
	if err := expect(dec, &ctl, "the agents' report", func(c control) bool { return c.Agents != nil }); err != nil {
		return err
	}
	res, err := srv.Finish(ctx, ctl.Agents)
	if err != nil {
		return err
	}
	return enc.send(message{Result: res})
}

// runAgentsWorker is a split run's agents: it makes them for the servers'
// endpoint, starts them at the start the parent sends, stops them if the
// parent says so, and sends their report.
func runAgentsWorker(ctx context.Context, sc bench.Scenario, h *bench.Herd, dec *json.Decoder, enc *encoder) error {
	var ctl control
	if err := expect(dec, &ctl, "the servers' endpoint", func(c control) bool { return c.Endpoint != nil }); err != nil {
		return err
	}
	agents, err := bench.NewAgents(ctx, sc, h, *ctl.Endpoint)
	if err != nil {
		return err
	}
	if err := ready(enc, nil); err != nil {
		return err
	}
	if err := expect(dec, &ctl, "the start", func(c control) bool { return c.StartAt != 0 }); err != nil {
		return err
	}
	halt := make(chan struct{})
	go func() {
		var stop control
		if dec.Decode(&stop) == nil && stop.Stop {
			close(halt)
		}
	}()
	return enc.send(message{Agents: agents.Run(ctx, time.Unix(0, ctl.StartAt), halt)})
}

// expect reads the next control line into ctl and fails, saying what it
// waited for, unless ok finds what it waited for in it.
func expect(dec *json.Decoder, ctl *control, what string, ok func(control) bool) error {
	*ctl = control{}
	if err := dec.Decode(ctl); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	if !ok(*ctl) {
		return fmt.Errorf("waiting for %s: another line came", what)
	}
	return nil
}
