package main

import (
	"cmp"
	"flag"
	"fmt"
	"image/color"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/cmd/internal/pprofreport"
)

const scaleTableUsage = `usage: bench scale-table GLOB...

Prints, as a Markdown table, the medians of the -json results the GLOBs
name (quote them for the shell), a row per herd and model: completion,
over the x/crypto and the batched lower bounds (each run's in brackets),
over the servers' CPU time (1.00: busy from start to end), scrypt runs and
TLS handshakes per node, late losses (shed after 1 s held / held then sent
away) and peak memory. A run that stopped early counts, its stop said.
`

func runScaleTable(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench scale-table", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, scaleTableUsage) }
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "bench scale-table: want at least one GLOB")
		fs.Usage()
		return 2
	}
	results, err := readResults(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "bench scale-table: %v\n", err)
		return 1
	}
	writeScaleTable(stdout, results)
	return 0
}

// readResults reads every -json file the globs name.
func readResults(globs []string) ([]*bench.Result, error) {
	var all []*bench.Result
	for _, glob := range globs {
		files, err := filepath.Glob(glob)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", glob, err)
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%q matches no file", glob)
		}
		for _, f := range files {
			results, err := pprofreport.ReadResults(f)
			if err != nil {
				return nil, err
			}
			all = append(all, results...)
		}
	}
	return all, nil
}

// runMode names how a run's agents reached its servers: inproc, http (one
// process) or "http, split".
func runMode(r *bench.Result) string {
	if r.Split != nil {
		return string(r.Mode) + ", split"
	}
	return string(r.Mode)
}

// scaleRow is one herd and model: its runs.
type scaleRow struct {
	nodes, logN        int
	mode, agent, model string
	runs               []*bench.Result
}

// writeScaleTable prints results' medians by herd and model.
func writeScaleTable(w io.Writer, results []*bench.Result) {
	var rows []*scaleRow
	for _, r := range results {
		i := slices.IndexFunc(rows, func(s *scaleRow) bool {
			return s.nodes == r.Nodes && s.logN == r.LogN && s.mode == runMode(r) && s.agent == r.Agent && s.model == r.Model
		})
		if i < 0 {
			rows = append(rows, &scaleRow{nodes: r.Nodes, logN: r.LogN, mode: runMode(r), agent: r.Agent, model: r.Model})
			i = len(rows) - 1
		}
		rows[i].runs = append(rows[i].runs, r)
	}
	slices.SortStableFunc(rows, func(a, b *scaleRow) int {
		return cmp.Or(cmp.Compare(a.mode, b.mode), cmp.Compare(a.agent, b.agent), -cmp.Compare(a.logN, b.logN),
			cmp.Compare(a.nodes, b.nodes), cmp.Compare(a.model, b.model))
	})
	fmt.Fprintln(w, "| nodes | logN | mode | agents | model | runs | completion | × x/crypto bound | × batched bound | × CPU used | scrypt/node | tls/node | late: shed after 1 s / held, then sent away | peak memory | stopped |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range rows {
		med := func(f func(*bench.Result) float64) float64 { return medianOf(s.runs, f) }
		each := func(f func(*bench.Result) float64) string {
			v := make([]string, len(s.runs))
			for i, r := range s.runs {
				v[i] = fmt.Sprintf("%.2f", f(r))
			}
			return fmt.Sprintf("**%.2f** (%s)", med(f), strings.Join(v, ", "))
		}
		var late, stopped []string
		for _, r := range s.runs {
			late = append(late, fmt.Sprintf("%d/%d", r.ShedLate, r.ShedAfterWait))
			if r.Stopped != "" {
				stopped = append(stopped, fmt.Sprintf("%s (%d joined)", r.Stopped, r.Joined))
			}
		}
		if len(stopped) == 0 {
			stopped = []string{"-"}
		}
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %d | %.1f s | %s | %s | %s | %.2f | %.2f | %s | %.0f MiB | %s |\n",
			s.nodes, s.logN, s.mode, s.agent, s.model, len(s.runs),
			med(func(r *bench.Result) float64 { return r.Completion.Seconds() }),
			each(func(r *bench.Result) float64 { return r.Ratio }),
			each(func(r *bench.Result) float64 { return r.RatioBatch }),
			overCPU(s.runs),
			med(func(r *bench.Result) float64 { return r.ScryptRunsPerNode }),
			med(func(r *bench.Result) float64 { return r.PerNode(r.Handshakes) }),
			strings.Join(late, ", "),
			med(func(r *bench.Result) float64 { return float64(r.PeakMemory) / (1 << 20) }),
			strings.Join(stopped, ", "))
	}
}

// overCPU is the median of completion over the CPU time the servers'
// process used (1 / its cpu use), or "-" when a run did not measure it.
func overCPU(runs []*bench.Result) string {
	if slices.ContainsFunc(runs, func(r *bench.Result) bool { return r.CPUUse() <= 0 }) {
		return "-"
	}
	return fmt.Sprintf("%.2f", medianOf(runs, func(r *bench.Result) float64 { return 1 / r.CPUUse() }))
}

// medianOf is the median of f over runs.
func medianOf(runs []*bench.Result, f func(*bench.Result) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	return median(v)
}

const scalePlotUsage = `usage: bench scale-plot -o FILE [-bound xcrypto|batch] LABEL=GLOB...

Draws completion over the lower bound -bound names (measured in the same
run: xcrypto, as k3s runs scrypt, or batch, the Verifier's own) against
the herd's size, from -json results: a series per LABEL, model, mode,
scrypt cost and agent kind, a point per run and a line through the
medians. GLOB names LABEL's files (quote it for the shell). FILE's
extension (.svg, .png) sets the format. Flags:
`

func runScalePlot(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench scale-plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the plot to `FILE` (.svg or .png)")
	bound := fs.String("bound", "batch", "the lower bound of the ratio: xcrypto or batch")
	fs.Usage = func() {
		fmt.Fprint(stderr, scalePlotUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *out == "" || fs.NArg() == 0 {
		fmt.Fprintln(stderr, "bench scale-plot: want -o FILE and at least one LABEL=GLOB")
		fs.Usage()
		return 2
	}
	ratio, ok := boundRatios[*bound]
	if !ok {
		fmt.Fprintf(stderr, "bench scale-plot: -bound %q: want xcrypto or batch\n", *bound)
		return 2
	}
	series, err := readScaleSeries(fs.Args(), ratio)
	if err == nil {
		err = writeScalePlot(*out, *bound, series)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench scale-plot: %v\n", err)
		return 1
	}
	for _, s := range series {
		fmt.Fprintf(stdout, "%s:", s.name)
		for _, n := range s.sizes() {
			fmt.Fprintf(stdout, " %d nodes median %.2f (%d runs);", n, median(s.ratios[n]), len(s.ratios[n]))
		}
		fmt.Fprintln(stdout)
	}
	return 0
}

// scaleSeries is one label's runs in one mode: completion over the lower
// bound by herd size.
type scaleSeries struct {
	name   string
	ratios map[int][]float64
}

func (s *scaleSeries) sizes() []int { return slices.Sorted(maps.Keys(s.ratios)) }

// boundRatios are the ratios -bound names.
var boundRatios = map[string]func(*bench.Result) float64{
	"xcrypto": func(r *bench.Result) float64 { return r.Ratio },
	"batch":   func(r *bench.Result) float64 { return r.RatioBatch },
}

// readScaleSeries reads the results that each LABEL=GLOB names, and their
// ratios.
func readScaleSeries(args []string, ratio func(*bench.Result) float64) ([]*scaleSeries, error) {
	byName := map[string]*scaleSeries{}
	var series []*scaleSeries
	for _, a := range args {
		label, glob, ok := strings.Cut(a, "=")
		if !ok || label == "" || glob == "" {
			return nil, fmt.Errorf("%q: want LABEL=GLOB", a)
		}
		results, err := readResults([]string{glob})
		if err != nil {
			return nil, err
		}
		models := map[string]bool{}
		for _, r := range results {
			models[r.Model] = true
		}
		for _, r := range results {
			q := ratio(r)
			if q == 0 || r.Stopped != "" {
				continue
			}
			name := fmt.Sprintf("%s, %s, logN %d", label, runMode(r), r.LogN)
			if len(models) > 1 {
				name = fmt.Sprintf("%s, %s, %s, logN %d", label, r.Model, runMode(r), r.LogN)
			}
			if r.Agent != bench.PolicyJitter {
				name += ", " + r.Agent + " agents"
			}
			s := byName[name]
			if s == nil {
				s = &scaleSeries{name: name, ratios: map[int][]float64{}}
				byName[name] = s
				series = append(series, s)
			}
			s.ratios[r.Nodes] = append(s.ratios[r.Nodes], q)
		}
	}
	if len(series) == 0 {
		return nil, fmt.Errorf("no finished run with a lower bound in the files given")
	}
	return series, nil
}

// writeScalePlot draws series: ratio to bound (a -bound name) against
// nodes, a log scale of nodes.
func writeScalePlot(path, bound string, series []*scaleSeries) error {
	p := plot.New()
	p.Title.Text = "Cold herd: completion over the lower bound, by herd size"
	p.X.Label.Text = "nodes"
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, s := range series {
		for _, n := range s.sizes() {
			if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == float64(n) }) {
				ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
			}
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Label.Text = map[string]string{
		"xcrypto": "completion / lower bound with x/crypto's scrypt",
		"batch":   "completion / lower bound with the Verifier's scrypt, batched",
	}[bound]
	p.Y.Min = 0.8
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	maxRatio := 1.2
	for i, s := range series {
		var pts, meds plotter.XYs
		for _, n := range s.sizes() {
			for _, r := range s.ratios[n] {
				pts = append(pts, plotter.XY{X: float64(n), Y: r})
				maxRatio = max(maxRatio, r)
			}
			meds = append(meds, plotter.XY{X: float64(n), Y: median(s.ratios[n])})
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.Color = plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		line, err := plotter.NewLine(meds)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		p.Add(sc, line)
		p.Legend.Add(s.name+" (median)", line, sc)
	}
	p.Y.Max = maxRatio * 1.25 // head room for the legend
	target, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: 1.1}, {X: p.X.Max, Y: 1.1}})
	if err != nil {
		return err
	}
	target.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(target)
	p.Legend.Add("1.10", target)
	if err := p.Save(20*vg.Centimeter, 13*vg.Centimeter, path); err != nil {
		return fmt.Errorf("writing plot: %w", err)
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.SortFunc(s, cmp.Compare)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writePlot draws joined nodes over time for every model in one chart,
// with the lower bound as a dashed vertical line; the format (SVG or PNG)
// follows path's extension. The scenario is read from the first result.
func writePlot(path string, results []*bench.Result) error {
	if len(results) == 0 {
		return fmt.Errorf("plot: no results")
	}
	r0 := results[0]
	p := plot.New()
	agents := []string{}
	for _, r := range results {
		if !slices.Contains(agents, r.Agent) {
			agents = append(agents, r.Agent)
		}
	}
	p.Title.Text = fmt.Sprintf("Herd of %d nodes, scrypt logN %d, %s agents, %s, %s",
		r0.Nodes, r0.LogN, strings.Join(agents, " and "), serversNote(r0.Servers, r0.LB, r0.Hung, r0.Known, r0.ValidCerts), r0.Mode)
	p.X.Label.Text = "seconds since the reboot"
	p.Y.Label.Text = "nodes joined"
	// Head room above the herd for the legend.
	p.Y.Min, p.Y.Max = 0, float64(r0.Nodes)*1.45
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	name := rowNames(results)
	for i, r := range results {
		var xys plotter.XYs
		for _, pt := range r.Timeline() {
			xys = append(xys, plotter.XY{X: pt[0], Y: pt[1]})
		}
		// Carry the line on to where the run ended.
		if end := r.Completion.Seconds(); end > xys[len(xys)-1].X {
			xys = append(xys, plotter.XY{X: end, Y: float64(r.Joined)})
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		line.StepStyle = plotter.PostStep
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		p.Add(line)
		label := name[r]
		if r.Stopped != "" {
			label = fmt.Sprintf("%s (%d joined, stopped: %s)", name[r], r.Joined, r.Stopped)
		}
		p.Legend.Add(label, line)
	}
	if lb := r0.LowerBound.Seconds(); lb > 0 {
		bound, err := plotter.NewLine(plotter.XYs{{X: lb, Y: 0}, {X: lb, Y: float64(r0.Nodes)}})
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		bound.Color = color.Gray{Y: 96}
		bound.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(bound)
		p.Legend.Add(fmt.Sprintf("lower bound %.1fs", lb), bound)
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	if err := p.Save(24*vg.Centimeter, 14*vg.Centimeter, path); err != nil {
		return fmt.Errorf("writing plot: %w", err)
	}
	return nil
}
