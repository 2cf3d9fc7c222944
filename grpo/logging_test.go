package grpo

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
)

// assertMetricsEqual compares two Metrics with NaN equal to NaN.
func assertMetricsEqual(t *testing.T, want, got Metrics, msgAndArgs ...any) {
	t.Helper()
	assert.ElementsMatch(t, want.Keys(), got.Keys(), msgAndArgs...)
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			continue
		}
		if math.IsNaN(w) {
			assert.True(t, math.IsNaN(g), "%s: want NaN, got %v", k, g)
			continue
		}
		assert.InDelta(t, w, g, 1e-12*max(1, math.Abs(w)), "%s", k)
	}
}

func TestWindowMetrics(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name  string
		steps []Metrics
		want  Metrics
	}{
		{"one step is itself", []Metrics{{MetricLoss: 0.5, MetricReward: 1}}, Metrics{MetricLoss: 0.5, MetricReward: 1}},
		{"means", []Metrics{{MetricLoss: 1, MetricGradNorm: 2, MetricStepTime: 3}, {MetricLoss: 3, MetricGradNorm: 4, MetricStepTime: 5}},
			Metrics{MetricLoss: 2, MetricGradNorm: 3, MetricStepTime: 4}},
		{"state is the last step's", []Metrics{{MetricNumTokens: 100, MetricEpoch: 0, MetricLearningRate: 1e-3}, {MetricNumTokens: 250, MetricEpoch: 1, MetricLearningRate: 5e-4}},
			Metrics{MetricNumTokens: 250, MetricEpoch: 1, MetricLearningRate: 5e-4}},
		{"extremes stay extremes", []Metrics{
			{MetricCompletionsMinLength: 4, MetricCompletionsMaxLength: 9, MetricClipRatioLowMin: 0.1, MetricClipRatioHighMax: 0.2, MetricSamplingISRatioMin: 0.9, MetricSamplingISRatioMax: 1.1, MetricCompletionsMinTermLength: 5, MetricCompletionsMaxTermLength: 8},
			{MetricCompletionsMinLength: 2, MetricCompletionsMaxLength: 7, MetricClipRatioLowMin: 0.3, MetricClipRatioHighMax: 0.4, MetricSamplingISRatioMin: 0.8, MetricSamplingISRatioMax: 1.3, MetricCompletionsMinTermLength: 6, MetricCompletionsMaxTermLength: 9},
		}, Metrics{MetricCompletionsMinLength: 2, MetricCompletionsMaxLength: 9, MetricClipRatioLowMin: 0.1, MetricClipRatioHighMax: 0.4, MetricSamplingISRatioMin: 0.8, MetricSamplingISRatioMax: 1.3, MetricCompletionsMinTermLength: 5, MetricCompletionsMaxTermLength: 9}},
		{"NaN is no value", []Metrics{{MetricKL: nan, MetricReward: 1, MetricNumTokens: 7}, {MetricKL: 0.2, MetricReward: nan, MetricNumTokens: nan}, {MetricKL: 0.4, MetricReward: nan}},
			Metrics{MetricKL: 0.3, MetricReward: 1, MetricNumTokens: 7}},
		{"all NaN stays NaN", []Metrics{{RewardMeanName("f"): nan, MetricCompletionsMaxLength: nan}, {RewardMeanName("f"): nan, MetricCompletionsMaxLength: nan}},
			Metrics{RewardMeanName("f"): nan, MetricCompletionsMaxLength: nan}},
		{"a name in some steps only", []Metrics{{MetricLoss: 1}, {MetricLoss: 2, MetricCISPOClipRatio: 0.5}, {MetricLoss: 3}},
			Metrics{MetricLoss: 2, MetricCISPOClipRatio: 0.5}},
		{"eval names combine alike", []Metrics{{EvalPrefix + MetricNumTokens: 1, EvalPrefix + MetricCompletionsMinLength: 3, EvalPrefix + MetricReward: 0}, {EvalPrefix + MetricNumTokens: 2, EvalPrefix + MetricCompletionsMinLength: 1, EvalPrefix + MetricReward: 1}},
			Metrics{EvalPrefix + MetricNumTokens: 2, EvalPrefix + MetricCompletionsMinLength: 1, EvalPrefix + MetricReward: 0.5}},
		{"reward names are means whatever the function's name", []Metrics{{RewardMeanName("min_steps"): 1, RewardStdName("max"): 1}, {RewardMeanName("min_steps"): 3, RewardStdName("max"): 3}},
			Metrics{RewardMeanName("min_steps"): 2, RewardStdName("max"): 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := WindowMetrics(tt.steps)
			require.NoError(t, err)
			assertMetricsEqual(t, tt.want, got)
		})
	}
	_, err := WindowMetrics(nil)
	assert.ErrorContains(t, err, "no steps")
}

// TestLoggingSteps drives Steps by hand with LoggingSteps 3: the callbacks
// get steps 3 and 6 (each the WindowMetrics of its three steps, as the
// reports have them) and, from FlushMetrics, step 7 alone.
func TestLoggingSteps(t *testing.T) {
	cfg := testConfig(2, 1)
	cfg.LoggingSteps, cfg.MaxSteps = 3, 7
	var steps []int
	var lines []Metrics
	tr, _ := newScripted(t, cfg, threeWay, WithEnv(counters()), WithReward("n", 1, func(_ context.Context, r *Rollout) (float64, error) {
		return float64(r.ModelTokens() % 5), nil
	}), WithCallback(func(step int, m Metrics) error {
		steps, lines = append(steps, step), append(lines, m)
		return nil
	}))
	var per []Metrics
	for range cfg.MaxSteps {
		rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
		require.NoError(t, err)
		per = append(per, rep.Metrics...)
	}
	require.Len(t, per, 7)
	assert.Equal(t, []int{3, 6}, steps)
	require.NoError(t, tr.FlushMetrics())
	require.NoError(t, tr.FlushMetrics(), "nothing pending")
	require.Equal(t, []int{3, 6, 7}, steps)
	for k, w := range [][]Metrics{per[0:3], per[3:6], per[6:7]} {
		want, err := WindowMetrics(w)
		require.NoError(t, err)
		assertMetricsEqual(t, want, lines[k], "line %d", k)
	}
	assert.InDelta(t, (per[0][MetricLoss]+per[1][MetricLoss]+per[2][MetricLoss])/3, lines[0][MetricLoss], 1e-12)
	assert.Equal(t, per[5][MetricNumTokens], lines[1][MetricNumTokens])
}

// TestTrainLogsFractionalEpoch: "epoch" is the data drawn, in epochs, as
// Hugging Face logs it: 5 rows at 2 per generation feed 2 generations per
// epoch (a row sits out each epoch), so 0.5, 1, 1.5, 2.
func TestTrainLogsFractionalEpoch(t *testing.T) {
	cfg := testConfig(2, 2)
	cfg.MaxSteps, cfg.OutputDir = 4, t.TempDir()
	tr, _ := newScripted(t, cfg, threeWay, WithEnv(counters()), WithReward("one", 1, constant(1)))
	rows := make([]env.Row, 5)
	for i := range rows {
		rows[i] = env.Row{"prompt": fmt.Sprintf("Go %d: ", i)}
	}
	require.NoError(t, tr.Train(context.Background(), NewDataset(rows)))
	logged, err := ReadMetrics(filepath.Join(cfg.OutputDir, MetricsFile))
	require.NoError(t, err)
	var epochs []float64
	for _, l := range logged {
		epochs = append(epochs, l.Metrics[MetricEpoch])
	}
	assert.Equal(t, []float64{0.5, 1, 1.5, 2}, epochs)
}

// TestTrainLoggingSteps: Train writes a metrics line every LoggingSteps
// steps and one for the steps left at the end; the progress bar's lines
// follow the logged steps.
func TestTrainLoggingSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	cfg := testConfig(2, 1)
	cfg.LoggingSteps, cfg.MaxSteps, cfg.OutputDir = 2, 5, t.TempDir()
	var progress bytes.Buffer
	var steps []int
	tr, _ := newScripted(t, cfg, threeWay, WithEnv(counters()), WithReward("one", 1, constant(1)), WithProgress(&progress),
		WithCallback(func(step int, _ Metrics) error { steps = append(steps, step); return nil }))
	require.NoError(t, tr.Train(context.Background(), NewDataset([]env.Row{{"prompt": "Go: "}})))
	assert.Equal(t, []int{2, 4, 5}, steps)
	logged, err := ReadMetrics(filepath.Join(cfg.OutputDir, MetricsFile))
	require.NoError(t, err)
	require.Len(t, logged, 3)
	assert.Equal(t, []int{2, 4, 5}, []int{logged[0].Step, logged[1].Step, logged[2].Step})
	assert.Contains(t, progress.String(), "step 2/5")
	assert.Contains(t, progress.String(), "step 5/5")
	assert.NotContains(t, progress.String(), "step 1/5")
	assert.NotContains(t, progress.String(), "step 3/5")

	// Stopped during the fourth generation (its rewards): the state stays
	// at step 3, which the window holds, so the log gets a line for it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	stopAt := func(_ context.Context, _ *Rollout) (float64, error) {
		if calls.Add(1) == 7 { // 2 rollouts a generation
			cancel()
		}
		return 1, nil
	}
	cfg.OutputDir = t.TempDir()
	steps = nil
	tr, _ = newScripted(t, cfg, threeWay, WithEnv(counters()), WithReward("one", 1, stopAt),
		WithCallback(func(step int, _ Metrics) error { steps = append(steps, step); return nil }))
	require.ErrorIs(t, tr.Train(ctx, NewDataset([]env.Row{{"prompt": "Go: "}})), context.Canceled)
	assert.Equal(t, 3, tr.State().GlobalStep)
	assert.Equal(t, []int{2, 3}, steps)
	logged, err = ReadMetrics(filepath.Join(cfg.OutputDir, MetricsFile))
	require.NoError(t, err)
	assert.Len(t, logged, 2)
}

// TestProgressAdvance: between logged steps the bar moves and keeps the
// figures it showed last; plain lines are written only for logged steps.
func TestProgressAdvance(t *testing.T) {
	var bar bytes.Buffer
	p := NewProgress(&bar, 4, ProgressOptions{Mode: ProgressBar, Description: "grpo"})
	require.NoError(t, p.Update(2, Metrics{MetricReward: 0.25}))
	require.NoError(t, p.Advance(3))
	assert.Contains(t, bar.String(), "3/4")
	assert.Contains(t, bar.String()[bytes.LastIndex(bar.Bytes(), []byte("\r")):], "reward 0.25")
	var lines bytes.Buffer
	p = NewProgress(&lines, 4, ProgressOptions{Mode: ProgressLines})
	require.NoError(t, p.Advance(1))
	assert.Empty(t, lines.String())
}
