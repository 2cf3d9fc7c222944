package grpo

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Output file names under OutputDir.
const (
	MetricsFile     = "metrics.jsonl"
	CompletionsFile = "completions.jsonl"
	PlotFile        = "plot.png"
)

// runOutput is what a run shows and writes besides checkpoints: the
// metrics log, the completions log, the progress bar and, at the end, the
// plot. Train and SFT share it.
type runOutput struct {
	dir         string
	metrics     *MetricsWriter
	completions *CompletionsWriter // nil unless asked for
	progress    *Progress
}

// newRunOutput opens OutputDir/metrics.jsonl (and completions.jsonl if
// completions is set), appending when resuming, and the progress bar on w
// (nil for none). dir "" writes no files.
func newRunOutput(dir string, w io.Writer, total int, name string, resume, completions bool) (_ *runOutput, err error) {
	o := &runOutput{dir: dir}
	defer func() {
		if err != nil {
			o.close() // a metrics log opened before the failure
		}
	}()
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("%s: output folder: %w", name, err)
		}
		f, err := openLog(filepath.Join(dir, MetricsFile), resume)
		if err != nil {
			return nil, fmt.Errorf("%s: metrics log: %w", name, err)
		}
		o.metrics = NewMetricsWriter(f)
		o.metrics.closer = f
		if completions {
			f, err := openLog(filepath.Join(dir, CompletionsFile), resume)
			if err != nil {
				return nil, fmt.Errorf("%s: completions log: %w", name, err)
			}
			o.completions = NewCompletionsWriter(f)
			o.completions.closer = f
		}
	}
	if w != nil {
		o.progress = NewProgress(w, total, ProgressOptions{Description: name})
	}
	return o, nil
}

// openLog creates path, or appends to it when resuming.
func openLog(path string, resume bool) (*os.File, error) {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if resume {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	return os.OpenFile(path, flags, 0o644)
}

// callbacks are the metrics log's and the progress bar's.
func (o *runOutput) callbacks() []Callback {
	var cbs []Callback
	if o.metrics != nil {
		cbs = append(cbs, o.metrics.Callback())
	}
	if o.progress != nil {
		cbs = append(cbs, o.progress.Callback())
	}
	return cbs
}

// advance moves the progress bar at every optimizer step (the callbacks
// get only the logged ones).
func (o *runOutput) advance(step int) error {
	if o.progress == nil {
		return nil
	}
	return o.progress.Advance(step)
}

// warn shows a warning's message on the progress output (nothing
// without one).
func (o *runOutput) warn(msg string) {
	if o.progress != nil {
		o.progress.Warn(msg)
	}
}

// finish ends the progress bar, closes the logs and plots the whole
// metrics log (resumed runs included).
func (o *runOutput) finish() error {
	var err error
	if o.progress != nil {
		err = o.progress.Finish()
		o.progress = nil
	}
	if o.completions != nil {
		err = errors.Join(err, o.completions.Close())
		o.completions = nil
	}
	if o.metrics != nil {
		err = errors.Join(err, o.metrics.Close())
		o.metrics = nil
		steps, rerr := ReadMetrics(filepath.Join(o.dir, MetricsFile))
		if rerr == nil && len(steps) > 0 {
			rerr = WritePlot(filepath.Join(o.dir, PlotFile), steps, PlotOptions{})
		}
		if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// close releases what finish did not, on an early return; the logs keep
// every line written so far.
func (o *runOutput) close() {
	if o.progress != nil {
		o.progress.Finish()
		o.progress = nil
	}
	if o.completions != nil {
		o.completions.Close()
		o.completions = nil
	}
	if o.metrics != nil {
		o.metrics.Close()
		o.metrics = nil
	}
}
