package grpo

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// runCurves is a synthetic run: a rising reward, two reward functions (one
// with a missing step), tool use, the learning signal, entropy, a falling
// loss and an eval point.
func runCurves(n int) []StepMetrics {
	var steps []StepMetrics
	for i := 1; i <= n; i++ {
		m := Metrics{
			MetricReward:                float64(i) / float64(n),
			RewardMeanName("win"):       float64(i) / float64(2*n),
			RewardMeanName("fmt"):       0.5,
			MetricLoss:                  1 / float64(i),
			MetricToolsCallFrequency:    2 - float64(i)/float64(n),
			MetricToolsFailureFrequency: 0.25,
			MetricFracRewardZeroStd:     float64(i%3) / 2,
			MetricEntropy:               0.5,
			MetricKL:                    0.01 * float64(i),
			MetricWarnNoSignal:          float64(i % 2),
		}
		if i == 3 {
			m[RewardMeanName("fmt")] = math.NaN()
		}
		if i == n {
			m[EvalPrefix+MetricReward] = 0.9
		}
		steps = append(steps, StepMetrics{Step: i, Metrics: m})
	}
	return steps
}

func TestWritePlot(t *testing.T) {
	tests := []struct {
		name  string
		steps []StepMetrics
		opts  PlotOptions
		w, h  int
	}{
		{"default size", runCurves(20), PlotOptions{Title: "guess"}, 1200, 1200},
		{"custom size", runCurves(5), PlotOptions{Width: 640, Height: 480}, 640, 480},
		{"loss only (SFT)", []StepMetrics{{1, Metrics{MetricLoss: 3}}, {2, Metrics{MetricLoss: 2}}}, PlotOptions{Width: 300, Height: 200}, 300, 200},
		{"one step", runCurves(1), PlotOptions{Width: 320, Height: 240}, 320, 240},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "curves.png")
			require.NoError(t, WritePlot(path, tt.steps, tt.opts))
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			img, err := png.Decode(f)
			require.NoError(t, err)
			assert.Equal(t, tt.w, img.Bounds().Dx())
			assert.Equal(t, tt.h, img.Bounds().Dy())
			// Something was drawn: not every pixel is the background.
			bg := img.At(0, 0)
			drawn := false
			for y := 0; y < img.Bounds().Dy() && !drawn; y += 3 {
				for x := 0; x < img.Bounds().Dx(); x += 3 {
					if img.At(x, y) != bg {
						drawn = true
						break
					}
				}
			}
			assert.True(t, drawn)
			left, err := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*"))
			require.NoError(t, err)
			assert.Empty(t, left, "no temp file left behind")
		})
	}
}

// TestPlotLegendsBesideData: every panel's legend is drawn right of every
// panel's data area, and the panels are stacked in order: reward, tool
// use, learning signal, entropy, loss.
func TestPlotLegendsBesideData(t *testing.T) {
	steps := runCurves(30)
	var plots []*plot.Plot
	var legends []plot.Legend
	for _, pn := range []panel{
		{"reward", []curve{metricCurve(MetricReward), metricCurve(RewardMeanName("a very long reward function name"))}},
		{"loss", []curve{metricCurve(MetricLoss)}},
	} {
		p, leg, err := linePlot(pn, steps, smoothingWindow(len(steps)))
		require.NoError(t, err)
		plots, legends = append(plots, p), append(legends, leg)
	}
	img := vgimg.New(8*vg.Inch, 8*vg.Inch)
	dc := draw.New(img)
	cs := layoutPanels(dc, plots, legends)
	require.Len(t, cs, 2)
	assert.Greater(t, cs[0].data.Min.Y, cs[1].data.Max.Y, "the first panel is above the second")
	for i, c := range cs {
		r := legends[i].Rectangle(c.legend)
		for j := range cs {
			assert.GreaterOrEqual(t, r.Min.X, cs[j].data.Max.X, "legend %d starts right of panel %d's data", i, j)
		}
		assert.LessOrEqual(t, r.Max.X, dc.Max.X, "legend %d fits the image", i)
		assert.LessOrEqual(t, r.Max.Y, c.data.Max.Y, "legend %d is beside its panel", i)
		assert.GreaterOrEqual(t, r.Min.Y, c.data.Min.Y, "legend %d is beside its panel", i)
	}
	// A panel with no values is left out.
	p, _, err := linePlot(panel{"x", []curve{metricCurve("absent")}}, steps, 1)
	require.NoError(t, err)
	assert.Nil(t, p)
	assert.Equal(t, []float64{2, 2, 4, 4, 5}, ys(movingAverage(xys(1, 3, 2, 7, 3), 3)))
	assert.Equal(t, []int{1, 1, 3, 3, 5}, []int{smoothingWindow(1), smoothingWindow(20), smoothingWindow(30), smoothingWindow(45), smoothingWindow(75)})
}

func xys(v ...float64) plotter.XYs {
	out := make(plotter.XYs, len(v))
	for i, y := range v {
		out[i] = plotter.XY{X: float64(i + 1), Y: y}
	}
	return out
}

func ys(xy plotter.XYs) []float64 {
	out := make([]float64, len(xy))
	for i, p := range xy {
		out[i] = p.Y
	}
	return out
}

func TestWritePlotErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		path  string
		steps []StepMetrics
		opts  PlotOptions
		want  string
	}{
		{"nothing to plot", filepath.Join(dir, "a.png"), []StepMetrics{{1, Metrics{MetricKL: 1}}}, PlotOptions{}, "no reward or loss"},
		{"all NaN", filepath.Join(dir, "b.png"), []StepMetrics{{1, Metrics{MetricReward: math.NaN()}}}, PlotOptions{}, "no reward or loss"},
		{"too small", filepath.Join(dir, "c.png"), runCurves(3), PlotOptions{Width: 10, Height: 10}, "too small"},
		{"missing folder", filepath.Join(dir, "no", "d.png"), runCurves(3), PlotOptions{}, "d.png"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WritePlot(tt.path, tt.steps, tt.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NoFileExists(t, tt.path)
		})
	}
}
