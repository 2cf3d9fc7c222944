package grpo

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

func assertMetrics(t *testing.T, want, got Metrics) {
	t.Helper()
	require.Len(t, got, len(want), "got %v", got)
	for k, v := range want {
		_, ok := got[k]
		require.True(t, ok, "missing %s", k)
		assertFloat(t, v, got[k], tol, k)
	}
}

func TestCompletionStats(t *testing.T) {
	tests := []struct {
		name    string
		tokens  []int
		clipped []bool
		want    Metrics
	}{
		{"mixed", []int{3, 5, 10}, []bool{false, false, true}, Metrics{
			MetricCompletionsMeanLength: 6, MetricCompletionsMinLength: 3, MetricCompletionsMaxLength: 10,
			MetricCompletionsClippedRatio:   1.0 / 3,
			MetricCompletionsMeanTermLength: 4, MetricCompletionsMinTermLength: 3, MetricCompletionsMaxTermLength: 5,
		}},
		{"all clipped: terminated lengths are 0", []int{7, 9}, []bool{true, true}, Metrics{
			MetricCompletionsMeanLength: 8, MetricCompletionsMinLength: 7, MetricCompletionsMaxLength: 9,
			MetricCompletionsClippedRatio:   1,
			MetricCompletionsMeanTermLength: 0, MetricCompletionsMinTermLength: 0, MetricCompletionsMaxTermLength: 0,
		}},
		{"none", nil, nil, Metrics{
			MetricCompletionsMeanLength: nan, MetricCompletionsMinLength: nan, MetricCompletionsMaxLength: nan,
			MetricCompletionsClippedRatio:   nan,
			MetricCompletionsMeanTermLength: 0, MetricCompletionsMinTermLength: 0, MetricCompletionsMaxTermLength: 0,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Metrics{}
			require.NoError(t, CompletionStats(m, tt.tokens, tt.clipped))
			assertMetrics(t, tt.want, m)
		})
	}
	assert.Error(t, CompletionStats(Metrics{}, []int{1}, nil))
}

func TestToolStats(t *testing.T) {
	tests := []struct {
		name            string
		calls, failures []int
		call, fail      float64
	}{
		// §8.1: a valid call, an unknown tool, plain text.
		{"env factory", []int{1, 1, 0}, []int{0, 1, 0}, 2.0 / 3, 0.5},
		// §8.4: two envs, each row of one calls once.
		{"multiple environments", []int{1, 0, 1, 0}, []int{0, 0, 0, 0}, 0.5, 0},
		{"no calls: failure frequency 0", []int{0, 0}, []int{0, 0}, 0, 0},
		{"several calls per rollout", []int{3, 1}, []int{2, 0}, 2, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Metrics{}
			require.NoError(t, ToolStats(m, tt.calls, tt.failures))
			assertMetrics(t, Metrics{MetricToolsCallFrequency: tt.call, MetricToolsFailureFrequency: tt.fail}, m)
		})
	}
	assert.Error(t, ToolStats(Metrics{}, []int{1}, []int{2}), "more failures than calls")
	assert.Error(t, ToolStats(Metrics{}, []int{1}, nil))
}

func TestLossStatsTokenLevel(t *testing.T) {
	s := NewLossStats(baseParams(LossDAPO))
	in := LossInput{
		Mask:    [][]bool{{true, true, false}, {true, true}, {false}},
		Entropy: [][]float32{{1, 2, 100}, {3, 4}, {100}},
	}
	out := LossOutput{
		Loss:     0.5,
		ClipLow:  [][]bool{{true, false, false}, {false, false}, {false}},
		ClipHigh: [][]bool{{false, false, false}, {true, true}, {false}},
		KL:       [][]float64{{0.1, 0.3, 9}, {0.2, 0.2}, {9}},
	}
	s.Add(in, out)
	m := Metrics{}
	s.Metrics(m)
	assertMetrics(t, Metrics{
		MetricLoss: 0.5, MetricKL: 0.2, MetricEntropy: 2.5,
		MetricPolicyLoss:       math.NaN(), // no Weight: the terms are unknown
		MetricClipRatioLowMean: 0.25, MetricClipRatioHighMean: 0.5, MetricClipRatioRegionMean: 0.75,
		// per-sequence fractions: low {1/2, 0, NaN}, high {0, 1, NaN}; NaN skipped
		MetricClipRatioLowMin: 0, MetricClipRatioHighMax: 1,
	}, m)

	// A second micro-batch: values are averaged, losses summed.
	out2 := LossOutput{Loss: 0.25,
		ClipLow:  [][]bool{{false, false, false}, {false, false}, {false}},
		ClipHigh: [][]bool{{false, false, false}, {false, false}, {false}},
		KL:       [][]float64{{0, 0, 0}, {0, 0}, {0}},
	}
	s.Add(in, out2)
	m = Metrics{}
	s.Metrics(m)
	assertFloat(t, 0.75, m[MetricLoss], tol, "loss")
	assertFloat(t, 0.1, m[MetricKL], tol, "kl")
	assertFloat(t, 0.125, m[MetricClipRatioLowMean], tol, "low_mean")
	assertFloat(t, 0.5, m[MetricClipRatioHighMax], tol, "high_max")
}

// Errata 10.2: at sequence level the clip means are plain means over
// sequences, fully masked rows included, and min/max take the 0/1 flags.
func TestLossStatsSequenceLevel(t *testing.T) {
	p := baseParams(LossGRPO)
	p.SequenceRatio = true
	s := NewLossStats(p)
	in := LossInput{Mask: [][]bool{{true, true}, {false, true}, {false}}}
	out := LossOutput{
		ClipLow:  [][]bool{{true, true}, {false, false}, {false}},
		ClipHigh: [][]bool{{false, false}, {false, true}, {false}},
	}
	s.Add(in, out)
	m := Metrics{}
	s.Metrics(m)
	assertMetrics(t, Metrics{MetricLoss: 0, MetricPolicyLoss: math.NaN(),
		MetricClipRatioLowMean: 1.0 / 3, MetricClipRatioHighMean: 1.0 / 3, MetricClipRatioRegionMean: 2.0 / 3,
		MetricClipRatioLowMin: 0, MetricClipRatioHighMax: 1,
	}, m)
}

func TestLossStatsCISPOAndVESPO(t *testing.T) {
	s := NewLossStats(baseParams(LossCISPO))
	in := LossInput{Mask: [][]bool{{true, true, true, false}}}
	s.Add(in, LossOutput{ClipLow: [][]bool{make([]bool, 4)}, ClipHigh: [][]bool{{true, false, false, true}}})
	m := Metrics{}
	s.Metrics(m)
	assertMetrics(t, Metrics{MetricLoss: 0, MetricPolicyLoss: math.NaN(), MetricCISPOClipRatio: 1.0 / 3}, m)

	// cispo at sequence level: one flag per sequence, a plain mean over
	// sequences (a row with no loss token counts, unflagged).
	p := baseParams(LossCISPO)
	p.SequenceRatio = true
	s = NewLossStats(p)
	s.Add(LossInput{Mask: [][]bool{{true, true}, {true}, {false}}}, LossOutput{ClipLow: [][]bool{{false, false}, {false}, {false}},
		ClipHigh: [][]bool{{true, true}, {false}, {false}}})
	m = Metrics{}
	s.Metrics(m)
	assertMetrics(t, Metrics{MetricLoss: 0, MetricPolicyLoss: math.NaN(), MetricCISPOClipRatio: 1.0 / 3}, m)

	s = NewLossStats(baseParams(LossVESPO))
	s.Add(LossInput{Mask: [][]bool{{true}, {true}}}, LossOutput{Phi: []float64{0.5, 1}, ClipLow: [][]bool{{false}, {false}}, ClipHigh: [][]bool{{false}, {false}}})
	m = Metrics{}
	s.Metrics(m)
	assertMetrics(t, Metrics{MetricLoss: 0, MetricPolicyLoss: math.NaN(), MetricVESPOPhiSeqMean: 0.75}, m)
}

// The loss metrics of a real loss output: on-policy nothing clips.
func TestLossStatsFromPolicyLoss(t *testing.T) {
	p := baseParams(LossDAPO)
	p.Beta = 0.1
	in := LossInput{LogP: [][]float32{{-1, -2}}, Ref: [][]float32{{-1, -2}}, Mask: [][]bool{{true, true}}, Adv: []float64{1}, Weight: ones(2)}
	out, err := specLoss(p, in)
	require.NoError(t, err)
	s := NewLossStats(p)
	s.Add(in, out)
	m := Metrics{}
	s.Metrics(m)
	assertFloat(t, 0, m[MetricKL], tol, "kl of identical policies")
	assertFloat(t, 0, m[MetricClipRatioRegionMean], tol, "region")
	assertFloat(t, -2, m[MetricLoss], tol, "loss = Σ −A·w")
}

func TestSamplingStats(t *testing.T) {
	train := [][]float32{{-1, -2, -0.5}}
	samp := [][]float32{{-1.5, -1.75, -1.5}} // d = 0.5, −0.25 (masked), 1
	mask := [][]bool{{true, false, true}}
	e := math.Exp

	s := NewSamplingStats()
	require.NoError(t, s.Add(train, samp, mask, nil, false))
	m := Metrics{}
	s.Metrics(m)
	assertMetrics(t, Metrics{
		MetricSamplingLogpDiffMean: 0.75, MetricSamplingLogpDiffMax: 1,
		MetricSamplingISRatioMin: e(0.5), MetricSamplingISRatioMean: (e(0.5) + e(1)) / 2, MetricSamplingISRatioMax: e(1),
	}, m)

	s = NewSamplingStats()
	require.NoError(t, s.Add([][]float32{{-1, -1}, {-1}}, [][]float32{{-1, -1}, {-1}}, [][]bool{{true, true}, {true}},
		[][]float64{{2, 2}, {0.5}}, true))
	m = Metrics{}
	s.Metrics(m)
	assertFloat(t, 0, m[MetricSamplingLogpDiffMax], tol, "identical log-probs")
	assertFloat(t, 0.5, m[MetricSamplingISRatioMin], tol, "min over sequences")
	assertFloat(t, 1.25, m[MetricSamplingISRatioMean], tol, "mean over sequences")
	assertFloat(t, 2, m[MetricSamplingISRatioMax], tol, "max over sequences")

	// Rows added out of order (shuffled micro-batches) give the same
	// figures, bit for bit, as rows added in order.
	rows := [][]float32{{-1, -2.3}, {-0.1}, {-3.7, -0.2, -1}}
	samps := [][]float32{{-1.1, -2}, {-0.4}, {-3, -0.25, -1.3}}
	masks := [][]bool{{true, true}, {true}, {true, false, true}}
	inOrder, shuffled := NewSamplingStats(), NewSamplingStats()
	require.NoError(t, inOrder.Add(rows, samps, masks, nil, false))
	for _, j := range []int{2, 0, 1} {
		require.NoError(t, shuffled.AddRow(j, rows[j], samps[j], masks[j], nil, false))
	}
	a, b := Metrics{}, Metrics{}
	inOrder.Metrics(a)
	shuffled.Metrics(b)
	assert.Equal(t, a, b)

	m = Metrics{}
	NewSamplingStats().Metrics(m)
	assert.True(t, math.IsNaN(m[MetricSamplingLogpDiffMean]))
	assert.Error(t, NewSamplingStats().Add(train, samp[:0], mask, nil, false))
}

func TestQuantileLinear(t *testing.T) {
	x := []float64{4, 1, 3, 2}
	assert.InDelta(t, 1, quantileLinear(x, 0), tol)
	assert.InDelta(t, 4, quantileLinear(x, 1), tol)
	assert.InDelta(t, 2.5, quantileLinear(x, 0.5), tol)
	assert.InDelta(t, 1.3, quantileLinear(x, 0.1), tol)
	assert.Equal(t, []float64{4, 1, 3, 2}, x, "input untouched")
}

// TestLossStatsTerms: the logged terms of the loss are each what the loss
// gains from that term alone (the loss with only it switched on), and
// they add up to the loss, for every loss type, with the entropy mask.
// The loss comes back as a float64 sum of float32 token losses, so the
// differences hold to 1e-6.
func TestLossStatsTerms(t *testing.T) {
	logp := [][]float32{{-1.0, -0.75, -2.5, -0.25}, {-1.5, -0.5, -3}, {-0.125, -2}}
	old := [][]float32{{-1.25, -0.5, -2.5, -0.875}, {-1.25, -0.625, -2}, {-0.5, -1.5}}
	ref := [][]float32{{-0.75, -1, -2, -0.5}, {-1, -1, -2.5}, {-0.25, -1.75}}
	ent := [][]float32{{0.5, 1.5, 0.25, 2}, {1, 0.75, 3}, {0.125, 2.5}}
	mask := [][]bool{{true, true, false, true}, {true, true, true}, {true, false}}
	adv := []float64{0.7, -1.3, 0.4}
	for _, lt := range LossTypes() {
		for _, bias := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/bias-corrected %v", lt, bias), func(t *testing.T) {
				p := baseParams(lt)
				p.UseBiasCorrectionKL = bias
				w, err := LossWeights(lt, LossNorm{GenerationTokens: 20, GradientAccumulationSteps: 2, StepsPerGeneration: 2, MaxCompletionLength: 8, Level: ISSequence}, mask)
				require.NoError(t, err)
				in := LossInput{LogP: logp, Old: old, Ref: ref, Entropy: ent, Mask: mask, Adv: adv, Weight: w,
					EntropyMask: [][]bool{{true, false, false, true}, {false, true, true}, {true, false}}}
				loss := func(beta, coef float32) LossOutput {
					q := p
					q.Beta, q.EntropyCoef = beta, coef
					out, err := specLoss(q, in)
					require.NoError(t, err)
					return out
				}
				const beta, coef = 0.2, 0.05
				full, none := loss(beta, coef), loss(0, 0)
				s := NewLossStats(func() kernels.LossParams { q := p; q.Beta, q.EntropyCoef = beta, coef; return q }())
				s.Add(in, full)
				s.Add(in, full) // two micro-batches: the terms add up like loss
				m := Metrics{}
				s.Metrics(m)
				assert.InDelta(t, 2*full.Loss, m[MetricLoss], 1e-12)
				assert.InDelta(t, 2*none.Loss, m[MetricPolicyLoss], 1e-6)
				assert.InDelta(t, 2*(loss(beta, 0).Loss-none.Loss), m[MetricKLLoss], 1e-6)
				assert.InDelta(t, 2*(loss(0, coef).Loss-none.Loss), m[MetricEntropyLoss], 1e-6)
				assert.InDelta(t, m[MetricLoss], m[MetricPolicyLoss]+m[MetricKLLoss]+m[MetricEntropyLoss], 1e-9)
				assert.Equal(t, float64(float32(coef)), m[MetricEntropyCoef])

				s = NewLossStats(p) // β = 0, no bonus: only policy_loss
				s.Add(in, none)
				m = Metrics{}
				s.Metrics(m)
				assert.InDelta(t, none.Loss, m[MetricPolicyLoss], 1e-12)
				assert.NotContains(t, m, MetricKLLoss)
				assert.NotContains(t, m, MetricEntropyLoss)
				assert.NotContains(t, m, MetricEntropyCoef)
			})
		}
	}
}
