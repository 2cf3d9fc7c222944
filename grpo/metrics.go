package grpo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Metric names, exactly as TRL logs them (spec §6), so dashboards and
// scripts written for TRL read our logs unchanged. Phase timings, which TRL
// sends only to its profiler, are ours under "time/".
const (
	MetricNumTokens                 = "num_tokens"
	MetricCompletionsMeanLength     = "completions/mean_length"
	MetricCompletionsMinLength      = "completions/min_length"
	MetricCompletionsMaxLength      = "completions/max_length"
	MetricCompletionsClippedRatio   = "completions/clipped_ratio"
	MetricCompletionsMeanTermLength = "completions/mean_terminated_length"
	MetricCompletionsMinTermLength  = "completions/min_terminated_length"
	MetricCompletionsMaxTermLength  = "completions/max_terminated_length"
	MetricToolsCallFrequency        = "tools/call_frequency"
	MetricToolsFailureFrequency     = "tools/failure_frequency"
	MetricReward                    = "reward"
	MetricRewardStd                 = "reward_std"
	MetricFracRewardZeroStd         = "frac_reward_zero_std"
	MetricSamplingLogpDiffMean      = "sampling/sampling_logp_difference/mean"
	MetricSamplingLogpDiffMax       = "sampling/sampling_logp_difference/max"
	MetricSamplingISRatioMin        = "sampling/importance_sampling_ratio/min"
	MetricSamplingISRatioMean       = "sampling/importance_sampling_ratio/mean"
	MetricSamplingISRatioMax        = "sampling/importance_sampling_ratio/max"
	MetricKL                        = "kl"
	MetricEntropy                   = "entropy"
	MetricClipRatioLowMean          = "clip_ratio/low_mean"
	MetricClipRatioLowMin           = "clip_ratio/low_min"
	MetricClipRatioHighMean         = "clip_ratio/high_mean"
	MetricClipRatioHighMax          = "clip_ratio/high_max"
	MetricClipRatioRegionMean       = "clip_ratio/region_mean"
	MetricCISPOClipRatio            = "cispo_clip_ratio"
	MetricVESPOPhiSeqMean           = "vespo/phi_seq_mean"
	MetricLoss                      = "loss"
	MetricPolicyLoss                = "policy_loss"  // loss's policy (surrogate) term
	MetricKLLoss                    = "kl_loss"      // loss's β·KL term (Beta ≠ 0); ours
	MetricEntropyLoss               = "entropy_loss" // loss's −coef·entropy term (EntropyCoef ≠ 0); ours
	MetricEntropyCoef               = "entropy_coef" // the entropy bonus' coefficient (EntropyCoef ≠ 0)
	MetricGradNorm                  = "grad_norm"
	MetricLearningRate              = "learning_rate"
	MetricEpoch                     = "epoch"
	MetricStepTime                  = "step_time"
	MetricTrainRuntime              = "train_runtime" // seconds of the run (this Train or SFT call), on its last step
	MetricTrainSamplesPerSecond     = "train_samples_per_second"
	MetricTrainStepsPerSecond       = "train_steps_per_second"
	MetricTrainLoss                 = "train_loss"         // mean loss of the run's steps
	MetricRolloutsFailed            = "rollouts/failed"    // rollouts left out after every attempt failed
	MetricRolloutsReplayed          = "rollouts/replayed"  // episodes played again after an env failure (Σ Attempts − 1)
	MetricRolloutsAbandoned         = "rollouts/abandoned" // env and reward calls abandoned past their deadline (ErrAbandoned)
	// MetricAsyncStalenessMean and Max are, in asynchronous training
	// (Config.MaxStaleness > 0), the optimizer steps between the policy
	// that sampled a step's rollouts and the one that starts learning from
	// their generation (at most MaxStaleness); ours.
	MetricAsyncStalenessMean = "async/staleness/mean"
	MetricAsyncStalenessMax  = "async/staleness/max"
	MetricTimeGeneration     = "time/generation" // seconds in model generation
	MetricTimeTools          = "time/tools"      // seconds waiting on tool calls and env resets
	MetricTimeScoring        = "time/scoring"    // seconds in reward functions
	MetricTimeBackward       = "time/backward"   // seconds in forward+backward passes
	MetricTimeOptimizer      = "time/optimizer"  // seconds in the optimizer step
)

const (
	metricStep    = "step" // the JSONL line's own key, never a metric
	rewardsPrefix = "rewards/"
	meanSuffix    = "/mean"
	stdSuffix     = "/std"
)

// EvalPrefix is put in front of every metric of an evaluation
// (Metrics.WithPrefix), so "reward" becomes "eval/reward".
const EvalPrefix = "eval/"

// RewardMeanName is the metric name of reward function fn's mean,
// "rewards/<fn>/mean".
func RewardMeanName(fn string) string { return rewardsPrefix + fn + meanSuffix }

// RewardStdName is the metric name of reward function fn's standard
// deviation, "rewards/<fn>/std".
func RewardStdName(fn string) string { return rewardsPrefix + fn + stdSuffix }

// Metrics is one step's logged values by name. NaN means "no value this
// step" (TRL's None, e.g. a reward function that scored no rollout): it is
// written as null and skipped by plots.
type Metrics map[string]float64

// Keys returns the metric names in sorted order.
func (m Metrics) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Clone returns a copy of m.
func (m Metrics) Clone() Metrics {
	out := make(Metrics, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// WithPrefix returns a copy of m with prefix in front of every name
// (EvalPrefix for evaluation metrics).
func (m Metrics) WithPrefix(prefix string) Metrics {
	out := make(Metrics, len(m))
	for k, v := range m {
		out[prefix+k] = v
	}
	return out
}

// Callback receives the metrics of every optimizer step (step counted from
// 1) as soon as the step is done. It runs on the training goroutine, so a
// slow callback slows training; a non-nil error stops training and is
// returned from Train, wrapped. The map is the callback's to keep.
type Callback func(step int, m Metrics) error

// StepMetrics is one line of a metrics log.
type StepMetrics struct {
	Step    int
	Metrics Metrics
}

// MarshalJSON writes {"step": N, then the metrics by sorted name}; NaN and
// ±Inf are written as null, since JSON has no such numbers.
func (s StepMetrics) MarshalJSON() ([]byte, error) {
	return appendStepJSON(nil, s.Step, s.Metrics)
}

// UnmarshalJSON reads a line written by MarshalJSON; null reads as NaN.
func (s *StepMetrics) UnmarshalJSON(data []byte) error {
	var raw map[string]*float64
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	step, ok := raw[metricStep]
	if !ok || step == nil || *step != math.Trunc(*step) || *step < 0 {
		return errors.New(`no integer "step"`)
	}
	// float64(math.MaxInt) rounds up to 2^63, which int cannot hold.
	if *step >= float64(math.MaxInt) {
		return fmt.Errorf(`"step" %g is too large`, *step)
	}
	delete(raw, metricStep)
	s.Step, s.Metrics = int(*step), make(Metrics, len(raw))
	for k, v := range raw {
		if v == nil {
			s.Metrics[k] = math.NaN()
		} else {
			s.Metrics[k] = *v
		}
	}
	return nil
}

func appendStepJSON(b []byte, step int, m Metrics) ([]byte, error) {
	b = append(b, `{"step":`...)
	b = strconv.AppendInt(b, int64(step), 10)
	for _, k := range m.Keys() {
		if k == metricStep {
			return nil, fmt.Errorf("metric name %q is reserved for the step number", k)
		}
		name, err := json.Marshal(k)
		if err != nil {
			return nil, fmt.Errorf("metric name %q: %w", k, err)
		}
		b = append(b, ',')
		b = append(b, name...)
		b = append(b, ':')
		if v := m[k]; math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
	}
	return append(b, '}'), nil
}

// MetricsWriter writes one JSON line per step ({"step": N, then the
// metrics by sorted name, so logs diff cleanly}) and flushes each line, so
// a crashed run keeps every finished step. Not safe for concurrent use.
type MetricsWriter struct {
	w      *bufio.Writer
	closer io.Closer
	buf    []byte
}

// NewMetricsWriter writes metrics lines to w.
func NewMetricsWriter(w io.Writer) *MetricsWriter {
	return &MetricsWriter{w: bufio.NewWriter(w)}
}

// CreateMetricsFile creates (or truncates) path and writes metrics lines
// to it; Close closes the file.
func CreateMetricsFile(path string) (*MetricsWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create metrics log: %w", err)
	}
	w := NewMetricsWriter(f)
	w.closer = f
	return w, nil
}

// Write appends the line of one step and flushes it.
func (w *MetricsWriter) Write(step int, m Metrics) error {
	var err error
	if w.buf, err = appendStepJSON(w.buf[:0], step, m); err != nil {
		return fmt.Errorf("write metrics of step %d: %w", step, err)
	}
	w.buf = append(w.buf, '\n')
	if _, err := w.w.Write(w.buf); err != nil {
		return fmt.Errorf("write metrics of step %d: %w", step, err)
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("write metrics of step %d: %w", step, err)
	}
	return nil
}

// Callback returns w.Write as a Callback.
func (w *MetricsWriter) Callback() Callback { return w.Write }

// Close flushes and, if the writer made the file, closes it.
func (w *MetricsWriter) Close() error {
	err := w.w.Flush()
	if w.closer != nil {
		err = errors.Join(err, w.closer.Close())
		w.closer = nil
	}
	if err != nil {
		return fmt.Errorf("close metrics log: %w", err)
	}
	return nil
}

// ReadMetrics reads a metrics log written by MetricsWriter. A malformed
// line is an error naming the file and line.
func ReadMetrics(path string) ([]StepMetrics, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	defer f.Close()
	return ParseMetrics(f, path)
}

// ParseMetrics reads metrics lines from r; name (a file name) is used in
// errors, with the line number.
func ParseMetrics(r io.Reader, name string) ([]StepMetrics, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read metrics %s: %w", name, err)
	}
	var out []StepMetrics
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var s StepMetrics
		if err := json.Unmarshal(line, &s); err != nil {
			return nil, fmt.Errorf("read metrics %s:%d: %w", name, i+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Reproducible reports whether the metric named name is a function of the
// data, the seed and the configuration alone, so that two identical runs,
// and a run resumed from a checkpoint and one that was not, log the same
// value. The others measure wall time (step_time, time/*, train_runtime,
// the per-second rates) or sum up one Train call (train_loss).
func Reproducible(name string) bool {
	switch name {
	case MetricStepTime, MetricTrainRuntime, MetricTrainSamplesPerSecond, MetricTrainStepsPerSecond, MetricTrainLoss:
		return false
	}
	return !strings.HasPrefix(name, "time/")
}

// isRewardMean reports whether name is "rewards/<fn>/mean" and returns fn.
func isRewardMean(name string) (string, bool) {
	if !strings.HasPrefix(name, rewardsPrefix) || !strings.HasSuffix(name, meanSuffix) || len(name) <= len(rewardsPrefix)+len(meanSuffix) {
		return "", false
	}
	return name[len(rewardsPrefix) : len(name)-len(meanSuffix)], true
}
