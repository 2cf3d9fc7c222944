package grpo

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runSteps(t *testing.T, o *runOutput, from, to int) {
	for step := from; step <= to; step++ {
		for _, cb := range o.callbacks() {
			require.NoError(t, cb(step, Metrics{MetricReward: float64(step), MetricLoss: 1 / float64(step)}))
		}
		if o.completions != nil {
			require.NoError(t, o.completions.Write(CompletionRecord{Step: step, Prompt: "p", Completion: "c"}))
		}
	}
}

func TestRunOutput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	var bar bytes.Buffer
	o, err := newRunOutput(dir, &bar, 4, "grpo", 0, true)
	require.NoError(t, err)
	runSteps(t, o, 1, 2)
	o.close() // stopped early: the logs keep what was written
	logged, err := ReadMetrics(filepath.Join(dir, MetricsFile))
	require.NoError(t, err)
	assert.Len(t, logged, 2)
	assert.NoFileExists(t, filepath.Join(dir, PlotFile))

	o, err = newRunOutput(dir, &bar, 4, "grpo", 2, true) // resumed at step 2: append
	require.NoError(t, err)
	runSteps(t, o, 3, 4)
	require.NoError(t, o.finish())
	logged, err = ReadMetrics(filepath.Join(dir, MetricsFile))
	require.NoError(t, err)
	require.Len(t, logged, 4)
	assert.Equal(t, []int{1, 2, 3, 4}, []int{logged[0].Step, logged[1].Step, logged[2].Step, logged[3].Step})
	comp, err := os.ReadFile(filepath.Join(dir, CompletionsFile))
	require.NoError(t, err)
	assert.Equal(t, 4, bytes.Count(comp, []byte("\n")))
	assert.FileExists(t, filepath.Join(dir, PlotFile), "the plot covers the whole run")
	assert.Contains(t, bar.String(), "grpo step 4/4 (100%) reward 4 loss 0.25")

	o, err = newRunOutput(dir, nil, 4, "grpo", 0, false) // a fresh run truncates
	require.NoError(t, err)
	assert.Nil(t, o.completions)
	assert.Len(t, o.callbacks(), 1, "metrics only: no progress writer")
	runSteps(t, o, 1, 1)
	require.NoError(t, o.finish())
	logged, err = ReadMetrics(filepath.Join(dir, MetricsFile))
	require.NoError(t, err)
	assert.Len(t, logged, 1)
}

func TestRunOutputNoFolder(t *testing.T) {
	o, err := newRunOutput("", io.Discard, 2, "sft", 0, true)
	require.NoError(t, err)
	assert.Nil(t, o.metrics)
	assert.Nil(t, o.completions, "no folder, no completions log")
	runSteps(t, o, 1, 2)
	require.NoError(t, o.finish())

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = newRunOutput(filepath.Join(file, "sub"), nil, 2, "sft", 0, false)
	assert.ErrorContains(t, err, "sft: output folder")
}

// TestRunOutputResumeCutsLogs: a run killed after step 5 with its last
// checkpoint at step 3 (and, in some cases, a line torn by the kill)
// resumes at 3; the logs are cut back to step 3 and the resumed steps are
// logged once, so the logs equal an uninterrupted run's.
func TestRunOutputResumeCutsLogs(t *testing.T) {
	whole := t.TempDir()
	o, err := newRunOutput(whole, nil, 6, "grpo", 0, true)
	require.NoError(t, err)
	runSteps(t, o, 1, 6)
	o.close()
	for _, tc := range []struct {
		name string
		torn string // appended to both logs after step 5
	}{
		{"clean", ""},
		{"torn line", `{"step":6,"reward":0.`},
		{"torn before its newline", `{"step":6,"reward":0.5}`},
		{"torn garbage", "\x00\x00\x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o, err := newRunOutput(dir, nil, 6, "grpo", 0, true)
			require.NoError(t, err)
			runSteps(t, o, 1, 5)
			o.close()
			for _, f := range []string{MetricsFile, CompletionsFile} {
				appendFile(t, filepath.Join(dir, f), tc.torn)
			}

			o, err = newRunOutput(dir, nil, 6, "grpo", 3, true)
			require.NoError(t, err)
			runSteps(t, o, 4, 6)
			o.close()
			for _, f := range []string{MetricsFile, CompletionsFile} {
				want, err := os.ReadFile(filepath.Join(whole, f))
				require.NoError(t, err)
				got, err := os.ReadFile(filepath.Join(dir, f))
				require.NoError(t, err)
				assert.Equal(t, string(want), string(got), f)
			}
		})
	}

	t.Run("a bad line before the last is an error", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, MetricsFile)
		appendFile(t, path, "{\"step\":1}\nnot json\n{\"step\":2}\n")
		_, err := newRunOutput(dir, nil, 6, "grpo", 2, false)
		assert.ErrorContains(t, err, MetricsFile+":2 is not a log line with a step")
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "{\"step\":1}\nnot json\n{\"step\":2}\n", string(data), "left as it was")
	})
	t.Run("a fresh run removes unfinished checkpoints", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, ".checkpoint-3.tmp42"), 0o755))
		o, err := newRunOutput(dir, nil, 6, "sft", 0, false)
		require.NoError(t, err)
		o.close()
		assert.NoDirExists(t, filepath.Join(dir, ".checkpoint-3.tmp42"))
	})
	t.Run("a missing log is made", func(t *testing.T) {
		dir := t.TempDir()
		o, err := newRunOutput(dir, nil, 6, "grpo", 2, true)
		require.NoError(t, err)
		runSteps(t, o, 3, 3)
		o.close()
		logged, err := ReadMetrics(filepath.Join(dir, MetricsFile))
		require.NoError(t, err)
		assert.Len(t, logged, 1)
	})
}

// appendFile appends s to path.
func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// BenchmarkMetricsWriter measures one JSONL line of a typical GRPO step
// (about 40 metrics), the per-step cost of the metrics log.
func BenchmarkMetricsWriter(b *testing.B) {
	m := Metrics{}
	for _, k := range []string{MetricNumTokens, MetricCompletionsMeanLength, MetricCompletionsMinLength, MetricCompletionsMaxLength,
		MetricCompletionsClippedRatio, MetricCompletionsMeanTermLength, MetricCompletionsMinTermLength, MetricCompletionsMaxTermLength,
		MetricToolsCallFrequency, MetricToolsFailureFrequency, MetricReward, MetricRewardStd, MetricFracRewardZeroStd,
		MetricSamplingLogpDiffMean, MetricSamplingLogpDiffMax, MetricSamplingISRatioMin, MetricSamplingISRatioMean, MetricSamplingISRatioMax,
		MetricKL, MetricEntropy, MetricClipRatioLowMean, MetricClipRatioLowMin, MetricClipRatioHighMean, MetricClipRatioHighMax,
		MetricClipRatioRegionMean, MetricLoss, MetricGradNorm, MetricLearningRate, MetricEpoch, MetricStepTime,
		MetricTimeGeneration, MetricTimeTools, MetricTimeScoring, MetricTimeBackward, MetricTimeOptimizer,
		RewardMeanName("win"), RewardStdName("win"), RewardMeanName("format"), RewardStdName("format")} {
		m[k] = 0.123456789
	}
	w := NewMetricsWriter(io.Discard)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := w.Write(i, m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/line")
}
