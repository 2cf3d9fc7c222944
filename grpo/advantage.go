package grpo

import (
	"fmt"
	"math"
)

// maxReward bounds a rollout's reward: a quarter of float64's range, so
// that r − μ (at most twice it) and the group std (at most √2 times it)
// are finite. Within it every advantage is computed; the statistics
// scale huge rewards rather than square them (nanStd).
const maxReward = math.MaxFloat64 / 4

// advantageEps is added to the std before dividing (TRL's 1e-4), so a
// group whose rewards are all equal gets advantage 0, not ±Inf.
const advantageEps = 1e-4

// Advantages are the group-relative advantages of one generation batch,
// laid out as TRL lays it out: rows [g·G, (g+1)·G) are the G completions
// of prompt g. Every slice has one entry per rollout.
type Advantages struct {
	A    []float64 // advantage, broadcast to every loss token of the rollout; 0 outside the loss
	Mean []float64 // the baseline: mean reward of the rollout's group (NaN if nothing in it was scored)
	Std  []float64 // the std the reward was divided by: the group's (group, none) or the batch's (batch, GDPO); NaN if undefined
	Loss []bool    // whether the rollout takes part in the loss (false: it failed on every attempt)
}

// ComputeAdvantages forms group-relative advantages from each rollout's
// total reward (RewardTable.Total; NaN = unscored), exactly as TRL's
// sum_then_normalize does: μ_g = nanmean of the group, σ_g its
// Bessel-corrected nanstd, and
//
//	group: A = (r − μ_g) / (σ_g + 1e-4)
//	batch: A = (r − μ_g) / (σ_batch + 1e-4)
//	none:  A = r − μ_g
//
// with A = 0 wherever that is NaN (unscored rollouts; groups with fewer
// than two scored rollouts under group scaling). ok[i] false marks a
// rollout that failed on every attempt: it is left out of its group's
// baseline and std, of the batch std, and of the loss (Loss[i] false,
// A[i] 0). ok nil means all succeeded. It is an error if every rollout
// failed, if len(rewards) is not a multiple of g, or if a reward is
// infinite or beyond ±maxReward.
func ComputeAdvantages(rewards []float64, ok []bool, g int, scale ScaleRewards) (Advantages, error) {
	r, err := groupedRewards("advantages", rewards, ok, g)
	if err != nil {
		return Advantages{}, err
	}
	n := len(r)
	a := Advantages{A: make([]float64, n), Mean: make([]float64, n), Std: make([]float64, n), Loss: lossRows(ok, n)}
	batchStd := nanStd(r)
	for start := 0; start < n; start += g {
		grp := r[start : start+g]
		mu, sigma := nanMean(grp), nanStd(grp)
		for i := start; i < start+g; i++ {
			a.Mean[i] = mu
			var adv float64
			switch scale {
			case ScaleGroup:
				a.Std[i] = sigma
				adv = (r[i] - mu) / (sigma + advantageEps)
			case ScaleBatch:
				a.Std[i] = batchStd
				adv = (r[i] - mu) / (batchStd + advantageEps)
			case ScaleNone:
				a.Std[i] = sigma
				adv = r[i] - mu
			default:
				return Advantages{}, fmt.Errorf("grpo: advantages: unknown reward scaling %q (want group, batch or none)", scale)
			}
			if math.IsNaN(adv) || !a.Loss[i] {
				adv = 0
			}
			a.A[i] = adv
		}
	}
	return a, nil
}

// ComputeAdvantagesGDPO forms advantages by TRL's normalize_then_sum
// (GDPO): each function's scores are normalised within their group,
// Z_ik = (R_ik − nanmean_g R_k) / (nanstd_g R_k + 1e-4); the weighted
// nansum r_i = Σ_k w_k·Z_ik (NaN if no function scored the rollout) is then
// normalised over the batch, A = (r − nanmean r) / (nanstd r + 1e-4), and
// NaN becomes 0. Failed rollouts (ok false) are left out as in
// ComputeAdvantages. Std holds the batch std; Mean the batch mean.
func ComputeAdvantagesGDPO(t *RewardTable, ok []bool, g int) (Advantages, error) {
	n := t.Len()
	if len(t.Scores) == 0 {
		return Advantages{}, fmt.Errorf("grpo: advantages: no reward functions")
	}
	sum := make([]float64, n)
	scored := make([]bool, n)
	for k, col := range t.Scores {
		r, err := groupedRewards("advantages of reward "+t.Names[k], col, ok, g)
		if err != nil {
			return Advantages{}, err
		}
		for start := 0; start < n; start += g {
			grp := r[start : start+g]
			mu, sigma := nanMean(grp), nanStd(grp)
			for i := start; i < start+g; i++ {
				if math.IsNaN(r[i]) {
					continue
				}
				scored[i] = true
				if z := (r[i] - mu) / (sigma + advantageEps); !math.IsNaN(z) {
					sum[i] += t.Weights[k] * z
				}
			}
		}
	}
	for i := range sum {
		if !scored[i] {
			sum[i] = math.NaN()
		}
	}
	a := Advantages{A: make([]float64, n), Mean: make([]float64, n), Std: make([]float64, n), Loss: lossRows(ok, n)}
	mu, sigma := nanMean(sum), nanStd(sum)
	for i := range sum {
		a.Mean[i], a.Std[i] = mu, sigma
		if adv := (sum[i] - mu) / (sigma + advantageEps); !math.IsNaN(adv) && a.Loss[i] {
			a.A[i] = adv
		}
	}
	return a, nil
}

// FracRewardZeroStd is frac_reward_zero_std: the fraction of the rollouts
// in the loss whose std (Advantages.Std) is 0 within 1e-8 (torch.isclose);
// a NaN std counts as non-zero. With whole groups it is the fraction of
// groups whose rewards are all equal, which carry no learning signal.
func FracRewardZeroStd(a Advantages) float64 {
	zero, n := 0, 0
	for i, s := range a.Std {
		if !a.Loss[i] {
			continue
		}
		n++
		if math.Abs(s) <= 1e-8 {
			zero++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(zero) / float64(n)
}

// groupedRewards checks the layout and returns rewards with failed rows
// set to NaN.
func groupedRewards(what string, rewards []float64, ok []bool, g int) ([]float64, error) {
	n := len(rewards)
	switch {
	case g < 1:
		return nil, fmt.Errorf("grpo: %s: group size %d < 1", what, g)
	case n == 0:
		return nil, fmt.Errorf("grpo: %s: no rollouts", what)
	case n%g != 0:
		return nil, fmt.Errorf("grpo: %s: %d rollouts do not form whole groups of %d", what, n, g)
	case ok != nil && len(ok) != n:
		return nil, fmt.Errorf("grpo: %s: %d success flags for %d rollouts", what, len(ok), n)
	}
	r := make([]float64, n)
	failed := 0
	for i, v := range rewards {
		if math.IsInf(v, 0) || math.Abs(v) > maxReward {
			return nil, fmt.Errorf("grpo: %s: rollout %d has reward %v (a weighted sum of the reward functions' scores): "+
				"beyond ±%.3g its group's baseline and std are not representable in float64; scale the rewards down", what, i, v, maxReward)
		}
		if ok != nil && !ok[i] {
			v = math.NaN()
			failed++
		}
		r[i] = v
	}
	if failed == n {
		return nil, fmt.Errorf("grpo: %s: all %d rollouts failed on every attempt; nothing to learn from", what, n)
	}
	return r, nil
}

func lossRows(ok []bool, n int) []bool {
	l := make([]bool, n)
	for i := range l {
		l[i] = ok == nil || ok[i]
	}
	return l
}
