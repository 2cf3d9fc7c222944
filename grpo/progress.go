package grpo

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// ProgressMode selects how a Progress shows itself.
type ProgressMode int

const (
	// ProgressAuto draws a bar on a terminal and writes plain lines
	// otherwise (CI logs, files, pipes).
	ProgressAuto ProgressMode = iota
	// ProgressBar always draws a bar (redrawn in place with \r).
	ProgressBar
	// ProgressLines writes one plain line per reported step.
	ProgressLines
	// ProgressOff shows nothing.
	ProgressOff
)

// ProgressOptions configure a Progress. The zero value is ready to use.
type ProgressOptions struct {
	Mode        ProgressMode
	Description string // shown first, e.g. "grpo" or "sft"
	// LineEvery writes a plain line every this many steps (0 means 1); the
	// first and last steps always get one.
	LineEvery int
	// Now is the clock for elapsed time and ETA; nil means time.Now.
	Now func() time.Time
}

// Progress shows training progress: the step out of the total, the key
// figures (reward, its std within groups, tool calls per rollout and the
// share that failed, loss, kl, entropy, seconds per step) and the ETA. On a terminal it is a
// github.com/schollz/progressbar bar; elsewhere it writes plain lines that
// read well in CI logs. Not safe for concurrent use.
type Progress struct {
	w     io.Writer
	total int
	opts  ProgressOptions
	mode  ProgressMode
	start time.Time
	bar   *progressbar.ProgressBar
	last  int
}

// NewProgress returns a Progress over total steps (≤ 0 if unknown) writing
// to w. The clock starts now.
func NewProgress(w io.Writer, total int, opts ProgressOptions) *Progress {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LineEvery <= 0 {
		opts.LineEvery = 1
	}
	p := &Progress{w: w, total: total, opts: opts, mode: opts.Mode, start: opts.Now()}
	if p.mode == ProgressAuto {
		p.mode = ProgressLines
		if isTerminal(w) {
			p.mode = ProgressBar
		}
	}
	if p.mode == ProgressBar {
		n := total
		if n <= 0 {
			n = -1
		}
		p.bar = progressbar.NewOptions(n,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(opts.Description),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(0),
			// No spinner goroutine: the bar only redraws on Update.
			progressbar.OptionSetSpinnerChangeInterval(0),
			progressbar.OptionSetRenderBlankState(false))
	}
	return p
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// Update shows that step (counted from 1) finished with metrics m.
func (p *Progress) Update(step int, m Metrics) error {
	p.last = step
	switch p.mode {
	case ProgressBar:
		p.bar.Describe(p.describe(m))
		if err := p.bar.Set(step); err != nil {
			return fmt.Errorf("progress: %w", err)
		}
	case ProgressLines:
		if step != 1 && step != p.total && step%p.opts.LineEvery != 0 {
			return nil
		}
		if _, err := io.WriteString(p.w, p.line(step, m)+"\n"); err != nil {
			return fmt.Errorf("progress: %w", err)
		}
	}
	return nil
}

// Advance moves the bar to step (counted from 1) keeping the figures last
// shown: the steps between logged ones (Config.LoggingSteps), so the bar
// and its ETA move every step. Plain lines are written only by Update.
func (p *Progress) Advance(step int) error {
	if p.mode != ProgressBar {
		return nil
	}
	p.last = step
	if err := p.bar.Set(step); err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	return nil
}

// Warn writes a warning's message on a line of its own: "warning: msg".
// A bar is cleared first and redrawn at its next update; ProgressOff
// shows nothing. Write errors are ignored: a warning must not stop a run.
func (p *Progress) Warn(msg string) {
	switch p.mode {
	case ProgressBar:
		_ = p.bar.Clear()
		_, _ = io.WriteString(p.w, "warning: "+msg+"\n")
	case ProgressLines:
		_, _ = io.WriteString(p.w, "warning: "+msg+"\n")
	}
}

// Callback returns p.Update as a Callback.
func (p *Progress) Callback() Callback { return p.Update }

// Finish ends the bar (a newline after it); plain lines need nothing.
func (p *Progress) Finish() error {
	if p.mode != ProgressBar {
		return nil
	}
	if p.total > 0 && p.last < p.total {
		// Stopped early (cancelled): leave the bar where it was.
		_, err := io.WriteString(p.w, "\n")
		return err
	}
	if err := p.bar.Finish(); err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	_, err := io.WriteString(p.w, "\n")
	return err
}

// describe is the bar's description: the name, the key figures and the
// step's warnings.
func (p *Progress) describe(m Metrics) string {
	return strings.TrimSpace(p.opts.Description + " " + figures(m) + " " + warningWords(m))
}

// line is a plain progress line, e.g.
// "grpo step 3/10 (30%) reward 0.5 loss 0.0123 kl 0.0004 elapsed 12s eta 28s".
func (p *Progress) line(step int, m Metrics) string {
	var b strings.Builder
	if p.opts.Description != "" {
		b.WriteString(p.opts.Description + " ")
	}
	elapsed := p.opts.Now().Sub(p.start)
	if p.total > 0 {
		fmt.Fprintf(&b, "step %d/%d (%d%%)", step, p.total, 100*step/p.total)
	} else {
		fmt.Fprintf(&b, "step %d", step)
	}
	if f := figures(m); f != "" {
		b.WriteString(" " + f)
	}
	fmt.Fprintf(&b, " elapsed %s", elapsed.Round(time.Second))
	if p.total > 0 && step > 0 && step < p.total {
		eta := time.Duration(float64(elapsed) / float64(step) * float64(p.total-step))
		fmt.Fprintf(&b, " eta %s", eta.Round(time.Second))
	}
	if w := warningWords(m); w != "" {
		b.WriteString(" " + w)
	}
	return b.String()
}

// progressFigures are the metrics a progress line shows, in order, each
// with its label and format: what tells a user whether the run learns (the
// reward and its spread within groups, the tool calls per rollout and the
// share that failed, the loss, the KL, the entropy) and how fast it goes.
var progressFigures = [...]struct{ key, format string }{
	{MetricReward, "reward %.4g"},
	{MetricRewardStd, "std %.3g"},
	{MetricToolsCallFrequency, "calls %.3g"},
	{MetricToolsFailureFrequency, "failed %.3g"},
	{MetricLoss, "loss %.4g"},
	{MetricKL, "kl %.4g"},
	{MetricEntropy, "entropy %.3g"},
	{MetricStepTime, "%.3gs/step"},
	{EvalPrefix + MetricReward, "eval/reward %.4g"},
}

// figures formats the key metrics present in m (progressFigures), e.g.
// "reward 0.5 std 0.2 calls 1.5 failed 0.25 loss 0.0123 kl 0.0004
// entropy 0.81 3.2s/step".
func figures(m Metrics) string {
	var parts []string
	for _, f := range progressFigures {
		if v, ok := m[f.key]; ok && !math.IsNaN(v) {
			if math.Abs(v) < 1e-12 {
				v = 0 // rounding noise (a std of equal rewards) reads as 0
			}
			parts = append(parts, fmt.Sprintf(f.format, v))
		}
	}
	return strings.Join(parts, " ")
}
