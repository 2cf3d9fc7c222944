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

// PlotOptions configure WritePlot. The zero value gives a 1200×900 image.
type PlotOptions struct {
	Width, Height int    // pixels; 0 means 1200 and 900
	Title         string // above the reward panel
}

const plotDPI = 96

// WritePlot draws the curves of a run into a PNG at path: a panel with the
// reward, each reward function's mean and the eval reward, and a panel with
// the loss, over the step. Steps where a metric has no value (NaN or
// absent) are skipped. A run with neither rewards nor loss is an error. The
// file is written whole (temp file + rename) or not at all.
func WritePlot(path string, steps []StepMetrics, opts PlotOptions) error {
	if opts.Width == 0 {
		opts.Width = 1200
	}
	if opts.Height == 0 {
		opts.Height = 900
	}
	if opts.Width < 100 || opts.Height < 100 {
		return fmt.Errorf("write plot: %d×%d pixels is too small (want at least 100×100)", opts.Width, opts.Height)
	}
	var panels []*plot.Plot
	rewards := rewardSeries(steps)
	if len(rewards) > 0 {
		p, err := linePlot(opts.Title, "reward", rewards, steps)
		if err != nil {
			return fmt.Errorf("write plot: %w", err)
		}
		panels = append(panels, p)
	}
	if hasValues(steps, MetricLoss) {
		p, err := linePlot("", "loss", []string{MetricLoss}, steps)
		if err != nil {
			return fmt.Errorf("write plot: %w", err)
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return errors.New("write plot: no reward or loss values to plot")
	}

	w, h := vg.Length(opts.Width)*vg.Inch/plotDPI, vg.Length(opts.Height)*vg.Inch/plotDPI
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Millimeter * 4}, dc)
	for i, p := range panels {
		p.Draw(canvases[i][0])
	}
	return writeFileAtomic(path, func(f *os.File) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(f)
		return err
	})
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
		if v, ok := s.Metrics[name]; ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return true
		}
	}
	return false
}

// linePlot draws one line per named metric over the steps.
func linePlot(title, ylabel string, names []string, steps []StepMetrics) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "step"
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, name := range names {
		var xy plotter.XYs
		for _, s := range steps {
			if v, ok := s.Metrics[name]; ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
				xy = append(xy, plotter.XY{X: float64(s.Step), Y: v})
			}
		}
		line, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		if name == MetricReward {
			line.Width = vg.Points(2.5)
		}
		p.Add(line)
		p.Legend.Add(name, line)
	}
	return p, nil
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
