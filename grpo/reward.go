package grpo

import (
	"errors"
	"fmt"
	"math"
)

// ErrNoScore is what a reward function returns for a rollout it cannot
// score (TRL's None). The rollout is left out of that function's mean and
// std and out of the weighted sum; a rollout no function scores gets
// advantage 0.
var ErrNoScore = errors.New("grpo: no score")

// RewardTable holds the scores of K reward functions on the N rollouts of
// one generation batch and combines them as TRL does
// (sum_then_normalize's first half). A score of NaN means "no score": the
// function returned ErrNoScore, or the rollout was not scored (it failed on
// every attempt). Not safe for concurrent Set calls on the same cell; Set
// on distinct cells may run concurrently.
type RewardTable struct {
	Names   []string    // [K] function names, as logged under rewards/<name>/
	Weights []float64   // [K] weights of the weighted sum
	Scores  [][]float64 // [K][N]; NaN = no score
}

// NewRewardTable returns a table for n rollouts with every score NaN (not
// scored yet). Names must be non-empty and distinct, weights finite, one
// per name.
func NewRewardTable(names []string, weights []float64, n int) (*RewardTable, error) {
	if len(names) == 0 {
		return nil, errors.New("grpo: no reward functions: add one with WithReward, or use an env that owns its reward")
	}
	if len(weights) != len(names) {
		return nil, fmt.Errorf("grpo: %d reward weights for %d reward functions %q", len(weights), len(names), names)
	}
	if n < 0 {
		return nil, fmt.Errorf("grpo: reward table for %d rollouts", n)
	}
	seen := make(map[string]bool, len(names))
	for k, name := range names {
		switch {
		case name == "":
			return nil, fmt.Errorf("grpo: reward function %d has an empty name", k)
		case seen[name]:
			return nil, fmt.Errorf("grpo: two reward functions are named %q: names key the logged metrics, make them distinct", name)
		case math.IsNaN(weights[k]) || math.IsInf(weights[k], 0):
			return nil, fmt.Errorf("grpo: reward function %q has weight %v: weights must be finite", name, weights[k])
		}
		seen[name] = true
	}
	t := &RewardTable{Names: append([]string(nil), names...), Weights: append([]float64(nil), weights...), Scores: make([][]float64, len(names))}
	for k := range t.Scores {
		t.Scores[k] = make([]float64, n)
		for i := range t.Scores[k] {
			t.Scores[k][i] = math.NaN()
		}
	}
	return t, nil
}

// Len is the number of rollouts N.
func (t *RewardTable) Len() int {
	if len(t.Scores) == 0 {
		return 0
	}
	return len(t.Scores[0])
}

// Set records what function k returned for rollout row. ErrNoScore (also
// wrapped) is stored as NaN; any other error, and a NaN or infinite score
// or one beyond ±maxReward, is returned as an error naming the function and the rollout, which
// should stop the step.
func (t *RewardTable) Set(k, row int, v float64, err error) error {
	if k < 0 || k >= len(t.Scores) || row < 0 || row >= t.Len() {
		return fmt.Errorf("grpo: reward table has %d functions × %d rollouts; no cell (%d, %d)", len(t.Scores), t.Len(), k, row)
	}
	name := t.Names[k]
	switch {
	case errors.Is(err, ErrNoScore):
		t.Scores[k][row] = math.NaN()
		return nil
	case err != nil:
		return fmt.Errorf("grpo: reward %q on rollout %d: %w", name, row, err)
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("grpo: reward %q on rollout %d returned %v: a reward must be finite (return grpo.ErrNoScore for no score)", name, row, v)
	case math.Abs(v) > maxReward:
		return fmt.Errorf("grpo: reward %q on rollout %d returned %v: beyond ±%.3g a group's baseline and std are not representable in float64; scale the reward down", name, row, v, maxReward)
	}
	t.Scores[k][row] = v
	return nil
}

// Total is each rollout's weighted sum Σ_k w_k·R_ik over the functions
// that scored it (TRL's nansum), or NaN when none did.
func (t *RewardTable) Total() []float64 {
	n := t.Len()
	r := make([]float64, n)
	for i := range r {
		sum, scored := 0.0, false
		for k, col := range t.Scores {
			if v := col[i]; !math.IsNaN(v) {
				sum += t.Weights[k] * v
				scored = true
			}
		}
		if !scored {
			sum = math.NaN()
		}
		r[i] = sum
	}
	return r
}

// Unscored lists the rollouts no function scored (TRL warns "All reward
// functions returned None for the following kwargs").
func (t *RewardTable) Unscored() []int {
	var rows []int
	for i, v := range t.Total() {
		if math.IsNaN(v) {
			rows = append(rows, i)
		}
	}
	return rows
}

// Metrics puts into m, for the rollouts with include[i] (nil = all),
// rewards/<name>/mean and rewards/<name>/std of each function (NaN-aware
// mean and Bessel std), and reward and reward_std of the weighted sum, as
// TRL logs them. A value with nothing to average is NaN.
func (t *RewardTable) Metrics(m Metrics, include []bool) {
	pick := func(x []float64) []float64 {
		if include == nil {
			return x
		}
		var out []float64
		for i, v := range x {
			if i < len(include) && include[i] {
				out = append(out, v)
			}
		}
		return out
	}
	for k, name := range t.Names {
		col := pick(t.Scores[k])
		m[RewardMeanName(name)] = nanMean(col)
		m[RewardStdName(name)] = nanStd(col)
	}
	total := pick(t.Total())
	m[MetricReward] = nanMean(total)
	m[MetricRewardStd] = nanStd(total)
}
