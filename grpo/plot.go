package grpo

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/x/internal/atomicfile"
)

// PlotOptions configure WritePlot. The zero value gives a 1200×1200 image
// titled "GRPO training".
type PlotOptions struct {
	Width, Height int    // pixels; 0 means 1200 and 1200
	Title         string // above the top panel; "" means "GRPO training" ("SFT" for a run with no reward)
}

const plotDPI = 96

// panel is one stacked plot of WritePlot: its y label and its curves.
type panel struct {
	ylabel string
	curves []curve
}

// curve is one line: its legend name and its value at a step (ok false
// where it has none).
type curve struct {
	name  string
	value func(m Metrics) (float64, bool)
	bold  bool
}

// metricCurve is the curve of a metric as logged.
func metricCurve(name string) curve {
	return curve{name: name, value: func(m Metrics) (float64, bool) { return finite(m, name) }}
}

// WritePlot draws the curves of a run into a PNG at path, one panel under
// the other, each with its legend to the right of its data (never over
// it): the rewards (reward, each reward function's mean, the eval reward);
// tool use (tool calls and failed calls per rollout); the learning signal
// (frac_reward_zero_std, the share of groups whose rollouts scored alike,
// and the share of steps that raised a warning, watch.go); the entropy and
// KL; and the loss. A panel with no values is left out. Each curve is
// drawn faint step by step and bold as a centred moving average over
// about a fifteenth of the run (the title gives the window), so trends
// show through the noise of small batches. Steps where a metric has no
// value (NaN or absent) are skipped. A run with neither rewards nor loss
// is an error. The file is written whole (temp file + rename) or not at
// all.
func WritePlot(path string, steps []StepMetrics, opts PlotOptions) error {
	if opts.Width == 0 {
		opts.Width = 1200
	}
	if opts.Height == 0 {
		opts.Height = 1200
	}
	if opts.Width < 100 || opts.Height < 100 {
		return fmt.Errorf("write plot: %d×%d pixels is too small (want at least 100×100)", opts.Width, opts.Height)
	}
	rewards := rewardSeries(steps)
	if len(rewards) == 0 && !hasValues(steps, MetricLoss) {
		return errors.New("write plot: no reward or loss values to plot")
	}
	if opts.Title == "" {
		opts.Title = "GRPO training"
		if len(rewards) == 0 {
			opts.Title = "SFT"
		}
	}
	window := smoothingWindow(len(steps))
	if window > 1 {
		opts.Title += fmt.Sprintf(" (bold: moving average over %d steps; faint: each step)", window)
	}

	var panels []panel
	var rc []curve
	for _, name := range rewards {
		c := metricCurve(name)
		c.bold = name == MetricReward
		rc = append(rc, c)
	}
	panels = append(panels,
		panel{"reward", rc},
		panel{"per rollout", []curve{
			metricCurve(MetricToolsCallFrequency),
			{name: "failed tool calls", value: func(m Metrics) (float64, bool) {
				c, ok1 := finite(m, MetricToolsCallFrequency)
				f, ok2 := finite(m, MetricToolsFailureFrequency)
				return c * f, ok1 && ok2
			}},
		}},
		panel{"share", []curve{
			metricCurve(MetricFracRewardZeroStd),
			{name: "warnings raised", value: func(m Metrics) (float64, bool) {
				n, any := 0.0, false
				for _, w := range WarningMetrics() {
					if v, ok := finite(m, w); ok {
						n, any = math.Max(n, v), true
					}
				}
				return n, any
			}},
		}},
		panel{"nats", []curve{metricCurve(MetricEntropy), metricCurve(MetricKL)}},
		panel{"loss", []curve{metricCurve(MetricLoss)}},
	)
	var plots []*plot.Plot
	var legends []plot.Legend
	for _, pn := range panels {
		p, leg, err := linePlot(pn, steps, window)
		if err != nil {
			return fmt.Errorf("write plot: %w", err)
		}
		if p != nil {
			plots = append(plots, p)
			legends = append(legends, leg)
		}
	}
	plots[0].Title.Text = opts.Title

	w, h := vg.Length(opts.Width)*vg.Inch/plotDPI, vg.Length(opts.Height)*vg.Inch/plotDPI
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	for i, c := range layoutPanels(dc, plots, legends) {
		plots[i].Draw(c.data)
		legends[i].Draw(c.legend)
	}
	return writeFileAtomic(path, func(f *os.File) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(f)
		return err
	})
}

// panelCanvases are where one panel's plot and legend are drawn.
type panelCanvases struct{ data, legend draw.Canvas }

// layoutPanels stacks the plots on dc with their axes aligned, leaving on
// the right a strip as wide as the widest legend, where each panel's
// legend goes beside its plot, so no legend covers a curve.
func layoutPanels(dc draw.Canvas, plots []*plot.Plot, legends []plot.Legend) []panelCanvases {
	var legendW vg.Length
	for i := range legends {
		r := legends[i].Rectangle(dc)
		legendW = max(legendW, r.Max.X-r.Min.X)
	}
	legendW = min(legendW+vg.Millimeter*4, (dc.Max.X-dc.Min.X)/3)
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Millimeter * 4}, draw.Crop(dc, 0, -legendW, 0, 0))
	out := make([]panelCanvases, len(plots))
	for i, p := range plots {
		c := canvases[i][0]
		out[i] = panelCanvases{data: c, legend: draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: c.Max.X + vg.Millimeter*2, Y: c.Min.Y},
			Max: vg.Point{X: dc.Max.X, Y: c.Max.Y - p.Title.TextStyle.Height(p.Title.Text)},
		}}}
	}
	return out
}

// smoothingWindow is the moving average's width for a run of n steps:
// about n/15, odd, at least 1.
func smoothingWindow(n int) int {
	w := n / 15
	if w%2 == 0 {
		w++
	}
	return max(w, 1)
}

// rewardSeries lists the reward curves present in steps: "reward", then
// each "rewards/<fn>/mean" by name, then "eval/reward".
func rewardSeries(steps []StepMetrics) []string {
	var fns []string
	seen := map[string]bool{}
	for _, s := range steps {
		for k := range s.Metrics {
			if _, ok := isRewardMean(k); ok && !seen[k] {
				seen[k] = true
				fns = append(fns, k)
			}
		}
	}
	slices.Sort(fns)
	var out []string
	if hasValues(steps, MetricReward) {
		out = append(out, MetricReward)
	}
	for _, k := range fns {
		if hasValues(steps, k) {
			out = append(out, k)
		}
	}
	if hasValues(steps, EvalPrefix+MetricReward) {
		out = append(out, EvalPrefix+MetricReward)
	}
	return out
}

func hasValues(steps []StepMetrics, name string) bool {
	for _, s := range steps {
		if _, ok := finite(s.Metrics, name); ok {
			return true
		}
	}
	return false
}

// linePlot draws a panel's curves over the steps, each faint as logged
// and bold as a centred moving average of window steps, and returns the
// panel and its legend (drawn apart, beside the data). A panel none of
// whose curves has a value is nil.
func linePlot(pn panel, steps []StepMetrics, window int) (*plot.Plot, plot.Legend, error) {
	p := plot.New()
	p.X.Label.Text = "step"
	p.Y.Label.Text = pn.ylabel
	p.Add(plotter.NewGrid())
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	drawn := 0
	for _, c := range pn.curves {
		var xy plotter.XYs
		for _, s := range steps {
			if v, ok := c.value(s.Metrics); ok {
				xy = append(xy, plotter.XY{X: float64(s.Step), Y: v})
			}
		}
		if len(xy) == 0 {
			continue
		}
		col := plotutil.Color(drawn)
		drawn++
		width := vg.Points(2)
		if c.bold {
			width = vg.Points(3)
		}
		if window > 1 {
			raw, err := plotter.NewLine(xy)
			if err != nil {
				return nil, leg, fmt.Errorf("%s: %w", c.name, err)
			}
			r, g, b, _ := col.RGBA()
			raw.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 70}
			raw.Width = vg.Points(1)
			p.Add(raw)
			xy = movingAverage(xy, window)
		}
		line, err := plotter.NewLine(xy)
		if err != nil {
			return nil, leg, fmt.Errorf("%s: %w", c.name, err)
		}
		line.Color = col
		line.Width = width
		p.Add(line)
		leg.Add(c.name, line)
	}
	if drawn == 0 {
		return nil, leg, nil
	}
	return p, leg, nil
}

// movingAverage is the centred mean of each point with its window/2
// neighbours on either side (fewer at the ends).
func movingAverage(xy plotter.XYs, window int) plotter.XYs {
	h := window / 2
	out := make(plotter.XYs, len(xy))
	for i := range xy {
		lo, hi := max(i-h, 0), min(i+h, len(xy)-1)
		s := 0.0
		for j := lo; j <= hi; j++ {
			s += xy[j].Y
		}
		out[i] = plotter.XY{X: xy[i].X, Y: s / float64(hi-lo+1)}
	}
	return out
}

// writeFileAtomic writes path through a temporary file in the same folder
// renamed into place, so readers never see a half-written file.
func writeFileAtomic(path string, write func(*os.File) error) (err error) {
	f, err := atomicfile.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
