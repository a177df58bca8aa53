package bench

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	zxColor    = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	sshfsColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	localColor = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
)

// panel is one workload's plot.
type panel struct{ w, label string }

// plot draws time against RTT, one panel per workload, zx and sshfs, with
// a log time axis. Projected sshfs times are drawn as rings; the
// rate-limited transfers as triangles.
func (rep *Report) plot(path string) error {
	var panels []panel
	cols := 3
	if rep.Suite == SuiteFUSE {
		panels = rep.fuseRows()
		cols = 4
	} else {
		panels = rep.nativeRows()
	}
	nrows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, nrows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, row := range panels {
		p := plot.New()
		p.Title.Text = row.label
		p.X.Label.Text = "RTT (ms)"
		p.Y.Label.Text = "time (s, log)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
		points, ylo, yhi := 0, 0.0, 0.0
		for _, sys := range []string{"zx", "sshfs"} {
			col := zxColor
			if sys == "sshfs" {
				col = sshfsColor
			}
			var all, measured, projected, rated plotter.XYs
			for _, rtt := range rep.RTTsMs {
				r := rep.find(row.w, sys, rtt, 0)
				if r == nil {
					continue
				}
				t, proj, ok := r.Time()
				if !ok || t <= 0 {
					continue
				}
				all = append(all, plotter.XY{X: rtt, Y: t})
				points++
				ylo, yhi = minPos(ylo, t), max(yhi, t)
				if proj {
					projected = append(projected, plotter.XY{X: rtt, Y: t})
				} else {
					measured = append(measured, plotter.XY{X: rtt, Y: t})
				}
			}
			if rep.RateMbit > 0 {
				if r := rep.find(row.w, sys, rep.RateRTT, rep.RateMbit); r != nil {
					if t, _, ok := r.Time(); ok && t > 0 {
						rated = append(rated, plotter.XY{X: rep.RateRTT, Y: t})
						points++
						ylo, yhi = minPos(ylo, t), max(yhi, t)
					}
				}
			}
			name := sys
			if sys == "sshfs" && sshfsBase(row.w) != row.w {
				name = "sshfs (" + sshfsBase(row.w) + ")"
			}
			if len(all) > 1 {
				l, err := plotter.NewLine(all)
				if err != nil {
					return err
				}
				l.Color = col
				l.Width = vg.Points(1.5)
				if sys == "sshfs" {
					l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
				}
				p.Add(l)
			}
			for _, pts := range []struct {
				xys    plotter.XYs
				glyph  draw.GlyphDrawer
				radius float64
				legend string
			}{
				{measured, draw.CircleGlyph{}, 3, name},
				{projected, draw.RingGlyph{}, 4, name + " (projected)"},
				{rated, draw.TriangleGlyph{}, 4, fmt.Sprintf("%s @ %g Mbit/s", sys, rep.RateMbit)},
			} {
				if len(pts.xys) == 0 {
					continue
				}
				s, err := plotter.NewScatter(pts.xys)
				if err != nil {
					return err
				}
				s.Color = col
				s.Shape = pts.glyph
				s.Radius = vg.Points(pts.radius)
				p.Add(s)
				p.Legend.Add(pts.legend, s)
			}
		}
		if loc := rep.find(row.w, "local", 0, 0); loc != nil && len(rep.RTTsMs) > 0 {
			// The local disk does not depend on the RTT: a flat line.
			if t, _, ok := loc.Time(); ok && t > 0 {
				l, err := plotter.NewLine(plotter.XYs{{X: minf(rep.RTTsMs), Y: t}, {X: maxf(rep.RTTsMs), Y: t}})
				if err != nil {
					return err
				}
				l.Color = localColor
				l.Width = vg.Points(1.5)
				l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
				p.Add(l)
				p.Legend.Add("local disk", l)
				points++
				ylo, yhi = minPos(ylo, t), max(yhi, t)
			}
		}
		switch {
		case points == 0:
			// A log axis needs a positive range even with nothing on it.
			p.Y.Min, p.Y.Max = 0.01, 1
			p.Title.Text += " (not run)"
		case yhi < 2*ylo:
			// gonum widens an empty range by ±1, below 0 on a log axis.
			p.Y.Min, p.Y.Max = ylo/2, yhi*2
		}
		p.X.Min = -5
		if len(rep.RTTsMs) > 0 {
			p.X.Max = maxf(rep.RTTsMs) + 5
		}
		grid[i/cols][i%cols] = p
	}
	img := vgimg.NewWith(vgimg.UseWH(vg.Points(400*float64(cols)), vg.Points(360*float64(nrows))), vgimg.UseDPI(96))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: nrows, Cols: cols, PadX: vg.Points(14), PadY: vg.Points(14),
		PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j := range grid[i] {
			if grid[i][j] != nil {
				grid[i][j].Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// minf returns the smallest of xs.
func minf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

// minPos returns the smaller of a and b, treating 0 as unset.
func minPos(a, b float64) float64 {
	if a == 0 || b < a {
		return b
	}
	return a
}
