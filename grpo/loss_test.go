package grpo

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
	"github.com/x/model"
)

func baseParams(t LossType) kernels.LossParams {
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

// specLoss evaluates the trainer's micro-batch loss in on chosen log-probs
// through the path the trainer takes (modelLoss, the backend's model.Loss,
// lossOutput) with the loss's one spec, kernels/ref, as the backend.
func specLoss(p kernels.LossParams, in LossInput) (LossOutput, error) {
	seqs := make([]model.TrainSeq, len(in.LogP))
	for i, lp := range in.LogP {
		seqs[i] = model.TrainSeq{IDs: make([]int32, 1+len(lp)), Start: 1, Mask: in.Mask[i]}
	}
	ent := in.Entropy
	if ent == nil {
		ent = make([][]float32, len(in.LogP))
		for i, lp := range in.LogP {
			ent[i] = make([]float32, len(lp))
		}
	}
	res, err := model.EvalLoss(ref.Backend{}, seqs, modelLoss(p, &in), in.LogP, ent)
	if err != nil {
		return LossOutput{}, err
	}
	return lossOutput(p, &in, res), nil
}

// Loss values and gradients checked against hand computation. Tolerance
// 1e-6: gradients come back as float32 (relative rounding 6e-8 on O(1)
// values) and the hand values are written to 6+ digits or as formulas.
func TestPolicyLossHandComputed(t *testing.T) {
	e := math.Exp
	tests := []struct {
		name  string
		p     func() kernels.LossParams
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
			p:    func() kernels.LossParams { return baseParams(LossGRPO) },
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
			p:    func() kernels.LossParams { return baseParams(LossDAPO) },
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
			p: func() kernels.LossParams {
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
			p: func() kernels.LossParams {
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
			p: func() kernels.LossParams {
				p := baseParams(LossGRPO)
				p.SequenceRatio = true
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
			p: func() kernels.LossParams {
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
			p:    func() kernels.LossParams { return baseParams(LossCISPO) },
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
			p:    func() kernels.LossParams { return baseParams(LossSAPO) },
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
			p:    func() kernels.LossParams { return baseParams(LossVESPO) },
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
			p:    func() kernels.LossParams { return baseParams(LossLUSPO) },
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
		{
			// luspo at importance_sampling_level="token" (TRL: the mean over
			// B×T of ℓ_t·n_i): B = 2, T = 4, n = (2, 3), GA = 1 → W = n_i/(B·T)
			// = 1/4, 3/8. On-policy ℓ_t = −A: L = 2·¼·(−1) + 3·⅜·½ = 1/16;
			// ∇_t = −A·W.
			name: "luspo token-level",
			p: func() kernels.LossParams {
				p := baseParams(LossLUSPO)
				p.SequenceRatio = false
				return p
			},
			in: LossInput{
				LogP: [][]float32{{-1, -1}, {-1, -1, -1}}, Mask: [][]bool{{true, true}, {true, true, true}},
				Adv: []float64{1, -0.5}, Weight: [][]float64{{0.25, 0.25}, {0.375, 0.375, 0.375}},
			},
			loss:  0.0625,
			dlogp: [][]float64{{-0.25, -0.25}, {0.1875, 0.1875, 0.1875}},
			low:   [][]bool{{false, false}, {false, false, false}},
			high:  [][]bool{{false, false}, {false, false, false}},
		},
		{
			// cispo at sequence level: δ = (0.5, 0.3), w = e^0.4 > cap 1.2:
			// ℓ_t = −1.2·A·logp_t (w held constant), ∇ = −1.2·A, flagged.
			name: "cispo sequence-level",
			p: func() kernels.LossParams {
				p := baseParams(LossCISPO)
				p.EpsHigh, p.SequenceRatio = 1.2, true
				return p
			},
			in: LossInput{
				LogP: [][]float32{{-1, -2}}, Old: [][]float32{{-1.5, -2.3}},
				Mask: [][]bool{{true, true}}, Adv: []float64{1}, Weight: ones(2),
			},
			loss:  1.2 + 2.4,
			dlogp: [][]float64{{-1.2, -1.2}},
			low:   [][]bool{{false, false}},
			high:  [][]bool{{true, true}},
		},
		{
			// sapo at sequence level: δ = (0.2, −0.2), w = 1, A = −0.5 → τ =
			// 1.05: ℓ = −(4/τ)·½·A = 1/1.05 per token, grpo weight ½ each:
			// L = 1/1.05. dℓ/dw = −4·¼·A = ½ per token; Σ_t W·dℓ/dw·w = ½,
			// spread by d log w/d logp_u = ½: ∇ = ¼ each.
			name: "sapo sequence-level",
			p: func() kernels.LossParams {
				p := baseParams(LossSAPO)
				p.SequenceRatio = true
				return p
			},
			in: LossInput{
				LogP: [][]float32{{-1, -2}}, Old: [][]float32{{-1.2, -1.8}},
				Mask: [][]bool{{true, true}}, Adv: []float64{-0.5}, Weight: [][]float64{{0.5, 0.5}},
			},
			loss:  1 / 1.05,
			dlogp: [][]float64{{0.25, 0.25}},
			low:   [][]bool{{false, false}},
			high:  [][]bool{{false, false}},
		},
		{
			// off_policy_mask_threshold 0.5 (on-policy dapo, ℓ = −A):
			// row 0, A = −1, mean sampling − logp = (0.5+1)/2 = 0.75 > 0.5:
			// dropped; row 1, A = −1, mean 0.25: kept (ℓ = 1, ∇ = 1); row
			// 2, A = 1, mean 1: kept, A ≥ 0 (ℓ = −1, ∇ = −1).
			name: "off-policy sequence mask",
			p: func() kernels.LossParams {
				c := DefaultConfig()
				th := 0.5
				c.OffPolicyMaskThreshold = &th
				return c.LossParams()
			},
			in: LossInput{
				LogP: [][]float32{{-1, -2}, {-1}, {-1}}, Sampling: [][]float32{{-0.5, -1}, {-0.75}, {0}},
				Mask: [][]bool{{true, true}, {true}, {true}}, Adv: []float64{-1, -1, 1}, Weight: ones(2, 1, 1),
			},
			loss:  0,
			dlogp: [][]float64{{0, 0}, {1}, {-1}},
			low:   [][]bool{{false, false}, {false}, {false}},
			high:  [][]bool{{false, false}, {false}, {false}},
		},
		{
			// top_entropy_quantile's mask drops token 1's policy term and
			// entropy bonus but not its KL: on-policy dapo, A = 1, β = 0.5,
			// ref = logp + ln 2 (KL = 1 − ln 2, dKL/dlogp = −1), coef 0.1
			// on H = 2. L = (−1 + β·KL − 0.2) + β·KL; ∇ = (−1 − β, −β).
			name: "entropy mask",
			p: func() kernels.LossParams {
				p := baseParams(LossDAPO)
				p.Beta, p.EntropyCoef = 0.5, 0.1
				return p
			},
			in: LossInput{
				LogP: [][]float32{{-1, -1}}, Ref: [][]float32{{-1 + float32(math.Ln2), -1 + float32(math.Ln2)}},
				Entropy: [][]float32{{2, 2}}, EntropyMask: [][]bool{{true, false}},
				Mask: [][]bool{{true, true}}, Adv: []float64{1}, Weight: ones(2),
			},
			loss:  -1 + 2*0.5*(1-math.Ln2) - 0.2,
			dlogp: [][]float64{{-1.5, -0.5}},
			low:   [][]bool{{false, false}},
			high:  [][]bool{{false, false}},
			kl:    [][]float64{{1 - math.Ln2, 1 - math.Ln2}},
		},
		{
			// vespo: a row with no loss token (mask_truncated_completions)
			// has φ = 1, TRL's rule; row 1 Σδ = 0.25, A = 1: φ = exp(3 +
			// 0.5 − 3e^.25), ℓ_t = −φ·logp_t.
			name: "vespo row without loss tokens",
			p:    func() kernels.LossParams { return baseParams(LossVESPO) },
			in: LossInput{
				LogP: [][]float32{{-1}, {-1, -2}}, Old: [][]float32{{-1.5}, {-1.125, -2.125}},
				Mask: [][]bool{{false}, {true, true}}, Adv: []float64{1, 1}, Weight: [][]float64{{0}, {1, 1}},
			},
			loss:  3 * e(3+0.5-3*e(0.25)),
			dlogp: [][]float64{{0}, {-e(3 + 0.5 - 3*e(0.25)), -e(3 + 0.5 - 3*e(0.25))}},
			low:   [][]bool{{false}, {false, false}},
			high:  [][]bool{{false}, {false, false}},
			phi:   []float64{1, e(3 + 0.5 - 3*e(0.25))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := specLoss(tt.p(), tt.in)
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
				assertFloats(t, tt.phi, out.Phi, 1e-6) // φ comes back as float32
			}
		})
	}
}

// The analytic gradient matches central differences of the loss value for
// every loss type whose loss has no stop-gradient factor, at both ratio
// levels, with δ, β, bias-corrected KL, the sampling ratio, the entropy
// mask and bonus, and the off-policy mask (constant off its threshold).
// Log-probs are moved by h = 2^-9 (exact in float32 at these magnitudes);
// ratios stay ≥ 0.012 in log from every clip boundary, so no step crosses
// a kink. The backend returns each token's loss in float32 (relative
// rounding 6e-8 on terms ≤ 0.5), so a difference of two losses over 2h
// carries up to about 6e-8·0.5·n/h ≈ 5e-5 (n ≤ 3 tokens of a sequence
// move at sequence level); the central difference's own error is O(h²) ≈
// 4e-6. Tolerance 1e-4.
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
		edit func(*kernels.LossParams, *LossInput)
	}
	variants := []variant{
		{"plain", func(*kernels.LossParams, *LossInput) {}},
		{"delta", func(p *kernels.LossParams, _ *LossInput) { p.Delta = 1.3 }},
		{"beta", func(p *kernels.LossParams, _ *LossInput) { p.Beta = 0.2 }},
		{"beta bias-corrected", func(p *kernels.LossParams, _ *LossInput) { p.Beta = 0.2; p.UseBiasCorrectionKL = true }},
		{"IS ratio", func(_ *kernels.LossParams, in *LossInput) { in.ISRatio = isr }},
		{"entropy mask", func(_ *kernels.LossParams, in *LossInput) { in.EntropyMask = emask }},
		{"eps high 0.3", func(p *kernels.LossParams, _ *LossInput) { p.EpsHigh = 0.3 }},
		// Row 1 (A < 0) has mean old − logp 0.375 > 0.2: dropped.
		{"off-policy mask", func(p *kernels.LossParams, in *LossInput) {
			p.OffPolicyMask, p.OffPolicyMaskThreshold = true, 0.2
			in.Sampling = in.Old
		}},
	}
	for _, lt := range []LossType{LossGRPO, LossBNPO, LossDrGRPO, LossDAPO, LossLUSPO, LossSAPO} {
		for _, level := range []ISLevel{ISToken, ISSequence} {
			for _, v := range variants {
				if v.name == "delta" && lt == LossSAPO {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%s", lt, level, v.name), func(t *testing.T) {
					p := baseParams(lt)
					p.SequenceRatio = level == ISSequence
					p.EntropyCoef = 0.05
					w, err := LossWeights(lt, LossNorm{GenerationTokens: 20, GradientAccumulationSteps: 2, StepsPerGeneration: 2, MaxCompletionLength: 8, Level: level, CompletionWidth: 6}, mask)
					require.NoError(t, err)
					in := LossInput{LogP: logp, Old: old, Ref: ref, Entropy: ent, Mask: mask, Adv: adv, Weight: w}
					v.edit(&p, &in)
					out, err := specLoss(p, in)
					require.NoError(t, err)
					const h = 1.0 / 512
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
								o, err := specLoss(p, in2)
								require.NoError(t, err)
								return o.Loss
							}
							fd := (lossAt(h, "logp") - lossAt(-h, "logp")) / (2 * h)
							assert.InDelta(t, fd, float64(out.DLogP[i][j]), 1e-4, "dlogp[%d][%d]", i, j)
							fdH := (lossAt(h, "ent") - lossAt(-h, "ent")) / (2 * h)
							assert.InDelta(t, fdH, float64(out.DEntropy[i][j]), 1e-4, "dentropy[%d][%d]", i, j)
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
		for _, level := range []ISLevel{ISToken, ISSequence} {
			p := baseParams(lt)
			p.SequenceRatio = level == ISSequence
			w, err := LossWeights(lt, LossNorm{GenerationTokens: 3, GradientAccumulationSteps: 1, StepsPerGeneration: 1, MaxCompletionLength: 4, Level: level, CompletionWidth: 2}, mask)
			require.NoError(t, err)
			in := LossInput{LogP: logp, Mask: mask, Adv: []float64{1, -1}, Weight: w}
			a, err := specLoss(p, in)
			require.NoError(t, err)
			in.Old = clone32(logp)
			b, err := specLoss(p, in)
			require.NoError(t, err)
			assert.Equal(t, a, b, "%s %s", lt, level)
			for i := range a.Ratio {
				for _, r := range a.Ratio[i] {
					assert.Equal(t, 1.0, r, "%s %s: on-policy ratio is exactly 1", lt, level)
				}
			}
		}
	}
}

func TestLossWeights(t *testing.T) {
	mask := [][]bool{{true, true, false}, {true, true, true, true}} // n = 2, 4; total 6
	norm := LossNorm{GenerationTokens: 24, GradientAccumulationSteps: 2, StepsPerGeneration: 4, MaxCompletionLength: 10, Level: ISSequence, CompletionWidth: 5}
	tokenNorm := norm
	tokenNorm.Level = ISToken
	tests := []struct {
		t    LossType
		norm LossNorm
		want [][]float64
	}{
		{LossGRPO, norm, [][]float64{{1.0 / 8, 1.0 / 8, 0}, {1.0 / 16, 1.0 / 16, 1.0 / 16, 1.0 / 16}}},   // 1/(n·B·GA)
		{LossSAPO, norm, [][]float64{{1.0 / 8, 1.0 / 8, 0}, {1.0 / 16, 1.0 / 16, 1.0 / 16, 1.0 / 16}}},   // as grpo
		{LossBNPO, norm, [][]float64{{1.0 / 12, 1.0 / 12, 0}, {1.0 / 12, 1.0 / 12, 1.0 / 12, 1.0 / 12}}}, // 1/(6·2)
		{LossDrGRPO, norm, [][]float64{{1.0 / 40, 1.0 / 40, 0}, {1.0 / 40, 1.0 / 40, 1.0 / 40, 1.0 / 40}}},
		{LossDAPO, norm, [][]float64{{1.0 / 12, 1.0 / 12, 0}, {1.0 / 12, 1.0 / 12, 1.0 / 12, 1.0 / 12}}}, // spg/(N·GA) = 4/48
		{LossCISPO, norm, [][]float64{{1.0 / 12, 1.0 / 12, 0}, {1.0 / 12, 1.0 / 12, 1.0 / 12, 1.0 / 12}}},
		{LossVESPO, norm, [][]float64{{1.0 / 12, 1.0 / 12, 0}, {1.0 / 12, 1.0 / 12, 1.0 / 12, 1.0 / 12}}},
		{LossLUSPO, norm, [][]float64{{1.0 / 4, 1.0 / 4, 0}, {1.0 / 4, 1.0 / 4, 1.0 / 4, 1.0 / 4}}}, // 1/(B·GA)
		// token level: n_i/(B·T·GA), T = 5: 2/20, 4/20.
		{LossLUSPO, tokenNorm, [][]float64{{1.0 / 10, 1.0 / 10, 0}, {1.0 / 5, 1.0 / 5, 1.0 / 5, 1.0 / 5}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.t, "/", tt.norm.Level), func(t *testing.T) {
			w, err := LossWeights(tt.t, tt.norm, mask)
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
	_, err = LossWeights(LossLUSPO, LossNorm{GradientAccumulationSteps: 1, Level: ISToken, CompletionWidth: 3}, mask)
	assert.ErrorContains(t, err, "completion width")
	_, err = LossWeights("ppo", norm, mask)
	assert.ErrorContains(t, err, "unknown loss type")
}

// The KL term under luspo at sequence level has the policy term's weight
// 1/(B·GA) per loss token, on purpose: TRL's mean over the padded B×T
// entries gives it n_i/(B·T) at every position, padding and tool tokens
// included, so TRL's value moves with the padding width. Two rows, n = (1,
// 2), β = 1, on-policy, A = 0 (no policy term): KL_t = e^x − x − 1 at x =
// ref − logp = ln 2 → 1 − ln 2 each. Here L = Σ_t ½·KL = 3·½·(1 − ln 2);
// TRL's at padded width T = 2 (rows' positions beyond n_i padded with KL
// 0) would be Σ_i n_i·Σ_t KL/(B·T) = (1·1 + 2·2)/4·(1 − ln 2).
func TestLUSPOKLWeightIsThePolicyTermsWeight(t *testing.T) {
	p := baseParams(LossLUSPO)
	p.Beta = 1
	mask := [][]bool{{true}, {true, true}}
	w, err := LossWeights(LossLUSPO, LossNorm{GradientAccumulationSteps: 1, Level: ISSequence, CompletionWidth: 2}, mask)
	require.NoError(t, err)
	l2 := float32(math.Ln2)
	out, err := specLoss(p, LossInput{LogP: [][]float32{{-1}, {-1, -2}}, Ref: [][]float32{{-1 + l2}, {-1 + l2, -2 + l2}},
		Mask: mask, Adv: []float64{0, 0}, Weight: w})
	require.NoError(t, err)
	kl := 1 - math.Ln2
	assert.InDelta(t, 3*0.5*kl, out.Loss, 1e-6)
	trl := (1*1 + 2*2) / 4.0 * kl
	assert.Greater(t, math.Abs(out.Loss-trl), 0.1*kl, "differs from TRL's padding-dependent weight on purpose")
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
	out, err := specLoss(p, LossInput{
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

// TRL's vllm_importance_sampling_correction in its four modes with both
// bounds (clip_min, clip_max), by hand: d = old − sampling on loss tokens.
func TestSamplingISRatio(t *testing.T) {
	old := [][]float32{{-1, -2, -0.5}, {-1, -1}}
	samp := [][]float32{{-1.5, -1, -0.25}, {-0.5, -1}} // row 0: d = 0.5, (masked), −0.25; row 1: d = −0.5, 0
	mask := [][]bool{{true, false, true}, {true, true}}
	e := math.Exp
	tests := []struct {
		mode     ISCorrection
		min, max float64
		want     [][]float64
		perSeq   bool
	}{
		// token_truncate: clamp(e^d, min, max); a masked token has d = 0.
		{ISCorrectionTokenTruncate, 0, 3, [][]float64{{e(0.5), 1, e(-0.25)}, {e(-0.5), 1}}, false},
		{ISCorrectionTokenTruncate, 0, 1.5, [][]float64{{1.5, 1, e(-0.25)}, {e(-0.5), 1}}, false},
		{ISCorrectionTokenTruncate, 0.7, 1.5, [][]float64{{1.5, 1, e(-0.25)}, {0.7, 1}}, false},  // e^−.5 ≈ 0.61 raised to 0.7
		{ISCorrectionTokenTruncate, 0.7, 0, [][]float64{{e(0.5), 1, e(-0.25)}, {0.7, 1}}, false}, // no upper bound
		// token_mask: 0 outside [min, max].
		{ISCorrectionTokenMask, 0, 1.5, [][]float64{{0, 1, e(-0.25)}, {e(-0.5), 1}}, false},
		{ISCorrectionTokenMask, 0.7, 1.5, [][]float64{{0, 1, e(-0.25)}, {0, 1}}, false},
		{ISCorrectionTokenMask, 0.8, 0, [][]float64{{e(0.5), 1, 0}, {0, 1}}, false}, // e^−.25 ≈ 0.78 < 0.8
		// sequence modes: ρ_i = e^{Σd} = e^0.25, e^−0.5.
		{ISCorrectionSequenceTruncate, 0, 3, [][]float64{{e(0.25), e(0.25), e(0.25)}, {e(-0.5), e(-0.5)}}, true},
		{ISCorrectionSequenceTruncate, 0.7, 1.2, [][]float64{{1.2, 1.2, 1.2}, {0.7, 0.7}}, true},
		{ISCorrectionSequenceMask, 0, 1.2, [][]float64{{0, 0, 0}, {e(-0.5), e(-0.5)}}, true},
		{ISCorrectionSequenceMask, 0.7, 3, [][]float64{{e(0.25), e(0.25), e(0.25)}, {0, 0}}, true},
		{ISCorrectionSequenceMask, 0.7, 1.2, [][]float64{{0, 0, 0}, {0, 0}}, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.mode, tt.min, tt.max), func(t *testing.T) {
			rho, perSeq, err := SamplingISRatio(tt.mode, tt.min, tt.max, old, samp, mask)
			require.NoError(t, err)
			assert.Equal(t, tt.perSeq, perSeq)
			for i := range tt.want {
				assertFloats(t, tt.want[i], rho[i], 1e-12)
			}
		})
	}
	rho, _, err := SamplingISRatio(ISCorrectionNone, 0, 3, old, samp, mask)
	require.NoError(t, err)
	assert.Nil(t, rho)
	_, _, err = SamplingISRatio("x", 0, 3, old, samp, mask)
	assert.Error(t, err)
}

// The correction multiplies the policy term only (a masked-out ρ = 0
// drops it; the KL stays): dapo on-policy, A = 1, β = 1, ρ = (0, 2).
func TestSamplingISRatioScalesThePolicyTerm(t *testing.T) {
	p := baseParams(LossDAPO)
	p.Beta = 1
	l2 := float32(math.Ln2)
	out, err := specLoss(p, LossInput{LogP: [][]float32{{-1, -1}}, Ref: [][]float32{{-1 + l2, -1 + l2}}, Mask: [][]bool{{true, true}},
		Adv: []float64{1}, Weight: ones(2), ISRatio: [][]float64{{0, 2}}})
	require.NoError(t, err)
	kl := 1 - math.Ln2
	assert.InDelta(t, 2*kl-2, out.Loss, 1e-6)
	assertFloats(t, []float64{-1, -2 - 1}, []float64{float64(out.DLogP[0][0]), float64(out.DLogP[0][1])}, 1e-6)
}

// vespo folds a sequence sampling ratio in once, a token ratio per token.
func TestVESPOFoldsSamplingRatio(t *testing.T) {
	p := baseParams(LossVESPO)
	in := LossInput{LogP: [][]float32{{-1, -1}}, Mask: [][]bool{{true, true}}, Adv: []float64{1}, Weight: ones(2),
		ISRatio: [][]float64{{math.Exp(0.25), math.Exp(0.25)}}, ISRatioPerSequence: true}
	out, err := specLoss(p, in)
	require.NoError(t, err)
	want := func(logW float64) float64 { return math.Exp(3 + 2*logW - 3*math.Exp(logW)) }
	assert.InDelta(t, want(0.25), out.Phi[0], 1e-6)
	in.ISRatioPerSequence = false
	out, err = specLoss(p, in)
	require.NoError(t, err)
	assert.InDelta(t, want(0.5), out.Phi[0], 1e-6)
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

// TestEntropyWeights: the entropy bonus's weights by loss type, by hand.
// Two rows with loss tokens (T, T, F) and (T), GA 2, spg 2, N = 12: the
// token-summed types keep W = spg/(N·GA) = 1/12; the others weigh the
// micro-batch's mean over the kept tokens, 1/(kept·GA): 1/6 with every
// token kept, 1/4 when the entropy mask keeps two.
func TestEntropyWeights(t *testing.T) {
	mask := [][]bool{{true, true, false}, {true}}
	norm := LossNorm{GenerationTokens: 12, GradientAccumulationSteps: 2, StepsPerGeneration: 2, MaxCompletionLength: 8, Level: ISSequence, CompletionWidth: 3}
	keep := [][]bool{{true, false, false}, {true}}
	for _, tt := range []struct {
		lt   LossType
		keep [][]bool
		want float64
	}{
		{LossDAPO, nil, 1.0 / 12}, {LossCISPO, keep, 1.0 / 12}, {LossVESPO, nil, 1.0 / 12},
		{LossGRPO, nil, 1.0 / 6}, {LossSAPO, nil, 1.0 / 6}, {LossBNPO, nil, 1.0 / 6}, {LossDrGRPO, nil, 1.0 / 6}, {LossLUSPO, nil, 1.0 / 6},
		{LossGRPO, keep, 1.0 / 4}, {LossBNPO, keep, 1.0 / 4}, {LossLUSPO, keep, 1.0 / 4},
	} {
		t.Run(fmt.Sprint(tt.lt, tt.keep != nil), func(t *testing.T) {
			w, err := LossWeights(tt.lt, norm, mask)
			require.NoError(t, err)
			ew, err := EntropyWeights(tt.lt, norm, mask, tt.keep, w)
			require.NoError(t, err)
			assert.Equal(t, [][]float64{{tt.want, tt.want, 0}, {tt.want}}, ew)
		})
	}
	_, err := EntropyWeights(LossGRPO, norm, mask, nil, [][]float64{{1}})
	assert.Error(t, err)
}
