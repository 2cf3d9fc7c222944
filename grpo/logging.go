package grpo

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// WindowMetrics combines the metrics of consecutive optimizer steps (a
// logging window, Config.LoggingSteps of them) into one logged line, as
// TRL averages what it gathered since its last log:
//
//   - num_tokens, epoch and learning_rate are the window's last values
//     (the state at the logged step: TRL replaces num_tokens, HF logs the
//     current epoch and rate);
//   - minima (a last name segment "min", "min_…" or "…_min":
//     completions/min_length, clip_ratio/low_min,
//     sampling/importance_sampling_ratio/min) take the window's minimum and
//     maxima its maximum, so an extreme stays an extreme (TRL averages
//     them too);
//   - everything else is the mean over the steps (loss, grad_norm — HF logs
//     the last step's —, rewards, step_time and time/* per step).
//
// NaN ("no value") is skipped; a name with no value in the window is NaN.
// A name missing from some steps is combined over the steps that have it.
// steps must not be empty.
func WindowMetrics(steps []Metrics) (Metrics, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("grpo: window metrics: no steps")
	}
	vals := map[string][]float64{}
	for _, m := range steps {
		for k, v := range m {
			vals[k] = append(vals[k], v)
		}
	}
	out := make(Metrics, len(vals))
	for k, v := range vals {
		switch windowKind(k) {
		case windowLast:
			out[k] = math.NaN()
			for i := len(v) - 1; i >= 0; i-- {
				if !math.IsNaN(v[i]) {
					out[k] = v[i]
					break
				}
			}
		case windowMin:
			out[k] = nanMin(v)
		case windowMax:
			out[k] = nanMax(v)
		default:
			out[k] = nanMean(v)
		}
	}
	return out, nil
}

type windowAgg int

const (
	windowMean windowAgg = iota
	windowLast
	windowMin
	windowMax
)

// windowKind is how a metric combines over a logging window.
func windowKind(name string) windowAgg {
	base := strings.TrimPrefix(name, EvalPrefix)
	seg := base[strings.LastIndexByte(base, '/')+1:]
	extreme := func(w string) bool {
		return seg == w || strings.HasPrefix(seg, w+"_") || strings.HasSuffix(seg, "_"+w)
	}
	switch {
	case base == MetricNumTokens || base == MetricEpoch || base == MetricLearningRate:
		return windowLast
	case extreme("min"):
		return windowMin
	case extreme("max"):
		return windowMax
	}
	return windowMean
}

// stepLogger is logging_steps: it gathers each optimizer step's metrics
// and sends their combination (WindowMetrics) to the callbacks every
// `every` steps (steps counted from 1, so logged steps are multiples of
// every, as HF's), and what remains when flushed (the end of a run, or a
// stop). A resumed run starts with an empty window: its first line covers
// the steps from the resume to the next multiple.
type stepLogger struct {
	every  int
	window []Metrics
}

// step records the metrics of optimizer step n and logs the window when n
// is a multiple of every.
func (l *stepLogger) step(n int, m Metrics, cbs []Callback) error {
	l.window = append(l.window, m)
	if n%max(l.every, 1) != 0 {
		return nil
	}
	return l.flush(n, cbs)
}

// flush sends the window's combined metrics as step n's, if the window
// holds any, and empties it. Each callback gets its own copy.
func (l *stepLogger) flush(n int, cbs []Callback) error {
	if len(l.window) == 0 {
		return nil
	}
	m, err := WindowMetrics(l.window)
	l.window = nil
	if err != nil {
		return err
	}
	for _, cb := range cbs {
		if err := cb(n, m.Clone()); err != nil {
			return fmt.Errorf("callback at step %d: %w", n, err)
		}
	}
	return nil
}

// runSummary gathers what HF's Trainer logs when a run ends:
// train_runtime (seconds since start), train_samples_per_second (HF's
// samples: sequences per optimizer step × steps), train_steps_per_second
// and train_loss (the mean loss of the run's steps). They join the run's
// last step's metrics, so its last logged line carries them (HF logs them
// as a line of their own).
type runSummary struct {
	start          time.Time
	samplesPerStep int
	steps          int
	loss           float64
	// epoch is the data consumed once the generation in progress was
	// drawn, in epochs (HF's fractional epoch); < 0 when unknown (no
	// dataset).
	epoch float64
}

// add counts one optimizer step of the run.
func (r *runSummary) add(m Metrics) {
	r.steps++
	r.loss += m[MetricLoss]
}

// put adds the run's figures to m.
func (r *runSummary) put(m Metrics) {
	secs := time.Since(r.start).Seconds()
	m[MetricTrainRuntime] = secs
	m[MetricTrainSamplesPerSecond] = float64(r.steps*r.samplesPerStep) / secs
	m[MetricTrainStepsPerSecond] = float64(r.steps) / secs
	m[MetricTrainLoss] = r.loss / float64(max(r.steps, 1))
}
