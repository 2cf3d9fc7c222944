package grpo

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var nan = math.NaN()

// Tolerance for values computed in float64 by a few additions and one
// division: 1e-12 absolute is far above the rounding of such sums (~1e-16
// relative) and far below any mistake in a formula.
const tol = 1e-12

func TestRewardTableSet(t *testing.T) {
	tests := []struct {
		name    string
		v       float64
		err     error
		want    float64 // stored value; NaN = no score
		wantErr string  // substring; "" = no error
	}{
		{"score", 0.5, nil, 0.5, ""},
		{"negative score", -2, nil, -2, ""},
		{"no score", 0, ErrNoScore, nan, ""},
		{"wrapped no score", 0, fmt.Errorf("board unreadable: %w", ErrNoScore), nan, ""},
		{"error", 0, errors.New("env gone"), nan, `reward "win" on rollout 1: env gone`},
		{"NaN", nan, nil, nan, `reward "win" on rollout 1 returned NaN`},
		{"+Inf", math.Inf(1), nil, nan, `reward "win" on rollout 1 returned +Inf`},
		{"huge but representable", -4e307, nil, -4e307, ""},
		{"beyond a quarter of float64", 1e308, nil, nan, `reward "win" on rollout 1 returned 1e+308: beyond ±4.49e+307`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab, err := NewRewardTable([]string{"win"}, []float64{1}, 2)
			require.NoError(t, err)
			err = tab.Set(0, 1, tt.v, tt.err)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			if math.IsNaN(tt.want) {
				assert.True(t, math.IsNaN(tab.Scores[0][1]))
			} else {
				assert.Equal(t, tt.want, tab.Scores[0][1])
			}
			assert.True(t, math.IsNaN(tab.Scores[0][0]), "unset cells stay NaN (not scored)")
		})
	}
}

func TestNewRewardTableErrors(t *testing.T) {
	tests := []struct {
		name    string
		names   []string
		weights []float64
		want    string
	}{
		{"none", nil, nil, "no reward functions"},
		{"weights mismatch", []string{"a", "b"}, []float64{1}, "1 reward weights for 2"},
		{"duplicate", []string{"a", "a"}, []float64{1, 1}, `two reward functions are named "a"`},
		{"empty name", []string{""}, []float64{1}, "empty name"},
		{"NaN weight", []string{"a"}, []float64{nan}, `"a" has weight NaN`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRewardTable(tt.names, tt.weights, 4)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	tab, err := NewRewardTable([]string{"a"}, []float64{1}, 2)
	require.NoError(t, err)
	assert.Error(t, tab.Set(1, 0, 1, nil), "no function 1")
	assert.Error(t, tab.Set(0, 2, 1, nil), "no rollout 2")
}

func TestRewardTableTotalAndMetrics(t *testing.T) {
	tests := []struct {
		name    string
		names   []string
		weights []float64
		scores  [][]float64
		include []bool
		total   []float64
		metrics map[string]float64
	}{
		{
			// TRL test_reward_metric_reflects_reward_weights (§8.13).
			name: "weights in the logged reward", names: []string{"one", "zero"}, weights: []float64{0.7, 0.3},
			scores: [][]float64{{1, 1, 1}, {0, 0, 0}},
			total:  []float64{0.7, 0.7, 0.7},
			metrics: map[string]float64{"reward": 0.7, "reward_std": 0, "rewards/one/mean": 1, "rewards/one/std": 0,
				"rewards/zero/mean": 0, "rewards/zero/std": 0},
		},
		{
			// §8.12: a function returning None everywhere next to a valid one.
			name: "all-None function beside a valid one", names: []string{"valid", "none"}, weights: []float64{1, 1},
			scores: [][]float64{{1, 2, 3}, {nan, nan, nan}},
			total:  []float64{1, 2, 3},
			metrics: map[string]float64{"reward": 2, "reward_std": 1, "rewards/valid/mean": 2, "rewards/valid/std": 1,
				"rewards/none/mean": nan, "rewards/none/std": nan},
		},
		{
			// nansum: a None term counts 0; a row nobody scored is NaN and
			// is left out of reward and reward_std.
			name: "partial None", names: []string{"a", "b"}, weights: []float64{2, -1},
			scores: [][]float64{{1, nan, nan, 3}, {4, 5, nan, nan}},
			total:  []float64{2 - 4, -5, nan, 6},
			metrics: map[string]float64{"reward": (-2 - 5 + 6) / 3.0, "reward_std": math.Sqrt((math.Pow(-2+1.0/3, 2) + math.Pow(-5+1.0/3, 2) + math.Pow(6+1.0/3, 2)) / 2),
				"rewards/a/mean": 2, "rewards/a/std": math.Sqrt(2), "rewards/b/mean": 4.5, "rewards/b/std": math.Sqrt(0.5)},
		},
		{
			name: "include leaves failed rollouts out", names: []string{"a"}, weights: []float64{1},
			scores: [][]float64{{1, 3, 100}}, include: []bool{true, true, false},
			total:   []float64{1, 3, 100},
			metrics: map[string]float64{"reward": 2, "reward_std": math.Sqrt(2), "rewards/a/mean": 2, "rewards/a/std": math.Sqrt(2)},
		},
		{
			name: "one scored value has no std", names: []string{"a"}, weights: []float64{1},
			scores:  [][]float64{{nan, 5}},
			total:   []float64{nan, 5},
			metrics: map[string]float64{"reward": 5, "reward_std": nan, "rewards/a/mean": 5, "rewards/a/std": nan},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab, err := NewRewardTable(tt.names, tt.weights, len(tt.scores[0]))
			require.NoError(t, err)
			for k, col := range tt.scores {
				for i, v := range col {
					var e error
					if math.IsNaN(v) {
						e = ErrNoScore
					}
					require.NoError(t, tab.Set(k, i, v, e))
				}
			}
			assertFloats(t, tt.total, tab.Total(), tol)
			m := Metrics{}
			tab.Metrics(m, tt.include)
			require.Len(t, m, len(tt.metrics))
			for k, want := range tt.metrics {
				assertFloat(t, want, m[k], tol, k)
			}
		})
	}
}

func TestRewardTableUnscored(t *testing.T) {
	tab, err := NewRewardTable([]string{"a", "b"}, []float64{1, 1}, 3)
	require.NoError(t, err)
	require.NoError(t, tab.Set(0, 0, 1, nil))
	require.NoError(t, tab.Set(1, 2, 1, nil))
	assert.Equal(t, []int{1}, tab.Unscored())
}

// TRL TestNanStd (§8.18).
func TestNanStd(t *testing.T) {
	tests := []struct {
		x    []float64
		want float64
	}{
		{[]float64{1, 2, 3, nan}, 1},
		{[]float64{1, nan}, nan},
		{[]float64{nan, nan}, nan},
		{[]float64{2, 4, 4, 4, 5, 5, 7, 9}, math.Sqrt(32.0 / 7)},
		{nil, nan},
	}
	for _, tt := range tests {
		assertFloat(t, tt.want, nanStd(tt.x), tol, fmt.Sprint(tt.x))
	}
	// Huge finite values: scaled, not squared into +Inf (relative tolerance:
	// one division and one multiplication by the scale, a few ulps).
	for _, tt := range []struct {
		x         []float64
		mean, std float64
	}{
		{[]float64{1e154, -1e154}, 0, 1e154 * math.Sqrt2},
		{[]float64{1e300, 2e300, 3e300, nan}, 2e300, 1e300},
		{[]float64{1e308, 1e308}, 1e308, 0},
		{[]float64{4e307, -4e307, 4e307, -4e307}, 0, 4e307 * math.Sqrt(4.0/3)},
	} {
		assert.InDelta(t, tt.mean, nanMean(tt.x), 1e-15*math.Abs(tt.x[0]), "mean %v", tt.x)
		assert.InEpsilon(t, tt.std+1, nanStd(tt.x)+1, 1e-15, "std %v", tt.x)
	}
	assert.True(t, math.IsInf(nanStd([]float64{1.5e308, -1.5e308}), 1), "a std beyond float64 is +Inf")
	assertFloat(t, 2, nanMean([]float64{1, nan, 3}), tol, "nanMean")
	assertFloat(t, nan, nanMean([]float64{nan}), tol, "nanMean all NaN")
}

// assertFloat checks got against want within tol; NaN must match NaN.
func assertFloat(t *testing.T, want, got, tol float64, msg string) {
	t.Helper()
	if math.IsNaN(want) {
		assert.True(t, math.IsNaN(got), "%s: want NaN, got %v", msg, got)
		return
	}
	assert.InDelta(t, want, got, tol, msg)
}

func assertFloats(t *testing.T, want, got []float64, tol float64) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		assertFloat(t, want[i], got[i], tol, fmt.Sprintf("[%d]", i))
	}
}
