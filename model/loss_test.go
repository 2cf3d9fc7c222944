package model

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/ref"
)

// lossTotal evaluates loss on given log-probs and entropies with the
// reference PolicyLoss (EvalLoss): the plain-Go loss the model's gradient
// must be the derivative of.
func lossTotal(t *testing.T, seqs []TrainSeq, loss Loss, logp, ent [][]float32) float64 {
	t.Helper()
	res, err := EvalLoss(ref.Backend{}, seqs, loss, logp, ent)
	require.NoError(t, err)
	return res.Loss
}

// grpoLoss builds a Loss over seqs: old log-probs at base − δ (δ from
// deltas, per token, or one per sequence when perSeq), reference log-probs
// near base, per-token advantages of both signs, IS corrections in
// [0.8, 1.2], weights 1/N.
func grpoLoss(rng *rand.Rand, p kernels.LossParams, seqs []TrainSeq, base [][]float32, deltas []float32, perSeq bool) Loss {
	l := Loss{LossParams: p}
	n := 0
	for _, s := range seqs {
		n += s.scoredCount()
	}
	for s, seq := range seqs {
		k := seq.Scored()
		old, rf, adv, w, is := make([]float32, k), make([]float32, k), make([]float32, k), make([]float32, k), make([]float32, k)
		for i := range k {
			d := deltas[rng.IntN(len(deltas))]
			if perSeq {
				d = deltas[s%len(deltas)]
			}
			old[i] = base[s][i] - d
			rf[i] = base[s][i] + float32(0.4*rng.Float64()-0.2)
			adv[i] = float32(2*rng.Float64() - 1)
			w[i] = 1 / float32(n)
			is[i] = float32(0.8 + 0.4*rng.Float64())
		}
		l.ISRatio = append(l.ISRatio, is)
		l.OldLogP, l.RefLogP = append(l.OldLogP, old), append(l.RefLogP, rf)
		l.Adv, l.Weight = append(l.Adv, adv), append(l.Weight, w)
	}
	return l
}

// TestLossGradientsFiniteDifferences checks the whole chain (loss on the
// backend → d loss/d logp and d loss/d entropy → log-softmax and entropy
// backward → the model) against central differences of the plain-Go loss
// of the model's log-probs and entropies, in Full mode on a micro model
// with the float64-accumulating reference backend, at a temperature, with
// a masked token and IS corrections: SAPO at token level (smooth
// everywhere), the clipped objective with sequence-level ratios inside
// the clip range and the bias-corrected KL, and SAPO at sequence level
// under the entropy and off-policy masks, each with KL and entropy terms. Step and tolerance as
// TestFullGradientsFiniteDifferences (1e-2; 3e-3 abs + 3e-2 rel).
func TestLossGradientsFiniteDifferences(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      kernels.LossParams
		deltas []float32
		perSeq bool
		masks  bool // an EntropyMask and SamplingLogP (for the off-policy mask)
	}{
		{"sapo_kl_entropy", kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 1.05, Beta: 0.2, EntropyCoef: 0.3},
			[]float32{-0.4, -0.1, 0.2, 0.5}, false, false},
		{"gspo_biaskl_entropy", kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.28, SequenceRatio: true, Beta: 0.1, EntropyCoef: -0.2, UseBiasCorrectionKL: true},
			[]float32{0.02, -0.05}, true, false},
		{"sapo_sequence_masks", kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 1.05, SequenceRatio: true,
			Beta: 0.1, EntropyCoef: 0.2, OffPolicyMask: true, OffPolicyMaskThreshold: 0.05}, []float32{0.3, -0.2, 0.1}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(11, 12))
			m := trRandomModel(t, trMicroConfig(false), kernels.F32, ref.Backend{}, 7)
			tr, err := NewTrainable(m, TrainOptions{Full: true, Reference: true, Temperature: 0.8, LogitsChunk: 4})
			require.NoError(t, err)
			seqs := trRandomSeqs(rng, m.Config.VocabSize, 9, 7)
			seqs[1].Mask = []bool{true, false, true, true, true}
			base, _, err := tr.LogProbs(ctx, seqs, true)
			require.NoError(t, err)
			loss := grpoLoss(rng, tc.p, seqs, base, tc.deltas, tc.perSeq)
			if tc.masks {
				// Every other token in the entropy mask; sampling log-probs
				// 0.2 above the model's on sequence 0 (mean 0.2 > 0.05:
				// dropped where A < 0), equal on sequence 1 (kept).
				for s, row := range base {
					em, sp := make([]float32, len(row)), make([]float32, len(row))
					for i := range row {
						em[i] = float32((i + s) % 2)
						sp[i] = row[i] + 0.2*float32(1-s)
					}
					loss.EntropyMask, loss.SamplingLogP = append(loss.EntropyMask, em), append(loss.SamplingLogP, sp)
				}
			}
			res, err := tr.Accumulate(ctx, seqs, loss)
			require.NoError(t, err)
			assert.InDelta(t, lossTotal(t, seqs, loss, res.LogP, res.Entropy), res.Loss, 1e-6, "LossResult.Loss is the plain-Go total")
			eval := func() float64 {
				lp, ent, err := tr.LogProbs(ctx, seqs, true)
				require.NoError(t, err)
				return lossTotal(t, seqs, loss, lp, ent)
			}
			const h = 1e-2
			checked, worst := 0, 0.0
			for _, p := range tr.Params() {
				for range 4 {
					data := p.Data.F32() // a CPU backend: the weight the forward reads
					i := rng.IntN(len(data))
					old := data[i]
					data[i] = old + h
					fp := eval()
					data[i] = old - h
					fm := eval()
					data[i] = old
					fd := (fp - fm) / (2 * h)
					assert.InDelta(t, fd, float64(p.Grad.F32()[i]), 3e-3+3e-2*math.Abs(fd), "%s[%d]", p.Name, i)
					worst = max(worst, math.Abs(fd-float64(p.Grad.F32()[i]))/(1e-2+math.Abs(fd)))
					checked++
				}
			}
			t.Logf("%d coordinates checked; worst |fd-g|/(0.01+|fd|) = %.1e", checked, worst)
		})
	}
}

// TestEntropyTermChangesGradient: the entropy bonus reaches the weights
// (a loss that differs only in EntropyCoef gives a different gradient, by
// exactly the entropy part: linear in the coefficient).
func TestEntropyTermChangesGradient(t *testing.T) {
	ctx := context.Background()
	m := trRandomModel(t, trMicroConfig(true), kernels.F32, ref.Backend{}, 3)
	tr, err := NewTrainable(m, TrainOptions{Full: true})
	require.NoError(t, err)
	seqs := trRandomSeqs(rand.New(rand.NewPCG(1, 1)), m.Config.VocabSize, 8)
	grads := func(coef float32) [][]float32 {
		tr.ZeroGrad()
		l := SFTLoss(seqs)
		l.EntropyCoef = coef
		_, err := tr.Accumulate(ctx, seqs, l)
		require.NoError(t, err)
		return trGrads(tr)
	}
	g0, g1, g2 := grads(0), grads(1), grads(2)
	changed := false
	for i := range g0 {
		for j := range g0[i] {
			// g(c) = g0 + c·e: g2 − g1 = g1 − g0.
			assert.InDelta(t, g1[i][j]-g0[i][j], g2[i][j]-g1[i][j], 1e-5+1e-3*math.Abs(float64(g1[i][j]-g0[i][j])))
			changed = changed || math.Abs(float64(g1[i][j]-g0[i][j])) > 1e-6
		}
	}
	assert.True(t, changed, "the entropy term reaches the gradients")
}

// TestAccumulateLossStats: the per-token statistics come back in the
// [seq][i] layout (0 at masked tokens), and the token-level loss evaluated
// chunk by chunk equals the loss over the whole batch at once.
func TestAccumulateLossStats(t *testing.T) {
	ctx := context.Background()
	fast := cpu.New(2)
	defer fast.Close()
	m := trRandomModel(t, trMicroConfig(true), kernels.F32, fast, 4)
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 4}, 1))
	rng := rand.New(rand.NewPCG(2, 3))
	trRandomizeB(m, rng)
	seqs := trRandomSeqs(rng, m.Config.VocabSize, 12, 9, 6)
	seqs[0].Mask = make([]bool, seqs[0].Scored())
	for i := range seqs[0].Mask {
		seqs[0].Mask[i] = i != 2
	}
	p := kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.2, Beta: 0.05}
	var results []LossResult
	for _, chunk := range []int{3, 1000} {
		tr, err := NewTrainable(m, TrainOptions{LogitsChunk: chunk})
		require.NoError(t, err)
		base, _, err := tr.LogProbs(ctx, seqs, true)
		require.NoError(t, err)
		loss := grpoLoss(rand.New(rand.NewPCG(5, 5)), p, seqs, base, []float32{-0.6, 0.1, 0.6}, false)
		loss.RefLogP, err = tr.RefLogProbs(ctx, seqs)
		require.NoError(t, err)
		res, err := tr.Accumulate(ctx, seqs, loss)
		require.NoError(t, err)
		results = append(results, res)
		assert.Equal(t, 8-1+6+4, res.Tokens, "scored tokens (lengths 12, 9, 6 from a third on) less the masked one")
		assert.Zero(t, res.LogP[0][2], "masked token")
		assert.Zero(t, res.Ratio[0][2], "masked token")
		var low, high int
		for s := range seqs {
			for i := range res.Clip[s] {
				low += int(res.Clip[s][i] & kernels.ClipLow)
				high += int(res.Clip[s][i]&kernels.ClipHigh) >> 1
				if res.LogP[s][i] != 0 {
					assert.Greater(t, res.KL[s][i], float32(-1e-7), "k3 KL ≥ 0")
				}
			}
		}
		assert.Positive(t, low+high, "ratios of 0.55 and 1.8 clip")
	}
	assert.InDelta(t, results[0].Loss, results[1].Loss, 1e-6, "chunked evaluation")
	assert.Equal(t, results[0].Clip, results[1].Clip)
}

// TestLossErrors: a Loss that does not fit the batch, or a KL term without
// a reference policy in Full mode, is an error naming the problem.
func TestLossErrors(t *testing.T) {
	ctx := context.Background()
	m := trRandomModel(t, trMicroConfig(true), kernels.F32, ref.Backend{}, 5)
	tr, err := NewTrainable(m, TrainOptions{Full: true})
	require.NoError(t, err)
	seqs := trRandomSeqs(rand.New(rand.NewPCG(1, 1)), m.Config.VocabSize, 6, 4)
	ok := SFTLoss(seqs)
	bad := func(f func(l *Loss)) Loss {
		l := SFTLoss(seqs)
		f(&l)
		return l
	}
	for _, tc := range []struct {
		name, msg string
		loss      Loss
	}{
		{"no weight", "Weight", bad(func(l *Loss) { l.Weight = nil })},
		{"short weight", "Weight sequence 1", bad(func(l *Loss) { l.Weight[1] = l.Weight[1][:1] })},
		{"two advantages", "exactly one", bad(func(l *Loss) { l.Adv = l.Weight })},
		{"seq adv count", "SeqAdv", bad(func(l *Loss) { l.SeqAdv = l.SeqAdv[:1] })},
		{"old shape", "OldLogP", bad(func(l *Loss) { l.OldLogP = [][]float32{{1}} })},
		{"bad eps", "EpsLow", bad(func(l *Loss) { l.Objective, l.EpsLow = kernels.ObjectiveClipped, -1 })},
		{"entropy mask shape", "EntropyMask", bad(func(l *Loss) { l.EntropyMask = [][]float32{{1}} })},
		{"sampling shape", "SamplingLogP", bad(func(l *Loss) { l.SamplingLogP = [][]float32{{1}} })},
		{"kl without ref logp", "RefLogP", bad(func(l *Loss) { l.Beta = 0.1 })},
		{"kl in full without reference", "Reference", bad(func(l *Loss) { l.Beta = 0.1; l.RefLogP = l.Weight })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tr.Accumulate(ctx, seqs, tc.loss)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
	_, err = tr.Accumulate(ctx, seqs, ok)
	require.NoError(t, err)
	_, err = tr.RefLogProbs(ctx, seqs)
	assert.ErrorContains(t, err, "Reference")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = tr.Accumulate(cancelled, seqs, ok)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
}

// TestFullReferencePolicy: with Reference, Full mode keeps the initial
// weights frozen in bf16 (a bf16 checkpoint's own matrices, shared): the
// reference log-probs equal the training log-probs before any step (same
// weights, 1e-5 for the two forward paths' op order), stay bit for bit the
// same after a step, while the trained policy moves; a KL loss trains.
func TestFullReferencePolicy(t *testing.T) {
	ctx := context.Background()
	m := trRandomModel(t, trMicroConfig(false), kernels.BF16, ref.Backend{}, 6)
	embed := m.Embed
	tr, err := NewTrainable(m, TrainOptions{Full: true, Reference: true, Temperature: 0.9})
	require.NoError(t, err)
	assert.Equal(t, kernels.BF16, tr.ref.Embed.DType)
	assert.Same(t, &embed.U16()[0], &tr.ref.Embed.U16()[0], "bf16 weights are shared, not copied")
	seqs := trRandomSeqs(rand.New(rand.NewPCG(4, 4)), m.Config.VocabSize, 10, 7)
	before, err := tr.RefLogProbs(ctx, seqs)
	require.NoError(t, err)
	cur, _, err := tr.LogProbs(ctx, seqs, true)
	require.NoError(t, err)
	for s := range seqs {
		assertClose32(t, before[s], cur[s], 1e-5, 0, "reference = policy before training")
	}
	opt, err := NewAdamW(m.Backend, tr.Params(), DefaultAdamWConfig(1e-2))
	require.NoError(t, err)
	loss := SFTLoss(seqs)
	loss.Beta, loss.RefLogP = 0.1, before
	res, err := tr.Accumulate(ctx, seqs, loss)
	require.NoError(t, err)
	for s := range seqs {
		for i := range res.KL[s] {
			assert.InDelta(t, 0, res.KL[s][i], 1e-4, "KL ≈ 0 at the start")
		}
	}
	_, err = opt.Step()
	require.NoError(t, err)
	after, err := tr.RefLogProbs(ctx, seqs)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the reference is frozen")
	moved, _, err := tr.LogProbs(ctx, seqs, true)
	require.NoError(t, err)
	assert.NotEqual(t, cur, moved, "the policy trained")

	// An f32 model's reference is a bf16 rounding of its weights.
	m32 := trRandomModel(t, trMicroConfig(true), kernels.F32, ref.Backend{}, 6)
	tr32, err := NewTrainable(m32, TrainOptions{Full: true, Reference: true})
	require.NoError(t, err)
	assert.Equal(t, kernels.BF16, tr32.ref.Layers[0].Attn.Q.W.DType)
	assert.Equal(t, kernels.F32, m32.Layers[0].Attn.Q.W.DType, "the trained model keeps its f32 masters")
}
