package main

import (
	"fmt"
	"image/color"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/nodepass/nodepass/bench"
)

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
	p.Title.Text = fmt.Sprintf("Herd of %d nodes, scrypt logN %d, %s agents, %d server(s)%s%s, %s",
		r0.Nodes, r0.LogN, strings.Join(agents, " and "), r0.Servers, lbNote(r0.Servers, r0.LB), hungNote(r0.Hung, r0.Known, r0.ValidCerts), r0.Mode)
	p.X.Label.Text = "seconds since the reboot"
	p.Y.Label.Text = "nodes joined"
	// Head room above the herd for the legend.
	p.Y.Min, p.Y.Max = 0, float64(r0.Nodes)*1.45
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	name := rowNames(results)
	for i, r := range results {
		pts := r.Timeline()
		xys := make(plotter.XYs, 0, len(pts)+1)
		for _, pt := range pts {
			xys = append(xys, plotter.XY{X: pt.T.Seconds(), Y: float64(pt.Joined)})
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
