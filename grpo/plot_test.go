package grpo

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runCurves is a synthetic run: a rising reward, two reward functions (one
// with a missing step), a falling loss and an eval point.
func runCurves(n int) []StepMetrics {
	var steps []StepMetrics
	for i := 1; i <= n; i++ {
		m := Metrics{
			MetricReward:          float64(i) / float64(n),
			RewardMeanName("win"): float64(i) / float64(2*n),
			RewardMeanName("fmt"): 0.5,
			MetricLoss:            1 / float64(i),
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
		{"default size", runCurves(20), PlotOptions{Title: "guess"}, 1200, 900},
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
