package warmstart

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/x/env"
	"github.com/x/grpo"
)

// ErrNoSignal is Check's verdict that GRPO would have nothing to learn
// from the model as it is: Check wraps it with what it saw and what to
// change.
var ErrNoSignal = errors.New("warmstart: GRPO would have nothing to learn")

// CheckOptions configure Check.
type CheckOptions struct {
	// Generations are the rollouts per row; 0 means the trainer's
	// NumGenerations (GRPO's group size).
	Generations int
}

// Report is what Check saw: the rows' rollouts, sampled as GRPO samples
// them.
type Report struct {
	Rollouts int // rollouts played (env failures excluded)
	Failed   int // rollouts whose environment failed on every attempt
	// NoCall counts rollouts that called no tool; CallsFailed those whose
	// every call failed (malformed, unknown tool, bad arguments, refused);
	// Working the rest: at least one call that worked.
	NoCall, CallsFailed, Working int
	ToolCalls, ToolFailures      int // over all rollouts
	// FracZeroStd is frac_reward_zero_std: the share of rollouts whose
	// group (the rollouts of one row) all scored the same, which GRPO
	// cannot learn from.
	FracZeroStd float64
	// MeanReward, MinReward and MaxReward are over the scored rollouts.
	MeanReward, MinReward, MaxReward float64
}

// String is the report on one line.
func (r Report) String() string {
	return fmt.Sprintf("%d rollouts: %d with a working tool call, %d with only failed calls, %d with none (%d of %d calls failed); reward mean %.3g, min %.3g, max %.3g; %.0f%% in groups that all scored the same",
		r.Rollouts, r.Working, r.CallsFailed, r.NoCall, r.ToolFailures, r.ToolCalls, r.MeanReward, r.MinReward, r.MaxReward, 100*r.FracZeroStd)
}

// problem is the verdict: nil when GRPO has something to learn.
func (r Report) problem() error {
	var probs []string
	if r.Rollouts > 0 && r.Working == 0 {
		probs = append(probs, fmt.Sprintf("no rollout made a tool call that worked (%d called no tool, %d made only failed calls): warm start longer (more SFT steps), and check that the SFT conversations use the env's tools", r.NoCall, r.CallsFailed))
	}
	if r.Rollouts > 0 && r.FracZeroStd == 1 {
		hint := "warm start shorter (fewer SFT steps) so that rollouts differ, or sample at a higher Temperature"
		if r.Working == 0 || r.MaxReward <= 0 {
			hint = "warm start longer (more SFT steps) until some rollouts earn a reward"
		}
		probs = append(probs, fmt.Sprintf("every row's rollouts all scored the same (reward %.3g to %.3g), so GRPO's advantages are all 0: %s", r.MinReward, r.MaxReward, hint))
	}
	if r.Rollouts == 0 {
		probs = append(probs, fmt.Sprintf("all %d rollouts failed in their environment", r.Failed))
	}
	if probs == nil {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNoSignal, strings.Join(probs, "; "))
}

// Check samples each row's rollouts from tr's model as GRPO's first step
// would (tr.Evaluate at the training temperature and filters, scored by
// tr's rewards) and reports whether GRPO has something to learn. The error
// wraps ErrNoSignal when it has not: when no rollout made a tool call that
// worked, or when every row's rollouts all scored the same. A few rows
// (four, say) are enough; each costs a group of rollouts.
func Check(ctx context.Context, tr *grpo.Trainer, rows []env.Row, o CheckOptions) (Report, error) {
	g := o.Generations
	if g == 0 {
		g = tr.Config().NumGenerations
	}
	if g < 2 {
		return Report{}, fmt.Errorf("warmstart: check: %d rollouts per row: GRPO compares at least 2", g)
	}
	ev, err := tr.Evaluate(ctx, rows, grpo.EvalOptions{NumGenerations: g})
	if err != nil {
		return Report{}, fmt.Errorf("warmstart: check: %w", err)
	}
	defer ev.Release()
	rep := Report{MinReward: math.Inf(1), MaxReward: math.Inf(-1)}
	scored := 0
	for i, r := range ev.Rollouts {
		if r.Err != nil {
			rep.Failed++
			continue
		}
		rep.Rollouts++
		rep.ToolCalls += r.ToolCalls
		rep.ToolFailures += r.ToolFailures
		switch {
		case r.ToolCalls == 0:
			rep.NoCall++
		case r.ToolFailures == r.ToolCalls:
			rep.CallsFailed++
		default:
			rep.Working++
		}
		if v := ev.Rewards[i]; !math.IsNaN(v) {
			scored++
			rep.MeanReward += v
			rep.MinReward = min(rep.MinReward, v)
			rep.MaxReward = max(rep.MaxReward, v)
		}
	}
	if scored > 0 {
		rep.MeanReward /= float64(scored)
	} else {
		rep.MinReward, rep.MaxReward = math.NaN(), math.NaN()
	}
	rep.FracZeroStd = ev.Metrics[grpo.EvalPrefix+grpo.MetricFracRewardZeroStd]
	return rep, rep.problem()
}
