package grpo

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
)

// healthy is a step that raises nothing.
func healthy() Metrics {
	return Metrics{MetricReward: 0.5, MetricRewardStd: 0.3, MetricFracRewardZeroStd: 0.25,
		MetricToolsCallFrequency: 2, MetricToolsFailureFrequency: 0.1, MetricEntropy: 0.6}
}

func with(m Metrics, kv ...any) Metrics {
	m = m.Clone()
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(float64)
	}
	return m
}

// TestWatchWarnings: each warning is raised by the step that shows it and
// only by it, measured against the run's first step, and every warning
// metric is set (1 raised, 0 not).
func TestWatchWarnings(t *testing.T) {
	tests := []struct {
		name  string
		tools bool
		steps []Metrics // the last one is checked
		want  []string
		words []string // in the messages
	}{
		{"healthy", true, []Metrics{healthy(), healthy()}, nil, nil},
		{"no signal: all scored alike", true, []Metrics{healthy(), with(healthy(), MetricFracRewardZeroStd, 1.0)},
			[]string{MetricWarnNoSignal}, []string{"no learning signal", "scored alike"}},
		{"no signal: every rollout the same score", true, []Metrics{healthy(), with(healthy(), MetricFracRewardZeroStd, 1.0, MetricRewardStd, 0.0, MetricReward, 1.0)},
			[]string{MetricWarnNoSignal}, []string{"every rollout scored 1"}},
		{"no signal: every call malformed", true, []Metrics{with(healthy(), MetricFracRewardZeroStd, 1.0, MetricRewardStd, 0.0, MetricReward, 0.0, MetricToolsFailureFrequency, 1.0)},
			[]string{MetricWarnNoSignal, MetricWarnCallsFailed}, []string{"every tool call failed", "warm-start it longer"}},
		{"tool calls fall to a quarter", true, []Metrics{healthy(), with(healthy(), MetricToolsCallFrequency, 0.5)},
			[]string{MetricWarnCallsFalling}, []string{"fell from 2.00 (first step) to 0.50"}},
		{"tool calls at a third: not yet", true, []Metrics{healthy(), with(healthy(), MetricToolsCallFrequency, 0.7)}, nil, nil},
		{"no tools, no tool warning", false, []Metrics{healthy(), with(healthy(), MetricToolsCallFrequency, 0.0)}, nil, nil},
		{"few calls at the start: no baseline", true, []Metrics{with(healthy(), MetricToolsCallFrequency, 0.4), with(healthy(), MetricToolsCallFrequency, 0.0)}, nil, nil},
		{"entropy collapse", true, []Metrics{healthy(), with(healthy(), MetricEntropy, 0.19)},
			[]string{MetricWarnEntropyCollapse}, []string{"entropy fell from 0.600"}},
		{"entropy blow-up", true, []Metrics{healthy(), with(healthy(), MetricEntropy, 2.0)},
			[]string{MetricWarnEntropyBlowup}, []string{"entropy rose from 0.600 (first step) to 2.000"}},
		{"entropy up but under a nat more", true, []Metrics{with(healthy(), MetricEntropy, 0.1), with(healthy(), MetricEntropy, 0.9)}, nil, nil},
		{"NaN metrics raise nothing", true, []Metrics{healthy(), {MetricEntropy: math.NaN(), MetricFracRewardZeroStd: math.NaN()}}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := watch{tools: tt.tools}
			var got []Warning
			var last Metrics
			for i, m := range tt.steps {
				last = m.Clone()
				got = w.Check(i+1, last)
			}
			var names []string
			for _, wn := range got {
				names = append(names, wn.Name)
			}
			assert.Equal(t, tt.want, names)
			for _, word := range tt.words {
				found := false
				for _, wn := range got {
					found = found || strings.Contains(wn.Message, word)
				}
				assert.True(t, found, "a message says %q: %v", word, got)
			}
			for _, name := range WarningMetrics() {
				want := 0.0
				for _, n := range tt.want {
					if n == name {
						want = 1
					}
				}
				assert.Equal(t, want, last[name], name)
			}
		})
	}
}

// TestWatchDue: a lasting warning is logged when it starts and every
// warnRepeat steps after.
func TestWatchDue(t *testing.T) {
	var w watch
	var logged []int
	for step := 1; step <= 25; step++ {
		if w.Due(MetricWarnNoSignal, step) {
			logged = append(logged, step)
		}
	}
	assert.Equal(t, []int{1, 11, 21}, logged)
	assert.True(t, w.Due(MetricWarnEntropyCollapse, 25), "each warning has its own clock")
}

// TestWarningWords: the progress line names the warnings of a logged
// window (a share of its steps raised them).
func TestWarningWords(t *testing.T) {
	assert.Equal(t, "", warningWords(Metrics{MetricWarnNoSignal: 0}))
	assert.Equal(t, "WARNING: NO SIGNAL, TOOL CALLS FALLING", warningWords(Metrics{MetricWarnNoSignal: 0.5, MetricWarnCallsFalling: 1, MetricWarnEntropyBlowup: 0}))
	p := NewProgress(&bytes.Buffer{}, 10, ProgressOptions{Mode: ProgressLines})
	assert.Contains(t, p.line(3, Metrics{MetricReward: 0, MetricWarnNoSignal: 1}), "reward 0 elapsed 0s eta 0s WARNING: NO SIGNAL")
}

// TestTrainWarnsWithoutSignal: a run whose rollouts all score the same,
// or whose every tool call is malformed, says so on the progress output
// and the logger, once at the start and again after warnRepeat steps, and
// its metrics carry the warnings.
func TestTrainWarnsWithoutSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	malformed := func(_, turn int) string {
		if turn == 0 {
			return "<tool_call>\n{name: increment}\n</tool_call>"
		}
		return "Sorry."
	}
	tests := []struct {
		name   string
		script func(rollout, turn int) string
		reward RewardFunc
		want   []string // warning metrics raised at every step
		words  []string // on the progress output
	}{
		{"every rollout the same score", func(int, int) string { return "Done." }, constant(1),
			[]string{MetricWarnNoSignal}, []string{"warning: step 1: no learning signal: every rollout scored 1", "WARNING: NO SIGNAL"}},
		{"every rollout malformed", malformed, constant(0),
			[]string{MetricWarnNoSignal, MetricWarnCallsFailed},
			[]string{"every tool call failed (the policy cannot call its tools yet: warm-start it longer)",
				"warning: step 1: every one of the 1.00 tool calls per rollout failed", "WARNING: NO SIGNAL, ALL CALLS FAILED"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(2, 1)
			cfg.MaxSteps = 12
			cfg.MaxToolCallingIterations = 1
			var progress, logged bytes.Buffer
			raised := map[string][]float64{}
			tr, _ := newScripted(t, cfg, tt.script, WithEnv(counters()), WithReward("r", 1, tt.reward),
				WithProgress(&progress), WithLogger(slog.New(slog.NewTextHandler(&logged, nil))),
				WithCallback(func(_ int, m Metrics) error {
					for _, name := range WarningMetrics() {
						raised[name] = append(raised[name], m[name])
					}
					return nil
				}))
			require.NoError(t, tr.Train(context.Background(), NewDataset([]env.Row{{"prompt": "Go: "}})))
			every := []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
			for _, name := range WarningMetrics() {
				if slices.Contains(tt.want, name) {
					assert.Equal(t, every, raised[name], name)
				} else {
					assert.NotContains(t, raised[name], 1.0, name)
				}
			}
			assert.Equal(t, 2*len(tt.want), strings.Count(progress.String(), "warning: step"), progress.String())
			assert.Contains(t, progress.String(), "warning: step 11: no learning signal")
			for _, w := range tt.words {
				assert.Contains(t, progress.String(), w)
			}
			assert.Equal(t, 2*len(tt.want), strings.Count(logged.String(), "level=WARN"), logged.String())
			for _, name := range tt.want {
				assert.Contains(t, logged.String(), "warning="+name)
			}
		})
	}
}
