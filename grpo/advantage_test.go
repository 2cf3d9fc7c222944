package grpo

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestComputeAdvantages(t *testing.T) {
	e := 1e-4                 // TRL's epsilon, spelled out so the constant is under test too
	s13 := math.Sqrt(1.0 / 3) // std of {0, 0, 1, 1}
	// batch std of {0,0,1,1,1,1,1,1}: mean 0.75, Σd² = 2·0.5625 + 6·0.0625 = 1.5
	sb := math.Sqrt(1.5 / 7)
	tests := []struct {
		name     string
		rewards  []float64
		ok       []bool
		g        int
		scale    ScaleRewards
		a, std   []float64
		loss     []bool // nil = all true
		fracZero float64
	}{
		{
			name: "group: Bessel std and the 1e-4 epsilon", rewards: []float64{1, 2, 3, 6}, g: 4, scale: ScaleGroup,
			// μ = 3, σ = sqrt((4+1+0+9)/3)
			a:   []float64{-2 / (math.Sqrt(14.0/3) + e), -1 / (math.Sqrt(14.0/3) + e), 0, 3 / (math.Sqrt(14.0/3) + e)},
			std: []float64{math.Sqrt(14.0 / 3), math.Sqrt(14.0 / 3), math.Sqrt(14.0 / 3), math.Sqrt(14.0 / 3)},
		},
		{
			name: "group: a zero-std group gets 0", rewards: []float64{0, 0, 1, 1, 1, 1, 1, 1}, g: 4, scale: ScaleGroup,
			a:        []float64{-0.5 / (s13 + e), -0.5 / (s13 + e), 0.5 / (s13 + e), 0.5 / (s13 + e), 0, 0, 0, 0},
			std:      []float64{s13, s13, s13, s13, 0, 0, 0, 0},
			fracZero: 0.5,
		},
		{
			name: "batch: group mean, batch std", rewards: []float64{0, 0, 1, 1, 1, 1, 1, 1}, g: 4, scale: ScaleBatch,
			a:   []float64{-0.5 / (sb + e), -0.5 / (sb + e), 0.5 / (sb + e), 0.5 / (sb + e), 0, 0, 0, 0},
			std: []float64{sb, sb, sb, sb, sb, sb, sb, sb},
		},
		{
			name: "none: centred only", rewards: []float64{0, 0, 1, 1, 1, 1, 1, 1}, g: 4, scale: ScaleNone,
			a:        []float64{-0.5, -0.5, 0.5, 0.5, 0, 0, 0, 0},
			std:      []float64{s13, s13, s13, s13, 0, 0, 0, 0},
			fracZero: 0.5,
		},
		{
			name: "unscored rollout: out of the mean, advantage 0", rewards: []float64{1, 2, 3, nan}, g: 4, scale: ScaleGroup,
			a:   []float64{-1 / (1 + e), 0, 1 / (1 + e), 0},
			std: []float64{1, 1, 1, 1},
		},
		{
			// §8.10: an all-None group gets advantage 0.
			name: "all-None group", rewards: []float64{nan, nan, 2, 4}, g: 2, scale: ScaleGroup,
			a:   []float64{0, 0, -1 / (math.Sqrt2 + e), 1 / (math.Sqrt2 + e)},
			std: []float64{nan, nan, math.Sqrt2, math.Sqrt2},
		},
		{
			name: "one scored value in a group: no std, advantage 0", rewards: []float64{1, nan}, g: 2, scale: ScaleGroup,
			a: []float64{0, 0}, std: []float64{nan, nan},
		},
		{
			name: "one scored value under none: r − μ = 0", rewards: []float64{1, nan}, g: 2, scale: ScaleNone,
			a: []float64{0, 0}, std: []float64{nan, nan},
		},
		{
			name: "failed rollout: out of baseline, std and loss", rewards: []float64{1, 5, 3, 100}, ok: []bool{true, true, true, false},
			g: 4, scale: ScaleGroup,
			a:    []float64{-2 / (2 + e), 2 / (2 + e), 0, 0},
			std:  []float64{2, 2, 2, 2},
			loss: []bool{true, true, true, false},
		},
		{
			name: "failed rollout leaves the batch std too", rewards: []float64{0, 2, 1, 1000}, ok: []bool{true, true, true, false},
			g: 2, scale: ScaleBatch,
			// group 1 mean 1; batch std of {0, 2, 1} = 1; group 2 mean 1 (only row 2)
			a:    []float64{-1 / (1 + e), 1 / (1 + e), 0, 0},
			std:  []float64{1, 1, 1, 1},
			loss: []bool{true, true, true, false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ComputeAdvantages(tt.rewards, tt.ok, tt.g, tt.scale)
			require.NoError(t, err)
			assertFloats(t, tt.a, a.A, tol)
			assertFloats(t, tt.std, a.Std, tol)
			loss := tt.loss
			if loss == nil {
				loss = make([]bool, len(tt.rewards))
				for i := range loss {
					loss[i] = true
				}
			}
			assert.Equal(t, loss, a.Loss)
			assertFloat(t, tt.fracZero, FracRewardZeroStd(a), tol, "frac_reward_zero_std")
			// Within a group of fully scored, successful rollouts the
			// advantages sum to zero.
			for start := 0; start < len(a.A); start += tt.g {
				full := true
				sum := 0.0
				for i := start; i < start+tt.g; i++ {
					full = full && !math.IsNaN(tt.rewards[i]) && loss[i]
					sum += a.A[i]
				}
				if full {
					assert.InDelta(t, 0, sum, 1e-12, "group %d", start/tt.g)
				}
			}
		})
	}
}

// TestComputeAdvantagesHugeRewards: advantages do not depend on the
// rewards' scale, up to a quarter of float64's range; before, a group std
// of rewards ≥ 1e154 overflowed and every advantage became 0.
func TestComputeAdvantagesHugeRewards(t *testing.T) {
	unit := []float64{1, -1, 1, 3, 0.5, 0.25}
	for _, scale := range []ScaleRewards{ScaleGroup, ScaleBatch, ScaleNone} {
		want, err := ComputeAdvantages(unit, nil, 2, scale)
		require.NoError(t, err)
		for _, k := range []float64{1e154, 1e200, 1e307} { // 3e307: within maxReward
			r := make([]float64, len(unit))
			for i, v := range unit {
				r[i] = v * k
			}
			got, err := ComputeAdvantages(r, nil, 2, scale)
			require.NoError(t, err)
			for i := range r {
				assert.InDelta(t, want.Mean[i], got.Mean[i]/k, 1e-15, "%s ×%g mean %d", scale, k, i)
				assert.InDelta(t, want.Std[i], got.Std[i]/k, 1e-15, "%s ×%g std %d", scale, k, i)
				if scale == ScaleNone {
					assert.InDelta(t, want.A[i], got.A[i]/k, 1e-15, "%s ×%g A %d", scale, k, i)
				} else {
					// σ + 1e-4 against kσ + 1e-4: the ε's weight differs, by
					// at most 1e-4/σ relative (σ ≥ 0.125 here).
					assert.InEpsilon(t, want.A[i], got.A[i], 1e-3, "%s ×%g A %d", scale, k, i)
				}
				assert.NotZero(t, got.A[i], "%s ×%g A %d", scale, k, i)
			}
		}
	}
}

func TestComputeAdvantagesErrors(t *testing.T) {
	tests := []struct {
		name    string
		rewards []float64
		ok      []bool
		g       int
		scale   ScaleRewards
		want    string
	}{
		{"partial group", []float64{1, 2, 3}, nil, 2, ScaleGroup, "3 rollouts do not form whole groups of 2"},
		{"all failed", []float64{1, 2}, []bool{false, false}, 2, ScaleGroup, "all 2 rollouts failed"},
		{"ok length", []float64{1, 2}, []bool{true}, 2, ScaleGroup, "1 success flags for 2"},
		{"infinite reward", []float64{1, math.Inf(-1)}, nil, 2, ScaleGroup, "rollout 1 has reward -Inf"},
		{"reward beyond a quarter of float64", []float64{1e308, 0}, nil, 2, ScaleGroup, "rollout 0 has reward 1e+308 (a weighted sum of the reward functions' scores): beyond ±4.49e+307"},
		{"unknown scale", []float64{1, 2}, nil, 2, "mean", `unknown reward scaling "mean"`},
		{"empty", nil, nil, 2, ScaleGroup, "no rollouts"},
		{"group 0", []float64{1}, nil, 0, ScaleGroup, "group size 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ComputeAdvantages(tt.rewards, tt.ok, tt.g, tt.scale)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestComputeAdvantagesGDPO(t *testing.T) {
	tab, err := NewRewardTable([]string{"a", "b"}, []float64{1, 2}, 4)
	require.NoError(t, err)
	a := [][]float64{{1, 0, 1, 1}, {0, 0, 1, 0}}
	for k := range a {
		for i, v := range a[k] {
			require.NoError(t, tab.Set(k, i, v, nil))
		}
	}
	// Per function and group: {1,0} → ±0.5/(√0.5+ε); {1,1} and {0,0} → 0.
	z := 0.5 / (math.Sqrt(0.5) + advantageEps)
	sum := []float64{z, -z, 2 * z, -2 * z} // weights 1 and 2
	// batch: mean 0, std = z·sqrt(10/3)
	s := z * math.Sqrt(10.0/3)
	want := make([]float64, 4)
	for i, v := range sum {
		want[i] = v / (s + advantageEps)
	}
	adv, err := ComputeAdvantagesGDPO(tab, nil, 2)
	require.NoError(t, err)
	assertFloats(t, want, adv.A, tol)
	assertFloats(t, []float64{s, s, s, s}, adv.Std, tol)

	// A failed rollout and an unscored one get 0 and leave the batch stats.
	adv, err = ComputeAdvantagesGDPO(tab, []bool{true, true, true, false}, 2)
	require.NoError(t, err)
	// group 2 now has one row per function: std NaN → Z NaN → nansum 0.
	sum = []float64{z, -z, 0}
	s = nanStd(sum)
	assertFloats(t, []float64{z / (s + advantageEps), -z / (s + advantageEps), 0, 0}, adv.A, tol)
	assert.Equal(t, []bool{true, true, true, false}, adv.Loss)
}

// BenchmarkComputeAdvantages: a generation batch of 1,024 rollouts in
// groups of 8; reports rollouts/s.
func BenchmarkComputeAdvantages(b *testing.B) {
	r := make([]float64, 1024)
	for i := range r {
		r[i] = float64(i%7) / 3
	}
	for b.Loop() {
		if _, err := ComputeAdvantages(r, nil, 8, ScaleGroup); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(r))*float64(b.N)/b.Elapsed().Seconds(), "rollouts/s")
}
