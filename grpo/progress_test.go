package grpo

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock advances by step on every call.
func fakeClock(step time.Duration) func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		now := t
		t = t.Add(step)
		return now
	}
}

func TestProgressLines(t *testing.T) {
	tests := []struct {
		name  string
		total int
		opts  ProgressOptions
		steps []int
		want  []string
	}{
		{"every step with eta", 4, ProgressOptions{Mode: ProgressLines, Description: "grpo"}, []int{1, 2, 4},
			[]string{
				"grpo step 1/4 (25%) reward 0.5 loss 0.125 kl 0.001 elapsed 10s eta 30s",
				"grpo step 2/4 (50%) reward 0.5 loss 0.125 kl 0.001 elapsed 20s eta 20s",
				"grpo step 4/4 (100%) reward 0.5 loss 0.125 kl 0.001 elapsed 30s",
			}},
		{"every third, first and last always", 7, ProgressOptions{Mode: ProgressLines, LineEvery: 3}, []int{1, 2, 3, 4, 5, 6, 7},
			[]string{
				"step 1/7 (14%) reward 0.5 loss 0.125 kl 0.001 elapsed 10s eta 1m0s",
				"step 3/7 (42%) reward 0.5 loss 0.125 kl 0.001 elapsed 20s eta 27s",
				"step 6/7 (85%) reward 0.5 loss 0.125 kl 0.001 elapsed 30s eta 5s",
				"step 7/7 (100%) reward 0.5 loss 0.125 kl 0.001 elapsed 40s",
			}},
		{"unknown total", 0, ProgressOptions{Mode: ProgressLines}, []int{1},
			[]string{"step 1 reward 0.5 loss 0.125 kl 0.001 elapsed 10s"}},
		{"auto on a buffer is lines", 2, ProgressOptions{}, []int{2},
			[]string{"step 2/2 (100%) reward 0.5 loss 0.125 kl 0.001 elapsed 10s"}},
		{"off", 2, ProgressOptions{Mode: ProgressOff}, []int{1, 2}, nil},
	}
	m := Metrics{MetricReward: 0.5, MetricLoss: 0.125, MetricKL: 0.001, MetricGradNorm: 3, RewardMeanName("x"): math.NaN()}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.opts.Now = fakeClock(10 * time.Second)
			p := NewProgress(&buf, tt.total, tt.opts)
			cb := p.Callback()
			for _, s := range tt.steps {
				require.NoError(t, cb(s, m))
			}
			require.NoError(t, p.Finish())
			var got []string
			if buf.Len() > 0 {
				got = strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestProgressFigures: the line shows what a user needs to see a run
// learn, in a fixed order, and leaves out what a step did not measure.
func TestProgressFigures(t *testing.T) {
	m := Metrics{MetricReward: 0.5, MetricRewardStd: 0.25, MetricToolsCallFrequency: 1.5, MetricToolsFailureFrequency: 0.125,
		MetricLoss: 0.0123, MetricKL: 0.0004, MetricEntropy: 0.8125, MetricStepTime: 3.25, MetricGradNorm: 9, MetricLearningRate: 1e-3}
	assert.Equal(t, "reward 0.5 std 0.25 calls 1.5 failed 0.125 loss 0.0123 kl 0.0004 entropy 0.812 3.25s/step", figures(m))
	m[MetricRewardStd] = 1.48e-17 // equal rewards, summed in another order
	assert.Contains(t, figures(m), "reward 0.5 std 0 calls")
	m[MetricRewardStd] = 0.25
	m[MetricToolsFailureFrequency] = math.NaN() // no calls to fail
	delete(m, MetricKL)
	assert.Equal(t, "reward 0.5 std 0.25 calls 1.5 loss 0.0123 entropy 0.812 3.25s/step", figures(m))
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, 10, ProgressOptions{Mode: ProgressBar, Description: "sft"})
	require.NoError(t, p.Update(3, Metrics{MetricLoss: 2.5, MetricKL: 0.25}))
	out := buf.String()
	assert.Contains(t, out, "3/10")
	assert.Contains(t, out, "sft loss 2.5 kl 0.25")
	require.NoError(t, p.Update(10, Metrics{MetricLoss: 0.5}))
	require.NoError(t, p.Finish())
	assert.Contains(t, buf.String(), "10/10")
	assert.True(t, strings.HasSuffix(buf.String(), "\n"))
}

func TestProgressAutoDetectsNonTerminalFile(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, isTerminal(f), "a regular file is not a terminal")
	p := NewProgress(f, 3, ProgressOptions{})
	assert.Equal(t, ProgressLines, p.mode)
}
