package ref_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// lossRun evaluates PolicyLoss on the given inputs with every output.
func lossRun(in kernels.HostLossInput, p kernels.LossParams, n int) kernels.HostLossOutput {
	f := func() []float32 { return make([]float32, n) }
	out := kernels.HostLossOutput{Loss: f(), DLogP: f(), DEntropy: f(), Ratio: f(), KL: f(), Phi: f(), Clip: make([]uint8, n)}
	ref.Backend{}.PolicyLoss(out.Buffers(), in.Buffers(), p, n)
	return out
}

// TestPolicyLossHand checks one token (or one short sequence) per case
// against values worked out by hand from TRL's formulas (1e-6: float32
// outputs of O(1) values).
func TestPolicyLossHand(t *testing.T) {
	l15 := float32(math.Log(1.5))
	clip := kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.2}
	delta := clip
	delta.Delta = 1.4
	tests := []struct {
		name               string
		p                  kernels.LossParams
		lp, old, adv       float32
		loss, dlogp, ratio float64
		flags              uint8
	}{
		// w = 1.5 > 1.2, A > 0: the clipped branch, no gradient.
		{"clip_high", clip, -1, -1 - l15, 1, -1.2, 0, 1.5, kernels.ClipHigh},
		// w = 1.5, A < 0: min(−1.5, −1.2) is the unclipped −1.5: ℓ = 1.5, dℓ/dlogp = −A·w.
		{"unclipped_negative", clip, -1, -1 - l15, -1, 1.5, 1.5, 1.5, 0},
		// w = 0.5 < 0.8, A < 0: clipped at 0.8, ClipLow.
		{"clip_low", clip, -1, -1 + float32(math.Log(2)), -1, 0.8, 0, 0.5, kernels.ClipLow},
		// Delta 1.4 caps the unclipped branch: ℓ = 1.4, no gradient.
		{"delta", delta, -1, -1 - l15, -1, 1.4, 0, 1.4, 0},
		// CISPO: ℓ = −min(1.5, 1.2)·A·logp, gradient −1.2·A.
		{"cispo", kernels.LossParams{Objective: kernels.ObjectiveCISPO, EpsHigh: 1.2}, -2, -2 - l15, 1, 2.4, -1.2, 1.5, kernels.ClipHigh},
		// SAPO at w = 1: ℓ = −(4/τ)·½·A, dℓ/dw = −4·¼·A.
		{"sapo", kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 2}, -1, -1, 1, -2, -1, 1, 0},
		{"sapo_negative", kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 2}, -1, -1, -1, 1, 1, 1, 0},
		// Policy gradient: ℓ = −A·logp.
		{"pg", kernels.LossParams{Objective: kernels.ObjectivePG}, -3, -3, 0.5, 1.5, -0.5, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := kernels.HostLossInput{LogP: []float32{tc.lp}, OldLogP: []float32{tc.old}, Adv: []float32{tc.adv}, Weight: []float32{1}}
			out := lossRun(in, tc.p, 1)
			assert.InDelta(t, tc.loss, out.Loss[0], 1e-6, "loss")
			assert.InDelta(t, tc.dlogp, out.DLogP[0], 1e-6, "dlogp")
			assert.InDelta(t, tc.ratio, out.Ratio[0], 1e-6, "ratio")
			assert.Equal(t, tc.flags, out.Clip[0], "clip flags")
			assert.Equal(t, float32(1), out.Phi[0])
		})
	}

	t.Run("kl_entropy_weight", func(t *testing.T) {
		// PG with A = 0, Beta 0.5, ref = logp + log 2: KL = 2 − log 2 − 1,
		// dKL/dlogp = 1 − 2; entropy bonus 0.1 on H = 2; weight 0.5.
		in := kernels.HostLossInput{LogP: []float32{-1}, RefLogP: []float32{-1 + float32(math.Log(2))}, Entropy: []float32{2},
			Adv: []float32{0}, Weight: []float32{0.5}}
		out := lossRun(in, kernels.LossParams{Objective: kernels.ObjectivePG, Beta: 0.5, EntropyCoef: 0.1}, 1)
		kl := 1 - math.Log(2)
		assert.InDelta(t, kl, out.KL[0], 1e-6)
		assert.InDelta(t, 0.5*(0.5*kl-0.1*2), out.Loss[0], 1e-6)
		assert.InDelta(t, 0.5*0.5*(1-2), out.DLogP[0], 1e-6)
		assert.InDelta(t, -0.1*0.5, out.DEntropy[0], 1e-7)
	})

	t.Run("is_ratio_bias_kl", func(t *testing.T) {
		// PG with A = 1 and ρ = 0.5: ℓ = −0.5·logp; w = 2 (δ = log 2) and
		// β = 1 with ref = logp: KL = 0 but d(w·KL)/dlogp = w·(1 − 1) + KL·w = 0;
		// with ref = logp + log 2: KL = 1 − log 2, the term is w·KL and its
		// derivative w·(1 − 2) + KL·w.
		l2 := float32(math.Log(2))
		in := kernels.HostLossInput{LogP: []float32{-1}, OldLogP: []float32{-1 - l2}, RefLogP: []float32{-1 + l2}, Adv: []float32{1},
			Weight: []float32{1}, ISRatio: []float32{0.5}}
		out := lossRun(in, kernels.LossParams{Objective: kernels.ObjectivePG, Beta: 1, UseBiasCorrectionKL: true}, 1)
		kl := 1 - math.Log(2)
		assert.InDelta(t, 0.5*1+2*kl, out.Loss[0], 1e-6)
		assert.InDelta(t, -0.5+2*(1-2)+kl*2, out.DLogP[0], 1e-6)
		assert.InDelta(t, 2*kl, out.KL[0], 1e-6, "the logged KL includes the correction, as TRL's")
	})

	t.Run("gspo", func(t *testing.T) {
		// One sequence, δ = (0.2, −0.4): w = e^−0.1 inside the clip range,
		// ℓ = −w·A per token; d/dlogp_u = Σ_t(−A·w)·(1/2).
		in := kernels.HostLossInput{LogP: []float32{-1, -2}, OldLogP: []float32{-1.2, -1.6}, SeqAdv: []float32{1},
			Weight: []float32{1, 1}, Seg: []int32{0, 2}}
		p := clip
		p.SequenceRatio = true
		out := lossRun(in, p, 2)
		w := math.Exp(-0.1)
		for i := range 2 {
			assert.InDelta(t, -w, out.Loss[i], 1e-6)
			assert.InDelta(t, -w, out.DLogP[i], 1e-6)
			assert.InDelta(t, w, out.Ratio[i], 1e-6)
		}
	})

	t.Run("vespo", func(t *testing.T) {
		// One sequence, Σδ = log 2 (w = 2), A = 1 ≥ 0: k = 2, λ = 3,
		// log φ = 3 + 2·log 2 − 6; ℓ = −φ·A·logp, φ held constant.
		in := kernels.HostLossInput{LogP: []float32{-1, -2}, OldLogP: []float32{-1 - float32(math.Log(2)), -2}, Adv: []float32{1, 1},
			Weight: []float32{1, 1}, Seg: []int32{0, 2}}
		out := lossRun(in, kernels.LossParams{Objective: kernels.ObjectiveVESPO, VESPOKPos: 2, VESPOLambdaPos: 3, VESPOKNeg: 3, VESPOLambdaNeg: 2}, 2)
		phi := math.Exp(3 + 2*math.Log(2) - 6)
		assert.InDelta(t, phi, out.Phi[0], 1e-6)
		assert.InDelta(t, phi, out.Phi[1], 1e-6)
		assert.InDelta(t, phi*1, out.Loss[0], 1e-6)
		assert.InDelta(t, phi*2, out.Loss[1], 1e-6)
		assert.InDelta(t, -phi, out.DLogP[0], 1e-6)
		assert.InDelta(t, 2, out.Ratio[0], 1e-6)
	})

	t.Run("cispo_sequence", func(t *testing.T) {
		// TRL's cispo at importance_sampling_level="sequence": one sequence,
		// δ = (0.5, 0.3), w = e^0.4 ≈ 1.4918 capped at EpsHigh 1.2 (held
		// constant): ℓ_t = −1.2·A·logp_t, dℓ/dlogp_t = −1.2·A (no gradient
		// through w); A = 1 > 0 and w > 1.2: the cispo clip flag.
		in := kernels.HostLossInput{LogP: []float32{-1, -2}, OldLogP: []float32{-1.5, -2.3}, SeqAdv: []float32{1},
			Weight: []float32{1, 1}, Seg: []int32{0, 2}}
		out := lossRun(in, kernels.LossParams{Objective: kernels.ObjectiveCISPO, EpsHigh: 1.2, SequenceRatio: true}, 2)
		assert.InDelta(t, -1.2*1*-1, out.Loss[0], 1e-6)
		assert.InDelta(t, -1.2*1*-2, out.Loss[1], 1e-6)
		for i := range 2 {
			assert.InDelta(t, -1.2, out.DLogP[i], 1e-6)
			assert.InDelta(t, math.Exp(0.4), out.Ratio[i], 1e-6)
			assert.Equal(t, kernels.ClipHigh, out.Clip[i])
		}
	})

	t.Run("sapo_sequence", func(t *testing.T) {
		// TRL's sapo at sequence level: δ = (0.2, −0.2), w = 1: the gate
		// σ(0) = ½ gives ℓ = −(4/τ)·½·A = −2A/τ on each token; dℓ/dw =
		// −4·¼·A = −A per token, summed over the sequence (−2A) and spread
		// by d log w/d logp_u = 1/2: dlogp_u = −A. With A = −0.5, τ = τ_neg
		// = 2: ℓ = 0.5, dlogp = 0.5.
		in := kernels.HostLossInput{LogP: []float32{-1, -2}, OldLogP: []float32{-1.2, -1.8}, SeqAdv: []float32{-0.5},
			Weight: []float32{1, 1}, Seg: []int32{0, 2}}
		out := lossRun(in, kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 2, SequenceRatio: true}, 2)
		for i := range 2 {
			assert.InDelta(t, 0.5, out.Loss[i], 1e-6)
			assert.InDelta(t, 0.5, out.DLogP[i], 1e-6)
			assert.InDelta(t, 1, out.Ratio[i], 1e-6)
		}
	})

	t.Run("off_policy_mask", func(t *testing.T) {
		// DeepSeek-V3.2's off-policy sequence mask with threshold 0.1 on PG
		// (ℓ = −A·logp) and β = 1 (ref = logp: KL 0, dKL 0). Sequence 0,
		// A = −1, sampling − logp = (0.3, 0.1): mean 0.2 > 0.1 → dropped,
		// loss 0 and no gradient; sequence 1, A = −1, mean (0.1+0)/2 = 0.05
		// ≤ 0.1 → kept: ℓ = logp, dlogp = 1; sequence 2, A = +1, mean 0.5
		// but A ≥ 0 → kept: ℓ = −logp, dlogp = −1.
		in := kernels.HostLossInput{LogP: []float32{-1, -2, -1, -2, -3}, SamplingLogP: []float32{-0.7, -1.9, -0.9, -2, -2.5},
			RefLogP: []float32{-1, -2, -1, -2, -3}, SeqAdv: []float32{-1, -1, 1}, Weight: []float32{1, 1, 1, 1, 1}, Seg: []int32{0, 2, 4, 5}}
		p := kernels.LossParams{Objective: kernels.ObjectivePG, Beta: 1, OffPolicyMask: true, OffPolicyMaskThreshold: 0.1}
		out := lossRun(in, p, 5)
		assert.InDeltaSlice(t, []float32{0, 0, -1, -2, 3}, out.Loss, 1e-6)
		assert.InDeltaSlice(t, []float32{0, 0, 1, 1, -1}, out.DLogP, 1e-6)
		// Without SamplingLogP the mask reads OldLogP: sampling − logp =
		// −δ; with old = logp + 0.3 on sequence 1 it is dropped too.
		in.SamplingLogP = nil
		in.OldLogP = []float32{-1, -2, -0.7, -1.7, -3}
		p.Objective = kernels.ObjectiveCISPO
		p.EpsHigh = 10
		out = lossRun(in, p, 5)
		// CISPO, w = e^{−0.3} on sequence 1 (dropped), 1 elsewhere:
		// sequence 0 (old = logp: mean 0, kept) ℓ = −w·A·logp = logp,
		// sequence 2 (A = 1) ℓ = 3.
		assert.InDeltaSlice(t, []float32{-1, -2, 0, 0, 3}, out.Loss, 1e-6)
		assert.InDeltaSlice(t, []float32{1, 1, 0, 0, -1}, out.DLogP, 1e-6)
	})

	t.Run("entropy_mask", func(t *testing.T) {
		// TRL's top_entropy_quantile mask E multiplies the policy term and
		// the entropy bonus, not the KL: PG, A = 1, β = 0.5 with ref = logp
		// + log 2 (KL = 1 − log 2, dKL/dlogp = −1), entropy bonus 0.1 on H
		// = 2. Token 0 kept (E = 1): loss = −logp + β·KL − 0.1·2; token 1
		// dropped (E = 0): loss = β·KL only, dlogp = β·(−1), dH = 0.
		l2 := float32(math.Log(2))
		in := kernels.HostLossInput{LogP: []float32{-1, -1}, RefLogP: []float32{-1 + l2, -1 + l2}, Entropy: []float32{2, 2},
			Adv: []float32{1, 1}, Weight: []float32{1, 1}, EntropyMask: []float32{1, 0}}
		out := lossRun(in, kernels.LossParams{Objective: kernels.ObjectivePG, Beta: 0.5, EntropyCoef: 0.1}, 2)
		kl := 1 - math.Log(2)
		assert.InDelta(t, 1+0.5*kl-0.2, out.Loss[0], 1e-6)
		assert.InDelta(t, 0.5*kl, out.Loss[1], 1e-6)
		assert.InDelta(t, -1-0.5, out.DLogP[0], 1e-6)
		assert.InDelta(t, -0.5, out.DLogP[1], 1e-6)
		assert.InDeltaSlice(t, []float32{-0.1, 0}, out.DEntropy, 1e-7)
	})

	t.Run("entropy_weight", func(t *testing.T) {
		// The entropy bonus with its own weights W^H = (0.25, 0.5) while the
		// policy and KL terms keep Weight = (1, 1): PG, A = 1, logp = −1,
		// β = 0.5 with ref = logp + log 2, coef 0.1, H = 2, E = (1, 0).
		// Token 0: 1 + 0.5·KL − 0.1·0.25·2; token 1: 0.5·KL (E = 0 drops
		// its policy term and bonus); dH = −0.1·W^H·E.
		l2 := float32(math.Log(2))
		in := kernels.HostLossInput{LogP: []float32{-1, -1}, RefLogP: []float32{-1 + l2, -1 + l2}, Entropy: []float32{2, 2},
			Adv: []float32{1, 1}, Weight: []float32{1, 1}, EntropyMask: []float32{1, 0}, EntropyWeight: []float32{0.25, 0.5}}
		out := lossRun(in, kernels.LossParams{Objective: kernels.ObjectivePG, Beta: 0.5, EntropyCoef: 0.1}, 2)
		kl := 1 - math.Log(2)
		assert.InDelta(t, 1+0.5*kl-0.05, out.Loss[0], 1e-6)
		assert.InDelta(t, 0.5*kl, out.Loss[1], 1e-6)
		assert.InDeltaSlice(t, []float32{-1 - 0.5, -0.5}, out.DLogP, 1e-6)
		assert.InDeltaSlice(t, []float32{-0.025, 0}, out.DEntropy, 1e-7)
	})
}

// TestPolicyLossFiniteDifferences checks DLogP against central differences
// of Σ Loss in LogP for the differentiable objectives (clipped with and
// without delta, GSPO, SAPO at both levels, PG with KL, the off-policy
// mask, whose 0/1 value is constant off its threshold), with ratios kept ≥ 0.05 from
// every clip boundary so the step never crosses a kink. h = 1e-3 on
// float32 log-probs of magnitude ≤ 6: the perturbation is exact to 2.4e-7
// relative, the summed loss is a float64 sum of float32 values, so 2e-3
// relative + 1e-5 absolute.
func TestPolicyLossFiniteDifferences(t *testing.T) {
	deltas := []float32{-0.5, -0.1, 0.05, 0.3} // w ≈ 0.61, 0.90, 1.05, 1.35
	clip := kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.28, Beta: 0.3}
	withDelta := clip
	withDelta.Delta = 1.2
	gspo := clip
	gspo.SequenceRatio = true
	biasKL := clip
	biasKL.UseBiasCorrectionKL = true
	gspoBias := gspo
	gspoBias.UseBiasCorrectionKL = true
	for _, tc := range []struct {
		name string
		p    kernels.LossParams
	}{
		{"clipped", clip}, {"delta", withDelta}, {"gspo", gspo}, {"bias_kl", biasKL}, {"gspo_bias_kl", gspoBias},
		{"sapo", kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 1.05, Beta: 0.1}},
		{"sapo_seq", kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 1.05, Beta: 0.1, SequenceRatio: true, UseBiasCorrectionKL: true}},
		{"pg", kernels.LossParams{Objective: kernels.ObjectivePG, Beta: 0.2}},
		{"offpolicy", kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.28, Beta: 0.3, OffPolicyMask: true, OffPolicyMaskThreshold: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seg := []int32{0, 3, 3, 7, 12}
			n := 12
			in := kernels.HostLossInput{Seg: seg, SeqAdv: []float32{0.7, -0.3, -1.1, 0.4}, ISRatio: make([]float32, 12)}
			for s := 0; s+1 < len(seg); s++ {
				for i := seg[s]; i < seg[s+1]; i++ {
					lp := -0.5 - 0.4*float32(i)
					// GSPO needs one δ per sequence to keep its mean off the kinks.
					d := deltas[(int(i)+s)%len(deltas)]
					if tc.p.SequenceRatio {
						d = deltas[s%len(deltas)]
					}
					in.LogP = append(in.LogP, lp)
					in.OldLogP = append(in.OldLogP, lp-d)
					in.RefLogP = append(in.RefLogP, lp+0.3*float32(i%3)-0.2)
					in.Weight = append(in.Weight, 0.1+0.05*float32(i%4))
					in.ISRatio[i] = 0.7 + 0.1*float32(i%5)
				}
			}
			out := lossRun(in, tc.p, n)
			total := func() float64 {
				o := lossRun(in, tc.p, n)
				var s float64
				for _, l := range o.Loss {
					s += float64(l)
				}
				return s
			}
			const h = 1e-3
			for i := range n {
				x := in.LogP[i]
				in.LogP[i] = x + h
				fp := total()
				in.LogP[i] = x - h
				fm := total()
				in.LogP[i] = x
				fd := (fp - fm) / (2 * h)
				require.InDelta(t, fd, out.DLogP[i], 1e-5+2e-3*math.Abs(fd), "token %d", i)
			}
		})
	}
}

// TestPolicyLossPanics: shapes and settings that do not fit are programmer
// errors naming the argument.
func TestPolicyLossPanics(t *testing.T) {
	var b ref.Backend
	ok := kernels.HostLossInput{LogP: []float32{-1}, Adv: []float32{1}, Weight: []float32{1}}
	out := kernels.HostLossOutput{Loss: []float32{0}, DLogP: []float32{0}}
	pg := kernels.LossParams{Objective: kernels.ObjectivePG}
	b.PolicyLoss(out.Buffers(), ok.Buffers(), pg, 1)
	for _, tc := range []struct {
		name, msg string
		f         func()
	}{
		{"short weight", "Weight", func() {
			b.PolicyLoss(out.Buffers(), kernels.HostLossInput{LogP: ok.LogP, Adv: ok.Adv, Weight: []float32{}}.Buffers(), pg, 1)
		}},
		{"no ref", "RefLogP", func() {
			b.PolicyLoss(out.Buffers(), ok.Buffers(), kernels.LossParams{Objective: kernels.ObjectivePG, Beta: 1}, 1)
		}},
		{"no seg", "Seg", func() {
			b.PolicyLoss(out.Buffers(), ok.Buffers(), kernels.LossParams{Objective: kernels.ObjectiveVESPO}, 1)
		}},
		{"both adv", "Adv", func() {
			b.PolicyLoss(out.Buffers(), kernels.HostLossInput{LogP: ok.LogP, Adv: ok.Adv, SeqAdv: []float32{1}, Weight: ok.Weight, Seg: []int32{0, 1}}.Buffers(), pg, 1)
		}},
		{"bad seg", "Seg", func() {
			b.PolicyLoss(out.Buffers(), kernels.HostLossInput{LogP: ok.LogP, Adv: ok.Adv, Weight: ok.Weight, Seg: []int32{0, 2}}.Buffers(), pg, 1)
		}},
		{"bad eps", "EpsLow", func() { b.PolicyLoss(out.Buffers(), ok.Buffers(), kernels.LossParams{EpsLow: -0.1}, 1) }},
		{"cispo seq without seg", "Seg", func() {
			b.PolicyLoss(out.Buffers(), ok.Buffers(), kernels.LossParams{Objective: kernels.ObjectiveCISPO, EpsHigh: 1, SequenceRatio: true}, 1)
		}},
		{"off-policy mask without seg", "Seg", func() {
			b.PolicyLoss(out.Buffers(), ok.Buffers(), kernels.LossParams{Objective: kernels.ObjectivePG, OffPolicyMask: true}, 1)
		}},
		{"short entropy mask", "EntropyMask", func() {
			two := []float32{1, 1}
			out2 := kernels.HostLossOutput{Loss: []float32{0, 0}, DLogP: []float32{0, 0}}
			b.PolicyLoss(out2.Buffers(), kernels.HostLossInput{LogP: two, Adv: two, Weight: two, EntropyMask: []float32{1}}.Buffers(), pg, 2)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "no panic")
				assert.Contains(t, r.(string), tc.msg)
				assert.Contains(t, r.(string), "PolicyLoss")
			}()
			tc.f()
		})
	}
}
