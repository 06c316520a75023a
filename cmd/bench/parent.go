package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/nodepass/nodepass/bench"
)

// runParent makes the herd, measures the lower bound, runs every model
// and writes the table, the JSON and the plot.
func runParent(ctx context.Context, c *config, args []string, stdout, stderr io.Writer) (err error) {
	describe(stderr, c)
	defer func() { fmt.Fprintf(stderr, "bench: load average at end: %s\n", loadAverage()) }()
	stderr = workerStderr(stderr)
	plan, note := planSplit(c, allowedCPUs)
	fmt.Fprintf(stderr, "bench: %s\n", note)
	measure := func(h *bench.Herd) error { return h.MeasureLowerBound(ctx) }
	if plan.on() {
		measure = func(h *bench.Herd) error { return measureBounds(ctx, args, h, plan.servers, stderr) }
	}
	h, err := prepareHerd(ctx, c.sc, measure, stderr)
	if err != nil {
		return err
	}
	if err := prepareProfileDir(c); err != nil {
		return err
	}
	results, err := runModels(ctx, c, args, h, plan, stderr)
	if err != nil {
		return err
	}
	writeTable(stdout, h, c.sc, results, c.wide)
	writeRemembered(stdout, c.sc, results)
	// A wrong password let in fails the run, once every output is written.
	wrong := writeAdversity(stdout, results)
	if c.jsonPath != "" {
		err = writeResults(c.jsonPath, results)
	}
	if c.plotPath != "" && err == nil {
		err = writePlot(c.plotPath, results)
	}
	if c.cpuprofileDir != "" && err == nil {
		err = writeProfileDir(c, args, h, results)
	}
	return cmp.Or(err, wrong)
}

func describe(stderr io.Writer, c *config) {
	sc := c.sc
	fmt.Fprintf(stderr, "bench: %d nodes, logN %d, %s mode, %s agents, %s, client timeout %v, deadline %v per model, GOMAXPROCS %d\n",
		sc.Nodes, sc.LogN, sc.Mode, strings.ReplaceAll(c.agents.String(), ",", " and "), serversNote(sc.Servers, sc.LB, sc.Hung, sc.Known, sc.ValidCerts),
		sc.ClientTimeout, sc.Deadline, runtime.GOMAXPROCS(0))
	if note := adversityNote(sc); note != "" {
		fmt.Fprintf(stderr, "bench: %s\n", note)
	}
	fmt.Fprintf(stderr, "bench: %s\n", rebootNote(sc))
	rule := "max(now - 1h, the CA's), as k3s today"
	if sc.CANotBefore {
		rule = "the CA's, as k3s and RKE2 before dynamiclistener's CalculateNotBefore"
	}
	fmt.Fprintf(stderr, "bench: the servers' CA is %.3g years old; they issue certificates valid a year, NotBefore %s\n", sc.CAAge.Hours()/(365*24), rule)
}

// runModels runs every model with every agent kind of c, as plan says,
// and returns their results.
func runModels(ctx context.Context, c *config, args []string, h *bench.Herd, plan splitPlan, stderr io.Writer) ([]*bench.Result, error) {
	herdJSON, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encoding the herd: %w", err)
	}
	var results []*bench.Result
	for _, agent := range c.agents {
		// A child reads the scenario from the arguments: the last -agent
		// is its agent.
		c, args := *c, append(slices.Clip(args), "-agent="+agent.String())
		c.sc.Agent = agent
		for _, model := range c.models {
			bar := newProgressBar(stderr, rowName(model, agent.String(), len(c.agents) > 1), c.sc.Nodes)
			var res *bench.Result
			switch {
			case plan.on():
				res, err = runSplit(ctx, &c, args, herdJSON, model, plan, bar, stderr)
			case c.isolate:
				res, err = runChild(ctx, &c, args, herdJSON, model, bar, stderr)
			default:
				s := c.sc
				s.Progress = func(p bench.Progress) { bar.update(p.Joined, p.Elapsed, false) }
				res, err = runModel(ctx, &c, s, h, model)
			}
			if err != nil {
				return nil, err
			}
			bar.update(res.Joined, res.Completion, true)
			results = append(results, res)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	return results, nil
}

// serversNote says how many servers a run has, how the agents balance
// over them, how many hang, how many the agents remember and whether they
// keep valid certificates: "3 servers, sticky load balancing (1 hung)".
func serversNote(servers int, lb bench.LB, hung, known int, validCerts bool) string {
	s := plural(servers, "server") + joinIf("", servers > 1, ", "+string(lb)+" load balancing")
	if h := joinIf(", ", hung > 0, fmt.Sprintf("%d hung", hung), known > 0, fmt.Sprintf("agents know %d", known),
		validCerts, "valid certificates on disk"); h != "" {
		s += " (" + h + ")"
	}
	return s
}

// joinIf joins with sep each text whose condition, before it, holds.
func joinIf(sep string, condText ...any) string {
	var parts []string
	for i := 0; i+1 < len(condText); i += 2 {
		if condText[i].(bool) {
			parts = append(parts, condText[i+1].(string))
		}
	}
	return strings.Join(parts, sep)
}

// progressBar shows one model's progress on stderr: redrawn in place on a
// terminal, a line every 10 s and one at the end otherwise.
type progressBar struct {
	w         io.Writer
	tty       bool
	model     string
	nodes     int
	lastPrint time.Time
}

func newProgressBar(w io.Writer, model string, nodes int) *progressBar {
	var tty bool
	if f, ok := w.(*os.File); ok {
		fi, err := f.Stat()
		tty = err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	return &progressBar{w: w, tty: tty, model: model, nodes: nodes, lastPrint: time.Now()}
}

func (b *progressBar) update(joined int, elapsed time.Duration, done bool) {
	const width = 30
	filled := 0
	if b.nodes > 0 {
		filled = min(joined*width/b.nodes, width)
	}
	line := fmt.Sprintf("%-11s [%s%s] %4d/%d joined %6.1fs", b.model,
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), joined, b.nodes, elapsed.Seconds())
	switch {
	case b.tty && done:
		fmt.Fprintf(b.w, "\r%s\n", line)
	case b.tty:
		fmt.Fprintf(b.w, "\r%s", line)
	case done || time.Since(b.lastPrint) >= 10*time.Second:
		fmt.Fprintln(b.w, line)
		b.lastPrint = time.Now()
	}
}

// loadAverage returns the 1, 5 and 15 minute load averages, or "?".
func loadAverage() string {
	if l, ok := bench.LoadAverage(); ok {
		return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2])
	}
	return "?"
}

// prepareHerd makes the herd's stored hashes and measures its lower
// bounds with measure, saying so on stderr with the load average at the
// start.
func prepareHerd(ctx context.Context, sc bench.Scenario, measure func(*bench.Herd) error, stderr io.Writer) (*bench.Herd, error) {
	fmt.Fprintf(stderr, "bench: load average at start: %s\n", loadAverage())
	start := time.Now()
	h, err := bench.NewHerd(ctx, sc.Nodes, sc.LogN)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "bench: made %d stored hashes in %.1fs\n", sc.Nodes, time.Since(start).Seconds())
	if err := measure(h); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "bench: lower bound %.2fs with x/crypto's scrypt, %.2fs with nodepass's batched (%d verifications on %s)\n",
		h.LowerBound.Seconds(), h.LowerBoundBatch.Seconds(), sc.Nodes, plural(h.Workers, "worker"))
	return h, nil
}

// adversityNote describes sc's adversaries in words, or "" if none.
func adversityNote(sc bench.Scenario) string {
	return joinIf("; ", sc.Attackers > 0, fmt.Sprintf("%d attackers (%s names)", sc.Attackers, sc.AttackNames),
		sc.TokenGuessers > 0, fmt.Sprintf("%d join-token guessers", sc.TokenGuessers),
		sc.Duplicates > 0, fmt.Sprintf("%d duplicate hostnames", sc.Duplicates),
		sc.StoreFaults > 0 || sc.StoreSpikes > 0, fmt.Sprintf("store calls fail with probability %g, and %g of the others take %v",
			sc.StoreFaults, sc.StoreSpikes, sc.StoreSpike))
}

// rebootNote describes sc's reboot and digests in words.
func rebootNote(sc bench.Scenario) string {
	key := "nodepass with a DigestKey shared by its servers (the k3s models have no equivalent)"
	if sc.NoDigestKey {
		key = "nodepass without a DigestKey (-digest-key=false)"
	}
	switch sc.Reboot {
	case bench.RebootAgents:
		return "reboot of the agents: every node joined once before (unmeasured), the servers stayed up; " + key
	case bench.RebootAll:
		return fmt.Sprintf("reboot of agents and servers: every node joined once before (unmeasured), then new servers over the same store; %s", key)
	}
	return "cold herd: no node verified since the servers started; " + key
}
