package grpo

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func baseParams(t LossType) LossParams {
	c := DefaultConfig()
	c.LossType = t
	if t == LossCISPO {
		c.EpsilonHigh = 5
	}
	if t == LossLUSPO {
		c.ImportanceSamplingLevel = ISSequence
	}
	return c.LossParams()
}

func ones(rows ...int) [][]float64 {
	w := make([][]float64, len(rows))
	for i, n := range rows {
		w[i] = make([]float64, n)
		for t := range w[i] {
			w[i][t] = 1
		}
	}
	return w
}

// Loss values and gradients checked against hand computation. Tolerance
// 1e-6: gradients come back as float32 (relative rounding 6e-8 on O(1)
// values) and the hand values are written to 6+ digits or as formulas.
func TestPolicyLossHandComputed(t *testing.T) {
	e := math.Exp
	tests := []struct {
		name  string
		p     func() LossParams
		in    LossInput
		loss  float64
		dlogp [][]float64
		low   [][]bool
		high  [][]bool
		kl    [][]float64
		phi   []float64
	}{
		{
			// Errata 10.8: grpo on-policy, β = 0: L = 0, ∇ = −A·W.
			name: "grpo on-policy: zero loss, non-zero gradient",
			p:    func() LossParams { return baseParams(LossGRPO) },
			in: LossInput{
				LogP: [][]float32{{-1, -2}, {-0.5, -3, -1}},
				Mask: [][]bool{{true, true}, {true, false, true}},
				Adv:  []float64{1, -1},
				// grpo weights 1/(n_i·B): 1/4 everywhere
				Weight: [][]float64{{0.25, 0.25}, {0.25, 0, 0.25}},
			},
			loss:  0,
			dlogp: [][]float64{{-0.25, -0.25}, {0.25, 0, 0.25}},
			low:   [][]bool{{false, false}, {false, false, false}},
			high:  [][]bool{{false, false}, {false, false, false}},
		},
		{
			// Token ratios e^{±0.5} against ε = 0.2 with both signs of A.
			name: "two-sided clip by token",
			p:    func() LossParams { return baseParams(LossDAPO) },
			in: LossInput{
				LogP:   [][]float32{{-1, -2}, {-1, -2}},
				Old:    [][]float32{{-1.5, -1.5}, {-1.5, -1.5}},
				Mask:   [][]bool{{true, true}, {true, true}},
				Adv:    []float64{1, -1},
				Weight: ones(2, 2),
			},
			// row 0 (A=1): w=e^.5 → clipped at 1.2: ℓ=−1.2, ∇0, high;
			//              w=e^−.5 → unclipped: ℓ=−e^−.5, ∇=−e^−.5.
			// row 1 (A=−1): w=e^.5 → unclipped: ℓ=e^.5, ∇=e^.5;
			//              w=e^−.5 → clipped at 0.8: ℓ=0.8, ∇0, low.
			loss:  -1.2 - e(-0.5) + e(0.5) + 0.8,
			dlogp: [][]float64{{0, -e(-0.5)}, {e(0.5), 0}},
			low:   [][]bool{{false, false}, {false, true}},
			high:  [][]bool{{true, false}, {false, false}},
		},
		{
			// δ = 1.5 caps the unclipped branch: A<0, w=e^.5>1.5 →
			// ℓ = −min(−1.5, −1.2) = 1.5 with no gradient.
			name: "delta caps the unclipped ratio",
			p: func() LossParams {
				p := baseParams(LossDAPO)
				p.Delta = 1.5
				return p
			},
			in: LossInput{
				LogP: [][]float32{{-1}}, Old: [][]float32{{-1.5}},
				Mask: [][]bool{{true}}, Adv: []float64{-1}, Weight: ones(1),
			},
			loss:  1.5,
			dlogp: [][]float64{{0}},
			low:   [][]bool{{false}},
			high:  [][]bool{{false}},
		},
		{
			// Errata 10.4: clip metrics use the capped ratio. δ = 1.1 <
			// 1+ε_high: A>0, w = e^.5 → capped 1.1, not above 1.2: no flag.
			name: "clip flags after the delta cap",
			p: func() LossParams {
				p := baseParams(LossDAPO)
				p.Delta = 1.1
				return p
			},
			in: LossInput{
				LogP: [][]float32{{-1}}, Old: [][]float32{{-1.5}},
				Mask: [][]bool{{true}}, Adv: []float64{1}, Weight: ones(1),
			},
			loss:  -1.1,
			dlogp: [][]float64{{0}},
			low:   [][]bool{{false}},
			high:  [][]bool{{false}},
		},
		{
			// GSPO: w = exp(mean δ over loss tokens) = e^{(0.2−0.1)/2};
			// grpo weight 1/(n·B) = 1/2; ℓ = −w·A; ∇_t = −A·w·(ΣW)/n = −w/2.
			name: "sequence-level ratio",
			p: func() LossParams {
				p := baseParams(LossGRPO)
				p.Level = ISSequence
				return p
			},
			in: LossInput{
				LogP: [][]float32{{-1.0, -2.0, -3.0}}, Old: [][]float32{{-1.2, -1.9, -3.5}},
				Mask: [][]bool{{true, true, false}}, Adv: []float64{1}, Weight: [][]float64{{0.5, 0.5, 0}},
			},
			loss:  -e(0.05),
			dlogp: [][]float64{{-e(0.05) / 2, -e(0.05) / 2, 0}},
			low:   [][]bool{{false, false, false}},
			high:  [][]bool{{false, false, false}},
		},
		{
			// k3: x = ref − logp = 0.5: KL = e^.5 − 1.5; dKL/dlogp = 1 − e^.5.
			name: "KL k3 with beta",
			p: func() LossParams {
				p := baseParams(LossBNPO)
				p.Beta = 0.1
				return p
			},
			in: LossInput{
				LogP: [][]float32{{-1}}, Ref: [][]float32{{-0.5}},
				Mask: [][]bool{{true}}, Adv: []float64{0}, Weight: ones(1),
			},
			loss:  0.1 * (e(0.5) - 1.5),
			dlogp: [][]float64{{0.1 * (1 - e(0.5))}},
			low:   [][]bool{{false}},
			high:  [][]bool{{false}},
			kl:    [][]float64{{e(0.5) - 1.5}},
		},
		{
			// cispo: ℓ = −sg(min(w, ε_high))·A·logp; w = e^1 < 5, w = e^2 > 5.
			name: "cispo",
			p:    func() LossParams { return baseParams(LossCISPO) },
			in: LossInput{
				LogP: [][]float32{{-1, -0.5}}, Old: [][]float32{{-2, -2.5}},
				Mask: [][]bool{{true, true}}, Adv: []float64{2}, Weight: ones(2),
			},
			loss:  -e(1)*2*-1 - 5*2*-0.5,
			dlogp: [][]float64{{-2 * e(1), -10}},
			low:   [][]bool{{false, false}},
			high:  [][]bool{{false, true}},
		},
		{
			// sapo on-policy: σ(0) = ½: ℓ = −(4/τ)·½·A; ∇ = −4·¼·A.
			name: "sapo on-policy",
			p:    func() LossParams { return baseParams(LossSAPO) },
			in: LossInput{
				LogP: [][]float32{{-1}, {-1}}, Mask: [][]bool{{true}, {true}},
				Adv: []float64{1, -1}, Weight: ones(1, 1),
			},
			loss:  -2.0/1 + 2.0/1.05,
			dlogp: [][]float64{{-1}, {1}},
			low:   [][]bool{{false}, {false}},
			high:  [][]bool{{false}, {false}},
		},
		{
			// vespo: Σδ = 0.25, A ≥ 0 → k=2, λ=3: φ = exp(3 + 0.5 − 3e^.25);
			// ℓ_t = −φ·A·logp_t; ∇ = −φ·A. A < 0 on-policy → φ = 1.
			name: "vespo",
			p:    func() LossParams { return baseParams(LossVESPO) },
			in: LossInput{
				LogP: [][]float32{{-1, -2}, {-1}}, Old: [][]float32{{-1.125, -2.125}, {-1}},
				Mask: [][]bool{{true, true}, {true}}, Adv: []float64{0, -1}, Weight: ones(2, 1),
			},
			loss:  -1 * -1 * -1, // row 0 has A = 0; row 1: −1·(−1)·(−1)
			dlogp: [][]float64{{0, 0}, {1}},
			low:   [][]bool{{false, false}, {false}},
			high:  [][]bool{{false, false}, {false}},
			phi:   []float64{e(3 + 0.5 - 3*e(0.25)), 1},
		},
		{
			// luspo (sequence level, β = 0): mean_i(ℓ_i·n_i); B=2 → W=½.
			// On-policy ℓ_i = −A_i: L = ½(−1·2 + 0.5·3) = −0.25.
			name: "luspo length-scaled",
			p:    func() LossParams { return baseParams(LossLUSPO) },
			in: LossInput{
				LogP: [][]float32{{-1, -1}, {-1, -1, -1}}, Mask: [][]bool{{true, true}, {true, true, true}},
				Adv: []float64{1, -0.5}, Weight: [][]float64{{0.5, 0.5}, {0.5, 0.5, 0.5}},
			},
			loss: -0.25,
			// ∇_t = −A·(ΣW)/n = −A/2
			dlogp: [][]float64{{-0.5, -0.5}, {0.25, 0.25, 0.25}},
			low:   [][]bool{{false, false}, {false, false, false}},
			high:  [][]bool{{false, false}, {false, false, false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := PolicyLoss(tt.p(), tt.in)
			require.NoError(t, err)
			assert.InDelta(t, tt.loss, out.Loss, 1e-6, "loss")
			require.Len(t, out.DLogP, len(tt.dlogp))
			for i := range tt.dlogp {
				for j := range tt.dlogp[i] {
					assert.InDelta(t, tt.dlogp[i][j], float64(out.DLogP[i][j]), 1e-6, "dlogp[%d][%d]", i, j)
				}
			}
			assert.Equal(t, tt.low, out.ClipLow, "low")
			assert.Equal(t, tt.high, out.ClipHigh, "high")
			if tt.kl != nil {
				for i := range tt.kl {
					assertFloats(t, tt.kl[i], out.KL[i], 1e-6)
				}
			}
			if tt.phi != nil {
				assertFloats(t, tt.phi, out.Phi, 1e-12)
			}
		})
	}
}

// The analytic gradient matches central differences of the loss value for
// every loss type whose loss has no stop-gradient factor, at both ratio
// levels, with δ, β, bias-corrected KL, the sampling ratio, the entropy
// mask and the entropy bonus. Log-probs are moved by h = 2^-12 (exact in
// float32 at these magnitudes); the central difference's error is
// O(h²·f”') ≈ 1e-7 here, so 2e-5 leaves room for float32 gradients.
func TestPolicyLossGradientMatchesFiniteDifferences(t *testing.T) {
	logp := [][]float32{{-1.0, -0.75, -2.5, -0.25}, {-1.5, -0.5, -3}, {-0.125, -2}}
	old := [][]float32{{-1.25, -0.5, -2.5, -0.875}, {-1.25, -0.625, -2}, {-0.5, -1.5}}
	ref := [][]float32{{-0.75, -1, -2, -0.5}, {-1, -1, -2.5}, {-0.25, -1.75}}
	ent := [][]float32{{0.5, 1.5, 0.25, 2}, {1, 0.75, 3}, {0.125, 2.5}}
	mask := [][]bool{{true, true, false, true}, {true, true, true}, {true, false}}
	adv := []float64{0.7, -1.3, 0.4}
	isr := [][]float64{{1, 0.9, 1, 1.2}, {0.8, 1.1, 1}, {1, 1}}
	emask := [][]bool{{true, false, false, true}, {true, true, true}, {true, false}}
	type variant struct {
		name string
		edit func(*LossParams, *LossInput)
	}
	variants := []variant{
		{"plain", func(*LossParams, *LossInput) {}},
		{"delta", func(p *LossParams, _ *LossInput) { p.Delta = 1.3 }},
		{"beta", func(p *LossParams, _ *LossInput) { p.Beta = 0.2 }},
		{"beta bias-corrected", func(p *LossParams, _ *LossInput) { p.Beta = 0.2; p.BiasCorrectionKL = true }},
		{"IS ratio", func(_ *LossParams, in *LossInput) { in.ISRatio = isr }},
		{"entropy mask", func(_ *LossParams, in *LossInput) { in.EntropyMask = emask }},
		{"eps high 0.28", func(p *LossParams, _ *LossInput) { p.EpsHigh = 0.28 }},
	}
	for _, lt := range []LossType{LossGRPO, LossBNPO, LossDrGRPO, LossDAPO, LossLUSPO, LossSAPO} {
		for _, level := range []ISLevel{ISToken, ISSequence} {
			if (level == ISSequence) != (lt == LossLUSPO) && (lt == LossLUSPO || lt == LossSAPO) {
				continue // luspo is sequence-only, sapo token-only
			}
			for _, v := range variants {
				if v.name == "delta" && lt == LossSAPO {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%s", lt, level, v.name), func(t *testing.T) {
					p := baseParams(lt)
					p.Level = level
					p.EntropyCoef = 0.05
					w, err := LossWeights(lt, LossNorm{GenerationTokens: 20, GradientAccumulationSteps: 2, StepsPerGeneration: 2, MaxCompletionLength: 8}, mask)
					require.NoError(t, err)
					in := LossInput{LogP: logp, Old: old, Ref: ref, Entropy: ent, Mask: mask, Adv: adv, Weight: w}
					v.edit(&p, &in)
					out, err := PolicyLoss(p, in)
					require.NoError(t, err)
					const h = 1.0 / 4096
					for i := range logp {
						for j := range logp[i] {
							lossAt := func(d float32, which string) float64 {
								lp, en := clone32(logp), clone32(ent)
								if which == "logp" {
									lp[i][j] += d
								} else {
									en[i][j] += d
								}
								in2 := in
								in2.LogP, in2.Entropy = lp, en
								o, err := PolicyLoss(p, in2)
								require.NoError(t, err)
								return o.Loss
							}
							fd := (lossAt(h, "logp") - lossAt(-h, "logp")) / (2 * h)
							assert.InDelta(t, fd, float64(out.DLogP[i][j]), 2e-5, "dlogp[%d][%d]", i, j)
							fdH := (lossAt(h, "ent") - lossAt(-h, "ent")) / (2 * h)
							assert.InDelta(t, fdH, float64(out.DEntropy[i][j]), 2e-5, "dentropy[%d][%d]", i, j)
							if !mask[i][j] {
								assert.Zero(t, out.DLogP[i][j], "masked token gets no gradient")
							}
						}
					}
				})
			}
		}
	}
}

func clone32(x [][]float32) [][]float32 {
	out := make([][]float32, len(x))
	for i := range x {
		out[i] = append([]float32(nil), x[i]...)
	}
	return out
}

// Old = nil is the on-policy case: the same result as passing LogP as Old.
func TestPolicyLossOnPolicyNilOld(t *testing.T) {
	logp := [][]float32{{-1, -0.5}, {-2}}
	mask := [][]bool{{true, true}, {true}}
	for _, lt := range LossTypes() {
		p := baseParams(lt)
		w, err := LossWeights(lt, LossNorm{GenerationTokens: 3, GradientAccumulationSteps: 1, StepsPerGeneration: 1, MaxCompletionLength: 4}, mask)
		require.NoError(t, err)
		in := LossInput{LogP: logp, Mask: mask, Adv: []float64{1, -1}, Weight: w}
		a, err := PolicyLoss(p, in)
		require.NoError(t, err)
		in.Old = clone32(logp)
		b, err := PolicyLoss(p, in)
		require.NoError(t, err)
		assert.Equal(t, a, b, "%s", lt)
		for i := range a.Ratio {
			for _, r := range a.Ratio[i] {
				assert.Equal(t, 1.0, r, "%s: on-policy ratio is exactly 1", lt)
			}
		}
	}
}

func TestLossWeights(t *testing.T) {
	mask := [][]bool{{true, true, false}, {true, true, true, true}} // n = 2, 4; total 6
	norm := LossNorm{GenerationTokens: 24, GradientAccumulationSteps: 2, StepsPerGeneration: 4, MaxCompletionLength: 10}
	tests := []struct {
		t    LossType
		want [][]float64
	}{
		{LossGRPO, [][]float64{{1.0 / 8, 1.0 / 8, 0}, {1.0 / 16, 1.0 / 16, 1.0 / 16, 1.0 / 16}}},   // 1/(n·B·GA)
		{LossSAPO, [][]float64{{1.0 / 8, 1.0 / 8, 0}, {1.0 / 16, 1.0 / 16, 1.0 / 16, 1.0 / 16}}},   // as grpo
		{LossBNPO, [][]float64{{1.0 / 12, 1.0 / 12, 0}, {1.0 / 12, 1.0 / 12, 1.0 / 12, 1.0 / 12}}}, // 1/(6·2)
		{LossDrGRPO, [][]float64{{1.0 / 40, 1.0 / 40, 0}, {1.0 / 40, 1.0 / 40, 1.0 / 40, 1.0 / 40}}},
		{LossDAPO, [][]float64{{1.0 / 12, 1.0 / 12, 0}, {1.0 / 12, 1.0 / 12, 1.0 / 12, 1.0 / 12}}}, // spg/(N·GA) = 4/48
		{LossCISPO, [][]float64{{1.0 / 12, 1.0 / 12, 0}, {1.0 / 12, 1.0 / 12, 1.0 / 12, 1.0 / 12}}},
		{LossVESPO, [][]float64{{1.0 / 12, 1.0 / 12, 0}, {1.0 / 12, 1.0 / 12, 1.0 / 12, 1.0 / 12}}},
		{LossLUSPO, [][]float64{{1.0 / 4, 1.0 / 4, 0}, {1.0 / 4, 1.0 / 4, 1.0 / 4, 1.0 / 4}}}, // 1/(B·GA)
	}
	for _, tt := range tests {
		t.Run(string(tt.t), func(t *testing.T) {
			w, err := LossWeights(tt.t, norm, mask)
			require.NoError(t, err)
			for i := range tt.want {
				assertFloats(t, tt.want[i], w[i], 1e-15)
			}
		})
	}
	// dapo over a whole generation (spg = GA, every micro-batch): Σ W·m = 1,
	// the global token mean.
	gen := [][][]bool{{{true, true}, {true}}, {{true, true, true}, {false, true}}}
	sum := 0.0
	for _, mb := range gen {
		w, err := LossWeights(LossDAPO, LossNorm{GenerationTokens: 7, GradientAccumulationSteps: 2, StepsPerGeneration: 2}, mb)
		require.NoError(t, err)
		for _, row := range w {
			for _, v := range row {
				sum += v
			}
		}
	}
	assert.InDelta(t, 1, sum, 1e-15)

	_, err := LossWeights(LossDrGRPO, LossNorm{GradientAccumulationSteps: 1}, mask)
	assert.ErrorContains(t, err, "MaxCompletionLength")
	_, err = LossWeights(LossDAPO, LossNorm{GenerationTokens: 3, GradientAccumulationSteps: 1, StepsPerGeneration: 1}, mask)
	assert.ErrorContains(t, err, "fewer than this micro-batch's 6")
	_, err = LossWeights("ppo", norm, mask)
	assert.ErrorContains(t, err, "unknown loss type")
}

// §8.15: mask_truncated_completions with every completion truncated gives
// zero loss and zero gradients (the parameters do not move).
func TestTruncatedCompletionsLeaveNoGradient(t *testing.T) {
	mask := [][]bool{{true, true}, {true, false, true}}
	m, err := TruncatedMask(mask, []bool{true, true})
	require.NoError(t, err)
	w, err := LossWeights(LossDAPO, LossNorm{GenerationTokens: 0, GradientAccumulationSteps: 1, StepsPerGeneration: 1}, m)
	require.NoError(t, err)
	p := baseParams(LossDAPO)
	p.Beta = 0.1
	p.EntropyCoef = 0.01
	out, err := PolicyLoss(p, LossInput{
		LogP: [][]float32{{-1, -2}, {-1, -1, -1}}, Ref: [][]float32{{-2, -1}, {0, 0, 0}}, Entropy: [][]float32{{1, 1}, {1, 1, 1}},
		Mask: m, Adv: []float64{1, -1}, Weight: w,
	})
	require.NoError(t, err)
	assert.Zero(t, out.Loss)
	for i := range out.DLogP {
		for j := range out.DLogP[i] {
			assert.Zero(t, out.DLogP[i][j])
			assert.Zero(t, out.DEntropy[i][j])
		}
	}
	// Only truncated rows go.
	m, err = TruncatedMask(mask, []bool{false, true})
	require.NoError(t, err)
	assert.Equal(t, [][]bool{{true, true}, {false, false, false}}, m)
	_, err = TruncatedMask(mask, []bool{true})
	assert.Error(t, err)
}

func TestPolicyLossErrors(t *testing.T) {
	ok := func() LossInput {
		return LossInput{LogP: [][]float32{{-1, -2}}, Mask: [][]bool{{true, true}}, Adv: []float64{1}, Weight: ones(2)}
	}
	tests := []struct {
		name string
		p    func() LossParams
		in   func() LossInput
		want string
	}{
		{"luspo at token level", func() LossParams { p := baseParams(LossLUSPO); p.Level = ISToken; return p }, ok, "luspo needs sequence-level"},
		{"sapo at sequence level", func() LossParams { p := baseParams(LossSAPO); p.Level = ISSequence; return p }, ok, "sapo needs token-level"},
		{"unknown type", func() LossParams { return LossParams{Type: "x", Level: ISToken} }, ok, "unknown loss type"},
		{"beta without ref", func() LossParams { p := baseParams(LossDAPO); p.Beta = 0.1; return p }, ok, "needs reference log-probs"},
		{"entropy coef without entropy", func() LossParams { p := baseParams(LossDAPO); p.EntropyCoef = 0.1; return p }, ok, "needs entropies"},
		{"advantage count", func() LossParams { return baseParams(LossDAPO) }, func() LossInput { in := ok(); in.Adv = nil; return in }, "0 advantages for 1"},
		{"NaN advantage", func() LossParams { return baseParams(LossDAPO) }, func() LossInput { in := ok(); in.Adv = []float64{nan}; return in }, "advantage NaN"},
		{"mask length", func() LossParams { return baseParams(LossDAPO) }, func() LossInput { in := ok(); in.Mask = [][]bool{{true}}; return in }, "Mask row 0 has 1 tokens, LogP has 2"},
		{"old rows", func() LossParams { return baseParams(LossDAPO) }, func() LossInput { in := ok(); in.Old = [][]float32{}; return in }, "Old has 0 rows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PolicyLoss(tt.p(), tt.in())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestSamplingISRatio(t *testing.T) {
	old := [][]float32{{-1, -2, -0.5}}
	samp := [][]float32{{-1.5, -1, -0.5}} // d = 0.5, −1 (masked), 0
	mask := [][]bool{{true, false, true}}
	e := math.Exp
	tests := []struct {
		mode   ISCorrection
		limit  float64
		want   []float64
		perSeq bool
	}{
		{ISCorrectionTokenTruncate, 3, []float64{e(0.5), 1, 1}, false},
		{ISCorrectionTokenTruncate, 1.5, []float64{1.5, 1, 1}, false},
		{ISCorrectionTokenMask, 1.5, []float64{0, 1, 1}, false},
		{ISCorrectionSequenceTruncate, 3, []float64{e(0.5), e(0.5), e(0.5)}, true},
		{ISCorrectionSequenceMask, 1.5, []float64{0, 0, 0}, true},
		{ISCorrectionSequenceTruncate, 1.5, []float64{1.5, 1.5, 1.5}, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.mode, tt.limit), func(t *testing.T) {
			rho, perSeq, err := SamplingISRatio(tt.mode, tt.limit, old, samp, mask)
			require.NoError(t, err)
			assert.Equal(t, tt.perSeq, perSeq)
			assertFloats(t, tt.want, rho[0], 1e-12)
		})
	}
	rho, _, err := SamplingISRatio(ISCorrectionNone, 3, old, samp, mask)
	require.NoError(t, err)
	assert.Nil(t, rho)
	_, _, err = SamplingISRatio("x", 3, old, samp, mask)
	assert.Error(t, err)
}

// vespo folds a sequence sampling ratio in once, a token ratio per token.
func TestVESPOFoldsSamplingRatio(t *testing.T) {
	p := baseParams(LossVESPO)
	in := LossInput{LogP: [][]float32{{-1, -1}}, Mask: [][]bool{{true, true}}, Adv: []float64{1}, Weight: ones(2),
		ISRatio: [][]float64{{math.Exp(0.25), math.Exp(0.25)}}, ISRatioPerSequence: true}
	out, err := PolicyLoss(p, in)
	require.NoError(t, err)
	want := func(logW float64) float64 { return math.Exp(3 + 2*logW - 3*math.Exp(logW)) }
	assert.InDelta(t, want(0.25), out.Phi[0], 1e-12)
	in.ISRatioPerSequence = false
	out, err = PolicyLoss(p, in)
	require.NoError(t, err)
	assert.InDelta(t, want(0.5), out.Phi[0], 1e-12)
	// ρ does not multiply vespo's loss: ∇ = −φ·A.
	assert.InDelta(t, -want(0.5), float64(out.DLogP[0][0]), 1e-6)
}

// TRL TestGetHighEntropyMask (§8.17).
func TestEntropyMask(t *testing.T) {
	ent := [][]float32{{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, {0.7, 0.8, 0.9, 1.0, 1.1, 1.2}}
	mask := [][]bool{{true, true, true, true, true, true}, {true, true, true, true, false, false}}
	got, err := EntropyMask(ent, mask, 0.2) // threshold = quantile 0.8
	require.NoError(t, err)
	assert.Equal(t, [][]bool{{false, false, false, false, false, false}, {false, false, true, true, false, false}}, got)
	got, err = EntropyMask(ent, mask, 1) // quantile 0: every valid token
	require.NoError(t, err)
	assert.Equal(t, mask, got)
	none := [][]bool{make([]bool, 6), make([]bool, 6)}
	got, err = EntropyMask(ent, none, 0.2)
	require.NoError(t, err)
	assert.Equal(t, none, got)
	_, err = EntropyMask(ent, mask[:1], 0.2)
	assert.Error(t, err)
}

func TestTokenLossMatchesPolicyLoss(t *testing.T) {
	for _, lt := range []LossType{LossDAPO, LossCISPO, LossSAPO} {
		p := baseParams(lt)
		p.Delta = map[bool]float64{true: 1.5, false: 0}[lt == LossDAPO]
		in := LossInput{LogP: [][]float32{{-1, -0.25}}, Old: [][]float32{{-1.5, -0.5}}, Mask: [][]bool{{true, true}}, Adv: []float64{-0.5}, Weight: ones(2)}
		out, err := PolicyLoss(p, in)
		require.NoError(t, err)
		sum := 0.0
		for t2 := range in.LogP[0] {
			v, g, lo, hi, r := TokenLoss(p, float64(in.LogP[0][t2]), float64(in.Old[0][t2]), -0.5)
			sum += v
			assert.InDelta(t, g, float64(out.DLogP[0][t2]), 1e-6, "%s", lt)
			assert.Equal(t, out.ClipLow[0][t2], lo)
			assert.Equal(t, out.ClipHigh[0][t2], hi)
			assert.Equal(t, out.Ratio[0][t2], r)
		}
		assert.InDelta(t, sum, out.Loss, 1e-12, "%s", lt)
	}
}

// BenchmarkPolicyLoss times the pure loss over a micro-batch of 64
// rollouts × 1,024 tokens (dapo, off-policy, β = 0.04) and reports
// tokens/s.
func BenchmarkPolicyLoss(b *testing.B) {
	const rows, T = 64, 1024
	logp, old, ref := make([][]float32, rows), make([][]float32, rows), make([][]float32, rows)
	mask := make([][]bool, rows)
	adv := make([]float64, rows)
	for i := range rows {
		logp[i], old[i], ref[i], mask[i] = make([]float32, T), make([]float32, T), make([]float32, T), make([]bool, T)
		for t := range T {
			logp[i][t] = -float32((i*T+t)%97) / 40
			old[i][t] = logp[i][t] + float32((t%7)-3)/50
			ref[i][t] = logp[i][t] - float32(t%5)/30
			mask[i][t] = t%11 != 0
		}
		adv[i] = float64(i%5) - 2
	}
	p := baseParams(LossDAPO)
	p.Beta = 0.04
	w, err := LossWeights(LossDAPO, LossNorm{GenerationTokens: rows * T, GradientAccumulationSteps: 1, StepsPerGeneration: 1}, mask)
	require.NoError(b, err)
	in := LossInput{LogP: logp, Old: old, Ref: ref, Mask: mask, Adv: adv, Weight: w}
	b.ResetTimer()
	for b.Loop() {
		if _, err := PolicyLoss(p, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*T)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}
