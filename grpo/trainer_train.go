package grpo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/x/env"
)

// Train runs GRPO over data until Config.MaxSteps optimizer steps, or
// Config.NumEpochs passes over data when MaxSteps is 0, from where State
// says the run stands (so a resumed trainer continues). Each generation
// takes the next Config.Layout().Prompts rows (shuffled per epoch from
// Config.Seed) and runs Step. data nil plays prompts the environment's
// Reset gives (one environment, MaxSteps required).
//
// With Config.OutputDir set, Train writes a metrics.jsonl line every
// Config.LoggingSteps optimizer steps (their metrics combined by
// WindowMetrics, as callbacks and the progress bar's figures get them; the
// steps left at the end or at a stop get a last line), completions.jsonl
// every generation when Config.LogCompletions, a checkpoint every
// Config.SaveSteps steps (at the end of the generation that reaches it)
// and plot.png at the end. The last step's line also has HF's end-of-run
// figures (train_runtime, train_samples_per_second, train_steps_per_second,
// train_loss, over this call). Cancelling ctx stops at the next generation
// boundary (see Step); the error is ctx's.
func (t *Trainer) Train(ctx context.Context, data Dataset) (err error) {
	if data == nil {
		switch {
		case t.router != nil:
			return errors.New("grpo: training with several environments (WithEnvs) requires a dataset: each row names its environment")
		case t.o.factory == nil && t.o.rollout == nil:
			return errors.New("grpo: a dataset is required when there is no environment to give the prompts")
		}
	}
	total, err := TotalSteps(t.cfg, data)
	if err != nil {
		return err
	}
	if err := t.setTotalSteps(total); err != nil {
		return err
	}
	sampler, err := NewSampler(data, t.layout.Prompts, t.cfg.ShuffleDataset, t.cfg.Seed)
	if err != nil {
		return err
	}
	if err := sampler.SetPosition(Position{Epoch: t.state.Epoch, Index: t.state.DataPos}); err != nil {
		return err
	}
	out, err := newRunOutput(t.cfg.OutputDir, t.o.progress, total, "grpo", t.state.GlobalStep, t.cfg.LogCompletions)
	if err != nil {
		return err
	}
	defer out.close()
	saved := t.o.callbacks
	t.o.callbacks = append(out.callbacks(), saved...)
	t.advance = out.advance
	t.warn = out.warn
	t.run = &runSummary{start: time.Now(), samplesPerStep: t.cfg.PerDeviceTrainBatchSize * t.cfg.GradientAccumulationSteps}
	defer func() {
		if err != nil {
			// Stopped: the steps since the last line are logged too.
			if ferr := t.FlushMetrics(); ferr != nil {
				err = errors.Join(err, ferr)
			}
		}
		t.o.callbacks, t.advance, t.warn, t.run = saved, nil, nil, nil
	}()

	// after moves the state past a learnt generation: its data position,
	// its completions, a checkpoint when it crossed SaveSteps.
	after := func(rep *StepReport, pos Position, before int) error {
		t.state.Epoch, t.state.DataPos = pos.Epoch, pos.Index
		if out.completions != nil {
			if err := out.completions.Write(t.completionRecords(rep)...); err != nil {
				return fmt.Errorf("grpo: completions log: %w", err)
			}
		}
		if s := t.cfg.SaveSteps; s > 0 && t.cfg.OutputDir != "" && t.state.GlobalStep/s > before/s {
			if _, err := t.SaveCheckpoint(); err != nil {
				return fmt.Errorf("grpo: checkpoint at step %d: %w", t.state.GlobalStep, err)
			}
		}
		return nil
	}
	if t.cfg.MaxStaleness > 0 || t.alwaysAsync {
		next := func() ([]env.Row, Position, float64) {
			rows := sampler.Next()
			return rows, sampler.Position(), sampler.Epochs()
		}
		if err := t.trainAsync(ctx, next, total, after); err != nil {
			return err
		}
	} else {
		t.releaseResumed()
	}
	for t.state.GlobalStep < total {
		if err := ctx.Err(); err != nil {
			return err
		}
		before := t.state.GlobalStep
		rows := sampler.Next()
		t.run.epoch = sampler.Epochs()
		rep, err := t.Step(ctx, rows)
		if err != nil {
			return err
		}
		if err := after(rep, sampler.Position(), before); err != nil {
			return err
		}
	}
	if err := t.FlushMetrics(); err != nil {
		return err
	}
	return out.finish()
}

// setTotalSteps sizes the learning-rate schedule for a run of total
// optimizer steps.
func (t *Trainer) setTotalSteps(total int) error {
	if total == t.totalSteps {
		return nil
	}
	if err := t.pol.reschedule(t.cfg.AdamW(total)); err != nil {
		return err
	}
	t.totalSteps = total
	return nil
}

// completionRecords are a step's rollouts for the completions log.
func (t *Trainer) completionRecords(rep *StepReport) []CompletionRecord {
	tok := t.chat.Tokenizer()
	recs := make([]CompletionRecord, len(rep.Rollouts))
	for i, r := range rep.Rollouts {
		rec := CompletionRecord{
			Step: t.state.GlobalStep, PolicyVersion: r.PolicyVersion, Group: r.Group, Env: r.EnvName,
			Prompt:     tok.Decode(r.PromptIDs, false),
			Completion: tok.Decode(r.CompletionIDs, false),
			Rewards:    map[string]float64{},
			Reward:     rep.Rewards[i], Advantage: rep.Advantages[i],
			ToolCalls: r.ToolCalls, ToolFailures: r.ToolFailures, Truncated: r.Truncated,
		}
		if rep.Scores != nil {
			for k, name := range rep.Scores.Names {
				rec.Rewards[name] = rep.Scores.Scores[k][i]
			}
		}
		if r.Err != nil {
			rec.Error = r.Err.Error()
		}
		recs[i] = rec
	}
	return recs
}
