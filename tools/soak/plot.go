package main

import (
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writePlot draws p99 (with the target as a line) and the tables' sizes by
// minute, one above the other, as a PNG.
func writePlot(path string, samples []sample, c config) error {
	latency := plot.New()
	latency.Title.Text = "p99 publish → commit"
	latency.X.Label.Text, latency.Y.Label.Text = "minutes", "ms (log scale)"
	// Log scale: a minute of seconds must not flatten the minutes of
	// milliseconds around it.
	latency.Y.Scale, latency.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	sizes := plot.New()
	sizes.Title.Text = "table size (heap and indexes)"
	sizes.X.Label.Text, sizes.Y.Label.Text = "minutes", "MB"

	full := samples[:len(samples)-1] // the drain's interval is partial
	if len(full) == 0 {
		// A soak of one interval: the drain's is all there is, and an
		// empty log axis panics.
		full = samples
	}
	p99, want := make(plotter.XYs, len(full)), make(plotter.XYs, len(full))
	for i, x := range full {
		p99[i] = plotter.XY{X: x.elapsed.Minutes(), Y: max(msf(x.p99), 0.01)}
		want[i] = plotter.XY{X: x.elapsed.Minutes(), Y: msf(c.MaxP99)}
	}
	if err := addLine(latency, "p99", p99, 0); err != nil {
		return err
	}
	if err := addLine(latency, "target", want, 1); err != nil {
		return err
	}
	for i, t := range tables {
		xy := make(plotter.XYs, len(full))
		for j, x := range full {
			v := x.tables[t]
			xy[j] = plotter.XY{X: x.elapsed.Minutes(), Y: float64(v.size()) / (1 << 20)}
		}
		if err := addLine(sizes, t, xy, i+2); err != nil {
			return err
		}
	}
	sizes.Y.Min = 0
	sizes.Legend.Top = true

	canvas := vgimg.New(8*vg.Inch, 8*vg.Inch)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8), PadY: vg.Points(16)}
	plots := [][]*plot.Plot{{latency}, {sizes}}
	cs := plot.Align(plots, tiles, draw.New(canvas))
	for i := range plots {
		plots[i][0].Draw(cs[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: canvas}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addLine(p *plot.Plot, name string, xy plotter.XYs, color int) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(color)
	if name == "target" {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}
