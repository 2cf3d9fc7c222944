package wordlegame

import (
	"context"
	"fmt"

	"github.com/x/env"
	"github.com/x/grpo"
	"github.com/x/grpo/warmstart"
)

// GameOf is the finished game of a rollout played on a Wordle env.
func GameOf(r *grpo.Rollout) (*Game, error) {
	if r.Err != nil {
		return nil, fmt.Errorf("rollout failed: %w", r.Err)
	}
	w, ok := r.Env.(*Wordle)
	if !ok {
		return nil, fmt.Errorf("rollout env is %T, not the examples' Wordle", r.Env)
	}
	return &w.Game, nil
}

// Reward makes a reward function of a game's reward term (WinReward,
// GreensReward). In a multi-env run it scores only the
// rollouts of the env named envName and returns grpo.ErrNoScore for the
// others; envName "" scores every rollout.
func Reward(envName string, term func(*Game) float64) grpo.RewardFunc {
	return func(ctx context.Context, r *grpo.Rollout) (float64, error) {
		if envName != "" && r.EnvName != envName {
			return 0, grpo.ErrNoScore
		}
		g, err := GameOf(r)
		if err != nil {
			return 0, err
		}
		return term(g), nil
	}
}

// Invalid is the reward function of InvalidPenalty over the rollout's
// failed tool calls; envName as for Reward.
func Invalid(envName string) grpo.RewardFunc {
	return func(ctx context.Context, r *grpo.Rollout) (float64, error) {
		if envName != "" && r.EnvName != envName {
			return 0, grpo.ErrNoScore
		}
		if _, err := GameOf(r); err != nil {
			return 0, err
		}
		return InvalidPenalty(r.ToolFailures), nil
	}
}

// Conversations plays one solver game per secret, in process, through
// grpo.PlayScript under o (the GRPO run's config: its thinking mode and
// token budget), and returns them as SFT conversations with the env's tool
// schemas.
func Conversations(ctx context.Context, secrets, words []string, o grpo.PlayOptions) ([]grpo.Conversation, error) {
	convs, err := warmstart.Conversations(ctx, LocalFactory(words), Rows(secrets), Solver{Words: words}.Turn, o)
	if err != nil {
		return nil, fmt.Errorf("solver games: %w", err)
	}
	return convs, nil
}

// Rows makes one dataset row per secret word.
func Rows(words []string) []env.Row {
	rows := make([]env.Row, len(words))
	for i, w := range words {
		rows[i] = env.Row{"secret_word": w}
	}
	return rows
}
