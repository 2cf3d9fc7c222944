package grpo

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricNames(t *testing.T) {
	assert.Equal(t, "rewards/win/mean", RewardMeanName("win"))
	assert.Equal(t, "rewards/win/std", RewardStdName("win"))
	fn, ok := isRewardMean(RewardMeanName("format/strict"))
	assert.True(t, ok)
	assert.Equal(t, "format/strict", fn)
	for _, name := range []string{"reward", "rewards//mean", "rewards/x/std", "eval/rewards/x/mean"} {
		_, ok := isRewardMean(name)
		assert.False(t, ok, name)
	}
	m := Metrics{MetricReward: 1, MetricLoss: 2}.WithPrefix(EvalPrefix)
	assert.Equal(t, Metrics{"eval/reward": 1, "eval/loss": 2}, m)
}

func TestMetricsWriterLines(t *testing.T) {
	tests := []struct {
		name string
		step int
		m    Metrics
		want string
	}{
		{"sorted keys", 3, Metrics{MetricReward: 0.5, MetricLoss: -0.25, MetricKL: 1e-5},
			`{"step":3,"kl":1e-05,"loss":-0.25,"reward":0.5}`},
		{"empty", 1, Metrics{}, `{"step":1}`},
		{"no value is null", 2, Metrics{RewardMeanName("a"): math.NaN(), MetricGradNorm: math.Inf(1)},
			`{"step":2,"grad_norm":null,"rewards/a/mean":null}`},
		{"names are escaped", 4, Metrics{`rewards/"q"/mean`: 1}, `{"step":4,"rewards/\"q\"/mean":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewMetricsWriter(&buf)
			require.NoError(t, w.Write(tt.step, tt.m))
			assert.Equal(t, tt.want+"\n", buf.String(), "flushed without Close")
			require.NoError(t, w.Close())
		})
	}
}

func TestMetricsWriterRejectsStepKey(t *testing.T) {
	w := NewMetricsWriter(&bytes.Buffer{})
	err := w.Write(1, Metrics{"step": 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reserved")
}

func TestMetricsFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	w, err := CreateMetricsFile(path)
	require.NoError(t, err)
	cb := w.Callback()
	in := []StepMetrics{
		{1, Metrics{MetricReward: 0.125, MetricLoss: 0.1 + 0.2, RewardMeanName("win"): math.NaN()}},
		{2, Metrics{MetricReward: 1.0 / 3, MetricStepTime: 12.5}},
	}
	for _, s := range in {
		require.NoError(t, cb(s.Step, s.Metrics))
	}
	require.NoError(t, w.Close())
	out, err := ReadMetrics(path)
	require.NoError(t, err)
	require.Len(t, out, 2)
	for i := range in {
		assert.Equal(t, in[i].Step, out[i].Step)
		require.Len(t, out[i].Metrics, len(in[i].Metrics))
		for k, v := range in[i].Metrics {
			if math.IsNaN(v) {
				assert.True(t, math.IsNaN(out[i].Metrics[k]), k)
			} else {
				assert.Equal(t, v, out[i].Metrics[k], "%s round-trips exactly", k)
			}
		}
	}
}

func TestReadMetricsErrors(t *testing.T) {
	tests := []struct{ name, content, want string }{
		{"bad json", "{\"step\":1}\n{oops\n", "metrics.jsonl:2"},
		{"no step", "{\"reward\":1}\n", `no integer "step"`},
		{"fractional step", "{\"step\":1.5}\n", `no integer "step"`},
		{"step past int", "{\"step\":9223372036854775808}\n", `"step" 9.223372036854776e+18 is too large`},
		{"step far past int", "{\"step\":1e300}\n", `is too large`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "metrics.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tt.content), 0o644))
			_, err := ReadMetrics(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := ReadMetrics(filepath.Join(t.TempDir(), "missing.jsonl"))
	assert.Error(t, err)
}
