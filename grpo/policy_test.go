package grpo

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/model"
)

// TestPolicyLossBackendAgrees checks that the loss the trainer evaluates
// on the backend (model.Loss through Trainable.Accumulate, fused with the
// forward on the CPU backend) and the loss's spec (the training forward,
// kernels/ref's PolicyLoss on its log-probs through the trainer's own
// mapping, a backward from its d/dlogp) give the same loss and the same
// gradients on a tiny model batch, for every objective at both ratio
// levels, the KL term, the sampling correction, the entropy mask and the
// off-policy mask.
//
// Tolerances: both paths run the same forward; they differ in how the
// gradient sums are ordered (chunked logits, float64 spec vs the backend's
// float64 per token both rounded to float32); 1e-4 relative on the loss
// and 1e-3 of the largest gradient entry are far above what was measured
// (≤ 3.3e-7 of the largest entry).
func TestPolicyLossBackendAgrees(t *testing.T) {
	m, tok := tinyModel(t, 5)
	pol, err := newPolicy(m, &model.LoRAConfig{R: 4, Alpha: 8}, 1, 1, DefaultConfig().AdamW(10), true, 0)
	require.NoError(t, err)
	// Non-zero B so that the adapters matter and the reference differs.
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range pol.params() {
		data := p.Data.F32() // a CPU backend: the memory the forward reads
		for i := range data {
			data[i] += float32(rng.NormFloat64() * 0.02)
		}
	}
	ctx := context.Background()
	var seqs []trainSeq
	for k, n := range []int{9, 14, 5, 11} {
		ids := tok.Encode("Guess a number between one and eight please")[:6]
		for range n {
			ids = append(ids, int32(rng.IntN(tok.VocabSize())))
		}
		mask := make([]bool, n)
		for i := range mask {
			mask[i] = (i+k)%4 != 0
		}
		seqs = append(seqs, trainSeq{ids: ids, start: 6, mask: mask})
	}
	cur, _, err := pol.scores(ctx, seqs)
	require.NoError(t, err)
	ref, err := pol.refLogProbs(ctx, seqs)
	require.NoError(t, err)
	old := make([][]float32, len(cur))
	isr := make([][]float64, len(cur))
	for i := range cur {
		old[i] = make([]float32, len(cur[i]))
		isr[i] = make([]float64, len(cur[i]))
		for j, v := range cur[i] {
			old[i][j] = v + float32(rng.NormFloat64()*0.3) // ratios on both sides of the clip range
			isr[i][j] = 0.5 + rng.Float64()
		}
	}
	emask := make([][]bool, len(cur))
	for i := range cur {
		emask[i] = make([]bool, len(cur[i]))
		for j := range emask[i] {
			emask[i][j] = (i+j)%3 != 0
		}
	}
	masks := make([][]bool, len(seqs))
	for i, s := range seqs {
		masks[i] = s.mask
	}
	adv := []float64{1.2, -0.7, 0.3, -1.5}

	tests := []struct {
		name  string
		cfg   func(*Config)
		isr   bool
		emask bool
	}{
		{name: "dapo", cfg: func(c *Config) {}},
		{name: "grpo beta", cfg: func(c *Config) { c.LossType, c.Beta = LossGRPO, 0.1 }},
		{name: "bnpo delta", cfg: func(c *Config) { c.LossType, c.Delta = LossBNPO, 1.5 }},
		{name: "dr_grpo is-correction", cfg: func(c *Config) { c.LossType = LossDrGRPO }, isr: true},
		{name: "gspo sequence", cfg: func(c *Config) { c.ImportanceSamplingLevel = ISSequence }},
		{name: "luspo", cfg: func(c *Config) { c.LossType, c.ImportanceSamplingLevel = LossLUSPO, ISSequence }},
		{name: "cispo", cfg: func(c *Config) { c.LossType, c.EpsilonHigh = LossCISPO, 1.1 }},
		{name: "sapo", cfg: func(c *Config) { c.LossType = LossSAPO }},
		{name: "vespo", cfg: func(c *Config) { c.LossType = LossVESPO }},
		{name: "bias-corrected kl", cfg: func(c *Config) { c.Beta, c.UseBiasCorrectionKL = 0.2, true }},
		{name: "luspo token", cfg: func(c *Config) { c.LossType = LossLUSPO }},
		{name: "cispo sequence", cfg: func(c *Config) { c.LossType, c.EpsilonHigh, c.ImportanceSamplingLevel = LossCISPO, 1.1, ISSequence }},
		{name: "sapo sequence is-correction", cfg: func(c *Config) { c.LossType, c.ImportanceSamplingLevel = LossSAPO, ISSequence }, isr: true},
		{name: "vespo sequence", cfg: func(c *Config) { c.LossType, c.ImportanceSamplingLevel, c.Beta = LossVESPO, ISSequence, 0.1 }},
		{name: "entropy mask", cfg: func(c *Config) { c.TopEntropyQuantile = 0.5 }, emask: true},
		{name: "off-policy mask", cfg: func(c *Config) { th := 0.1; c.OffPolicyMaskThreshold = &th }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.cfg(&cfg)
			params := cfg.LossParams()
			w, err := LossWeights(cfg.LossType, cfg.LossNorm(40, 14), masks)
			require.NoError(t, err)
			in := func() *LossInput {
				li := &LossInput{Old: old, Mask: masks, Adv: adv, Weight: w}
				if cfg.Beta > 0 {
					li.Ref = ref
				}
				if tt.isr {
					li.ISRatio = isr
				}
				if tt.emask {
					li.EntropyMask = emask
				}
				if params.OffPolicyMask {
					li.Sampling = old
				}
				return li
			}
			// spec: the training forward, the spec's loss on its log-probs,
			// a backward from its d/dlogp.
			spec := func(ctx context.Context, seqs []trainSeq, p kernels.LossParams, in *LossInput) (LossOutput, error) {
				logp, ent, err := pol.tr.Forward(ctx, toModel(seqs))
				if err != nil {
					return LossOutput{}, err
				}
				in.LogP, in.Entropy = cloneRows(logp), cloneRows(ent)
				out, err := specLoss(p, *in)
				if err != nil {
					return LossOutput{}, err
				}
				return out, pol.tr.Backward(ctx, out.DLogP)
			}
			run := func(f func(context.Context, []trainSeq, kernels.LossParams, *LossInput) (LossOutput, error)) (float64, [][]float32) {
				pol.zeroGrad()
				out, err := f(ctx, seqs, params, in())
				require.NoError(t, err)
				g := make([][]float32, len(pol.params()))
				for i, p := range pol.params() {
					g[i] = append([]float32(nil), p.Grad.F32()...)
				}
				pol.zeroGrad()
				return out.Loss, g
			}
			lossA, gA := run(pol.accumulate)
			lossB, gB := run(spec)
			assert.InDelta(t, lossB, lossA, 1e-4*math.Max(1, math.Abs(lossB)), "loss")
			var maxG, maxD float64
			for i := range gA {
				for j := range gA[i] {
					maxG = math.Max(maxG, math.Abs(float64(gB[i][j])))
					maxD = math.Max(maxD, math.Abs(float64(gA[i][j]-gB[i][j])))
				}
			}
			require.Greater(t, maxG, 0.0, "the batch has a gradient")
			t.Logf("loss %g vs %g; gradient max |Δ| / max |g| = %.2g", lossA, lossB, maxD/maxG)
			assert.LessOrEqual(t, maxD, 1e-3*maxG, "gradients: max |Δ| %g of max |g| %g", maxD, maxG)
		})
	}
}
