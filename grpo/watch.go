package grpo

import (
	"fmt"
	"math"
	"strings"
)

// Warning metrics: each optimizer step's line carries every one of them,
// 1 when the step raised the warning and 0 otherwise (so a logged window
// holds the share of its steps that raised it). The trainer also writes
// each warning to its logger (WithLogger) when it starts and every
// warnRepeat steps while it lasts, and the progress line names the
// warnings of the step it shows.
const (
	// MetricWarnNoSignal: every group's rollouts scored alike
	// (frac_reward_zero_std = 1), so every advantage is 0 and the step
	// learnt nothing.
	MetricWarnNoSignal = "warnings/no_learning_signal"
	// MetricWarnCallsFailed: every tool call of the step failed (malformed,
	// refused, an unknown tool).
	MetricWarnCallsFailed = "warnings/all_tool_calls_failed"
	// MetricWarnCallsFalling: tool calls per rollout fell to a quarter of
	// the run's first step or less: the policy is learning to stop using
	// its tools.
	MetricWarnCallsFalling = "warnings/tool_calls_falling"
	// MetricWarnEntropyCollapse: the entropy fell to a third of the first
	// step's or less: sampling is near-greedy and groups will score alike.
	MetricWarnEntropyCollapse = "warnings/entropy_collapse"
	// MetricWarnEntropyBlowup: the entropy rose to three times the first
	// step's and by at least 1 nat: probability is spreading to tokens the
	// policy never samples.
	MetricWarnEntropyBlowup = "warnings/entropy_blowup"
)

// warnRepeat is how many steps a lasting warning waits before it is
// logged again.
const warnRepeat = 10

// WarningMetrics lists the warning metrics in the order they are reported.
func WarningMetrics() []string {
	return []string{MetricWarnNoSignal, MetricWarnCallsFailed, MetricWarnCallsFalling, MetricWarnEntropyCollapse, MetricWarnEntropyBlowup}
}

// warnShort is each warning's word on the progress line.
var warnShort = map[string]string{
	MetricWarnNoSignal:        "NO SIGNAL",
	MetricWarnCallsFailed:     "ALL CALLS FAILED",
	MetricWarnCallsFalling:    "TOOL CALLS FALLING",
	MetricWarnEntropyCollapse: "ENTROPY COLLAPSE",
	MetricWarnEntropyBlowup:   "ENTROPY BLOWUP",
}

// Warning is one problem a step showed: its metric name and what it means
// for the run, in the user's terms.
type Warning struct {
	Name    string
	Message string
}

// watch checks each optimizer step's metrics for a run that cannot learn
// or is collapsing. Its baselines are the first step it sees (after a
// resume, the first step after it).
type watch struct {
	tools bool // rollouts can call tools (an environment offers some)
	seen  bool
	first struct{ calls, entropy float64 }
	last  map[string]int // step each warning was last logged
}

// Check returns the warnings of step's metrics m and sets every warning
// metric in m (1 raised, 0 not).
func (w *watch) Check(step int, m Metrics) []Warning {
	calls, hasCalls := finite(m, MetricToolsCallFrequency)
	ent, hasEnt := finite(m, MetricEntropy)
	if !w.seen {
		w.seen = true
		w.first.calls, w.first.entropy = math.NaN(), math.NaN()
		if hasCalls {
			w.first.calls = calls
		}
		if hasEnt {
			w.first.entropy = ent
		}
	}
	var out []Warning
	add := func(name, format string, a ...any) {
		out = append(out, Warning{Name: name, Message: fmt.Sprintf(format, a...)})
	}
	failures, hasFail := finite(m, MetricToolsFailureFrequency)
	allFailed := hasCalls && hasFail && calls > 0 && failures >= 1
	if z, ok := finite(m, MetricFracRewardZeroStd); ok && z >= 1 {
		why := "in every group the rollouts scored alike"
		if sd, ok := finite(m, MetricRewardStd); ok && sd == 0 {
			why = fmt.Sprintf("every rollout scored %.4g", m[MetricReward])
		}
		if allFailed {
			why += " and every tool call failed (the policy cannot call its tools yet: warm-start it longer)"
		}
		add(MetricWarnNoSignal, "step %d: no learning signal: %s (frac_reward_zero_std = 1), so every advantage is 0 and the step learnt nothing", step, why)
	}
	if allFailed {
		add(MetricWarnCallsFailed, "step %d: every one of the %.2f tool calls per rollout failed (malformed, refused or unknown): rewards that need a working call cannot rise", step, calls)
	}
	if w.tools && hasCalls && w.first.calls >= 0.5 && calls <= w.first.calls/4 {
		add(MetricWarnCallsFalling, "step %d: tool calls per rollout fell from %.2f (first step) to %.2f: the policy is learning to stop calling its tools; if the reward comes from using them, it is learning to avoid penalties rather than the task", step, w.first.calls, calls)
	}
	if hasEnt && w.first.entropy > 0 && ent <= w.first.entropy/3 {
		add(MetricWarnEntropyCollapse, "step %d: entropy fell from %.3f (first step) to %.3f: sampling is near-greedy, so a group's rollouts will score alike; raise Temperature, lower the learning rate or raise Beta", step, w.first.entropy, ent)
	}
	if hasEnt && w.first.entropy >= 0 && ent >= 3*w.first.entropy && ent >= w.first.entropy+1 {
		add(MetricWarnEntropyBlowup, "step %d: entropy rose from %.3f (first step) to %.3f: probability is spreading to tokens the policy does not sample; lower the learning rate or the temperature, or raise Beta", step, w.first.entropy, ent)
	}
	for _, name := range WarningMetrics() {
		m[name] = 0
	}
	for _, wn := range out {
		m[wn.Name] = 1
	}
	return out
}

// Due reports whether warning name, raised at step, should be logged now:
// at its first step, and every warnRepeat steps while it lasts.
func (w *watch) Due(name string, step int) bool {
	if w.last == nil {
		w.last = map[string]int{}
	}
	last, ok := w.last[name]
	if ok && step-last < warnRepeat {
		return false
	}
	w.last[name] = step
	return true
}

func finite(m Metrics, name string) (float64, bool) {
	v, ok := m[name]
	return v, ok && !math.IsNaN(v) && !math.IsInf(v, 0)
}

// warningWords are the raised warnings of a logged line, for the progress
// line ("" when none).
func warningWords(m Metrics) string {
	var ws []string
	for _, name := range WarningMetrics() {
		if v, ok := m[name]; ok && v > 0 {
			ws = append(ws, warnShort[name])
		}
	}
	if len(ws) == 0 {
		return ""
	}
	return "WARNING: " + strings.Join(ws, ", ")
}
