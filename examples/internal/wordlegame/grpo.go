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

// RewardTerm is one reward function of a set, with its name in the
// metrics (rewards/<name>/mean); every term weighs 1.
type RewardTerm struct {
	Name string
	Fn   grpo.RewardFunc
}

// Reward sets, the values of RewardSet's name.
const (
	// RecipeRewards are the recipe's three terms: win (WinReward), greens
	// of the best guess of a lost game (GreensReward) and −0.1 per failed
	// tool call (Invalid). A model that rarely wins earns more by
	// stopping after its opening guess than by playing on, so GRPO learns
	// to stop (DESIGN.md, "Why policies collapsed to doing less").
	RecipeRewards = "recipe"
	// TRLRewards are TRL's Wordle terms, each of the last guess: correct
	// (CorrectReward), greens (LastGreensReward), yellows
	// (LastYellowsReward) and repetition (RepetitionReward). Playing on
	// with a new, closer guess earns more than stopping.
	TRLRewards = "trl"
	// TRLInvalidRewards are TRL's terms and the recipe's −0.1 per failed
	// tool call: TRL's terms cost nothing for a refused or malformed
	// call, and a tiny model that keeps guessing then learns to send
	// more of them.
	TRLInvalidRewards = "trl-invalid"
)

// RewardSet returns the reward terms of the set named set (RecipeRewards,
// TRLRewards or TRLInvalidRewards) for the env named envName ("" for every rollout, as for
// Reward).
func RewardSet(set, envName string) ([]RewardTerm, error) {
	switch set {
	case RecipeRewards:
		return []RewardTerm{
			{"win", Reward(envName, WinReward)},
			{"greens", Reward(envName, GreensReward)},
			{"invalid", Invalid(envName)},
		}, nil
	case TRLRewards, TRLInvalidRewards:
		terms := []RewardTerm{
			{"correct", Reward(envName, CorrectReward)},
			{"greens", Reward(envName, LastGreensReward)},
			{"yellows", Reward(envName, LastYellowsReward)},
			{"repetition", Reward(envName, RepetitionReward)},
		}
		if set == TRLInvalidRewards {
			terms = append(terms, RewardTerm{"invalid", Invalid(envName)})
		}
		return terms, nil
	}
	return nil, fmt.Errorf("reward set %q: want %s, %s or %s", set, TRLRewards, TRLInvalidRewards, RecipeRewards)
}
