package grpo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/x/env"
)

// EvalOptions configure Evaluate.
type EvalOptions struct {
	// NumGenerations is the completions per prompt; 0 means
	// Config.NumGenerationsEval, or Config.NumGenerations when that is 0.
	NumGenerations int
	// Greedy decodes the most likely token instead of sampling with the
	// training temperature and filters.
	Greedy bool
}

// EvalReport is what Evaluate measured.
type EvalReport struct {
	// Metrics are the training metrics' generation and reward figures
	// under EvalPrefix ("eval/reward", "eval/tools/call_frequency", ...).
	Metrics Metrics
	// Rollouts are prompt by prompt, NumGenerations each. Their Env fields
	// stay valid (final episode states) until Release.
	Rollouts []*Rollout
	// Rewards are the weighted rewards (NaN: no score or failed).
	Rewards []float64

	batch *batchOut
}

// Release gives the rollouts' environments back to their pools; their Env
// fields must not be used afterwards.
func (r *EvalReport) Release() {
	if r.batch == nil {
		return
	}
	r.batch.release()
	for _, ro := range r.Rollouts {
		ro.Env = nil
	}
	r.batch = nil
}

// Evaluate plays rows without training, scores the rollouts with the
// trainer's reward functions, and reports the metrics under EvalPrefix.
// Draws are seeded from Config.Seed and the number of evaluations so far
// (TrainerState.Evaluations, which checkpoints keep).
// Call Release on the report when done with its rollouts' environments.
func (t *Trainer) Evaluate(ctx context.Context, rows []env.Row, o EvalOptions) (*EvalReport, error) {
	if len(rows) == 0 {
		return nil, errors.New("grpo: Evaluate: no rows")
	}
	g := o.NumGenerations
	if g == 0 {
		g = t.cfg.NumGenerationsEval
	}
	if g == 0 {
		g = t.cfg.NumGenerations
	}
	if g < 1 {
		return nil, fmt.Errorf("grpo: Evaluate: %d generations per prompt", g)
	}
	smp := t.sampling()
	if o.Greedy {
		smp = sampling{}
	}
	t.state.Evaluations++
	begin := time.Now()
	gen, err := t.generate(ctx, rows, g, smp, mix(t.cfg.Seed, 0xe7a1, uint64(t.state.Evaluations)))
	if err != nil {
		return nil, fmt.Errorf("grpo: evaluate: %w", err)
	}
	t0 := time.Now()
	tab, err := t.score(ctx, gen.rollouts, gen.insts)
	if err != nil {
		gen.release()
		return nil, fmt.Errorf("grpo: evaluate: score: %w", err)
	}
	scoring := time.Since(t0)
	ok, failed := succeeded(gen.rollouts)
	m := Metrics{}
	tab.Metrics(m, ok)
	if g >= 2 {
		if adv, err := ComputeAdvantages(tab.Total(), ok, g, t.cfg.ScaleRewards); err == nil {
			m[MetricFracRewardZeroStd] = FracRewardZeroStd(adv)
		}
	}
	if err := rolloutMetrics(m, gen.rollouts, ok); err != nil {
		gen.release()
		return nil, err
	}
	m[MetricRolloutsFailed] = float64(failed)
	faultMetrics(m, gen.rollouts)
	m[MetricTimeGeneration] = gen.timing.generation.Seconds()
	m[MetricTimeTools] = gen.timing.tools.Seconds()
	m[MetricTimeScoring] = scoring.Seconds()
	m[MetricStepTime] = time.Since(begin).Seconds()
	return &EvalReport{Metrics: m.WithPrefix(EvalPrefix), Rollouts: gen.rollouts, Rewards: tab.Total(), batch: gen}, nil
}
