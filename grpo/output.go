package grpo

import (
	"bufio"
	"encoding/json"
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
// completions is set) and the progress bar on w (nil for none). A fresh
// run (resumeStep 0) starts the logs afresh; a run resumed at resumeStep
// cuts them back to that step (cutLog) and appends, so a crash between
// a checkpoint and the next one leaves no line twice. Either removes the
// folders of checkpoints a killed run left unfinished in dir. dir ""
// writes no files.
func newRunOutput(dir string, w io.Writer, total int, name string, resumeStep int, completions bool) (_ *runOutput, err error) {
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
		// The run owns the folder: checkpoints a killed run left
		// unfinished go, resumed or not.
		if err := removeCheckpointTemps(dir); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		f, err := openLog(filepath.Join(dir, MetricsFile), resumeStep)
		if err != nil {
			return nil, fmt.Errorf("%s: metrics log: %w", name, err)
		}
		o.metrics = NewMetricsWriter(f)
		o.metrics.closer = f
		if completions {
			f, err := openLog(filepath.Join(dir, CompletionsFile), resumeStep)
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

// openLog creates path, or, when resuming at step > 0, cuts it back to
// that step and appends to it.
func openLog(path string, step int) (*os.File, error) {
	if step <= 0 {
		return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	}
	if err := cutLog(path, step); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// cutLog truncates a JSON-lines log whose lines carry a "step" (the
// metrics and completions logs) before its first line past step, or
// before a torn last line (one a kill left without its newline, or that
// does not parse): the lines a resumed run writes again are then not
// there twice. A line that does not parse before the last one is an
// error naming it, since it was not a crash that made it. A missing file
// is left missing.
func cutLog(path string, step int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var off int64
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break // nothing, or a torn last line without its newline
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		var s struct {
			Step *int `json:"step"`
		}
		if jerr := json.Unmarshal(line, &s); jerr != nil || s.Step == nil {
			if _, perr := r.Peek(1); perr == io.EOF {
				break // a torn last line
			}
			return fmt.Errorf("%s:%d is not a log line with a step; the log cannot be cut back to step %d for the resumed run: repair or remove it", path, n, step)
		}
		if *s.Step > step {
			break
		}
		off += int64(len(line))
	}
	if err := f.Truncate(off); err != nil {
		return fmt.Errorf("cut %s back to step %d: %w", path, step, err)
	}
	return nil
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
