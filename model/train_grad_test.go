package model

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/ref"
)

// trMicroConfig is a small model with head_dim·heads ≠ hidden and GQA 2:1,
// so every shape path of the backward is exercised.
func trMicroConfig(tied bool) Config {
	return Config{VocabSize: 48, HiddenSize: 16, IntermediateSize: 40, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 6, RMSNormEps: 1e-6, RopeTheta: 1e4,
		TieWordEmbeddings: tied, BOSTokenID: -1}
}

// trRandomModel writes a random checkpoint of cfg and loads it on be.
func trRandomModel(t *testing.T, cfg Config, dtype kernels.DType, be kernels.Backend, seed uint64) *Model {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, WriteRandom(dir, cfg, dtype, seed, RandomOptions{Std: 0.3, NormStd: 0.1}))
	m, err := Load(dir, be)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// trRandomSeqs draws sequences of the given lengths with the scored part
// starting at about a third.
func trRandomSeqs(rng *rand.Rand, vocab int, lens ...int) []TrainSeq {
	var seqs []TrainSeq
	for _, n := range lens {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(rng.IntN(vocab))
		}
		seqs = append(seqs, TrainSeq{IDs: ids, Start: max(1, n/3)})
	}
	return seqs
}

// trRandomWeights draws d loss / d logp in [-1, 1) for every scored token.
func trRandomWeights(rng *rand.Rand, seqs []TrainSeq) [][]float32 {
	w := make([][]float32, len(seqs))
	for s, seq := range seqs {
		w[s] = make([]float32, seq.Scored())
		for i := range w[s] {
			w[s][i] = float32(2*rng.Float64() - 1)
		}
	}
	return w
}

// trRandomizeB makes the adapters' B non-zero so that gradients reach A.
func trRandomizeB(m *Model, rng *rand.Rand) {
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			if a := nl.Linear.LoRA; a != nil {
				for i := range a.B {
					a.B[i] = float32(0.2 * rng.NormFloat64())
				}
			}
		}
	}
}

// trGradLoss is the Loss whose d loss / d logp is w[seq][i]: plain policy
// gradient with advantage −w and weight 1 (−(−w) is exact), the fixed
// per-token gradients of the tests.
func trGradLoss(w [][]float32) Loss {
	l := Loss{LossParams: kernels.LossParams{Objective: kernels.ObjectivePG}, Adv: make([][]float32, len(w)), Weight: make([][]float32, len(w))}
	for s, ws := range w {
		l.Adv[s], l.Weight[s] = make([]float32, len(ws)), make([]float32, len(ws))
		for i, x := range ws {
			l.Adv[s][i], l.Weight[s][i] = -x, 1
		}
	}
	return l
}

func trObjective(lp, w [][]float32) float64 {
	var s float64
	for i := range lp {
		for j := range lp[i] {
			s += float64(w[i][j]) * float64(lp[i][j])
		}
	}
	return s
}

func trGrads(tr *Trainable) [][]float32 {
	var out [][]float32
	for _, p := range tr.Params() {
		out = append(out, append([]float32(nil), p.Grad.F32()...))
	}
	return out
}

// TestFullGradientsFiniteDifferences checks every weight tensor's gradient
// (Full mode) against central differences of Σ w·logp on a micro model with
// the float64-accumulating reference backend, at 4 random coordinates per
// tensor. Step 1e-2 balances float32 round-off of the objective (about
// 1e-6/h) against the O(h²) truncation; tolerance 3e-3 abs + 3e-2 rel.
func TestFullGradientsFiniteDifferences(t *testing.T) {
	for _, tc := range []struct {
		name string
		tied bool
		temp float32
	}{{"untied", false, 1}, {"tied-temperature", true, 0.7}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, 2))
			m := trRandomModel(t, trMicroConfig(tc.tied), kernels.F32, ref.Backend{}, 7)
			tr, err := NewTrainable(m, TrainOptions{Full: true, Temperature: tc.temp, LogitsChunk: 5})
			require.NoError(t, err)
			seqs := trRandomSeqs(rng, m.Config.VocabSize, 9, 6)
			w := trRandomWeights(rng, seqs)
			_, err = tr.Accumulate(ctx, seqs, trGradLoss(w))
			require.NoError(t, err)
			eval := func() float64 {
				lp, _, err := tr.LogProbs(ctx, seqs, true)
				require.NoError(t, err)
				return trObjective(lp, w)
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
			t.Logf("%d coordinates over %d tensors checked; worst |fd-g|/(0.01+|fd|) = %.1e", checked, len(tr.Params()), worst)
		})
	}
}

// TestBatchGradientIsSumOfSingles: gradients are sums over sequences, so a
// batch of sequences of different lengths gives the sum of their single
// gradients (up to float32 summation order: 1e-5 relative).
func TestBatchGradientIsSumOfSingles(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	m := trRandomModel(t, trMicroConfig(true), kernels.F32, ref.Backend{}, 8)
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 3, Alpha: 6}, 1))
	trRandomizeB(m, rng)
	tr, err := NewTrainable(m, TrainOptions{})
	require.NoError(t, err)
	seqs := trRandomSeqs(rng, m.Config.VocabSize, 11, 5, 8)
	w := trRandomWeights(rng, seqs)
	_, err = tr.Accumulate(ctx, seqs, trGradLoss(w))
	require.NoError(t, err)
	batch := trGrads(tr)
	tr.ZeroGrad()
	for s := range seqs {
		_, err = tr.Accumulate(ctx, seqs[s:s+1], trGradLoss(w[s:s+1]))
		require.NoError(t, err)
	}
	sum := trGrads(tr)
	for i, p := range tr.Params() {
		assert.Less(t, trRelErr(batch[i], trF64(sum[i])), 1e-5, p.Name)
	}

	// Micro-batching (groups of at most 16 tokens: {11,5}, {8}) is the
	// same sum, and LogProbs in groups equals LogProbs at once.
	grouped, err := NewTrainable(m, TrainOptions{MicroBatchTokens: 16})
	require.NoError(t, err)
	assert.Equal(t, [][2]int{{0, 2}, {2, 3}}, grouped.groups(seqs))
	res, err := grouped.Accumulate(ctx, seqs, trGradLoss(w))
	require.NoError(t, err)
	lp := res.LogP
	require.Len(t, lp, len(seqs))
	for i, p := range grouped.Params() {
		assert.Less(t, trRelErr(p.Grad.F32(), trF64(batch[i])), 1e-5, p.Name)
	}
	all, _, err := tr.LogProbs(ctx, seqs, true)
	require.NoError(t, err)
	parts, _, err := grouped.LogProbs(ctx, seqs, true)
	require.NoError(t, err)
	assert.Equal(t, all, parts)
}

func trF64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// TestBackwardVariantsAgree: checkpointed and stored activations, and
// Forward+Backward versus the fused Accumulate, run the same ops in the
// same order and so give bit-identical gradients and log-probs.
func TestBackwardVariantsAgree(t *testing.T) {
	fast := cpu.New(2)
	defer fast.Close()
	for _, c := range []struct {
		be   kernels.Backend
		full bool
	}{{ref.Backend{}, false}, {ref.Backend{}, true}, {fast, false}, {fast, true}} {
		full := c.full
		rng := rand.New(rand.NewPCG(5, 6))
		seqs := trRandomSeqs(rng, 48, 10, 7)
		w := trRandomWeights(rng, seqs)
		bytes := map[bool]int64{}
		run := func(checkpoint, fused bool) ([][]float32, [][]float32) {
			m := trRandomModel(t, trMicroConfig(false), kernels.F32, c.be, 9)
			if !full {
				require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 4, RSLoRA: true, Targets: []string{"q_proj", "v_proj", "down_proj"}}, 2))
				trRandomizeB(m, rand.New(rand.NewPCG(1, 1)))
			}
			tr, err := NewTrainable(m, TrainOptions{Full: full, KeepActivations: !checkpoint, LogitsChunk: 4})
			require.NoError(t, err)
			ctx := context.Background()
			old, _, err := tr.LogProbs(ctx, seqs, true) // GRPO's old-policy pass
			require.NoError(t, err)
			var lp [][]float32
			if fused {
				res, err := tr.Accumulate(ctx, seqs, trGradLoss(w))
				require.NoError(t, err)
				lp = res.LogP
			} else {
				lp, _, err = tr.Forward(ctx, seqs)
				require.NoError(t, err)
				require.NoError(t, tr.Backward(ctx, w))
			}
			assert.Equal(t, old, lp, "no-grad log-probs equal the training pass's bit for bit (ratio exactly 1)")
			bytes[checkpoint] = tr.ActivationBytes()
			return lp, trGrads(tr)
		}
		lp0, g0 := run(false, false)
		for _, v := range []struct{ checkpoint, fused bool }{{true, false}, {false, true}, {true, true}} {
			lp, g := run(v.checkpoint, v.fused)
			assert.Equal(t, lp0, lp, "%T full=%v %+v log-probs", c.be, full, v)
			assert.Equal(t, g0, g, "%T full=%v %+v gradients", c.be, full, v)
		}
		assert.Less(t, bytes[true], bytes[false], "checkpointing holds less")
	}
}

// TestMaskedTokensGetNoGradient: a masked token reads 0 and contributes
// exactly what a zero weight does.
func TestMaskedTokensGetNoGradient(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	m := trRandomModel(t, trMicroConfig(true), kernels.F32, ref.Backend{}, 10)
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 2}, 3))
	trRandomizeB(m, rng)
	tr, err := NewTrainable(m, TrainOptions{})
	require.NoError(t, err)
	seqs := trRandomSeqs(rng, m.Config.VocabSize, 12)
	w := trRandomWeights(rng, seqs)
	mask := make([]bool, seqs[0].Scored())
	for i := range mask {
		mask[i] = i%3 != 1
		if !mask[i] {
			w[0][i] = 0
		}
	}
	fullRes, err := tr.Accumulate(ctx, seqs, trGradLoss(w))
	require.NoError(t, err)
	full := fullRes.LogP
	want := trGrads(tr)
	tr.ZeroGrad()
	masked := []TrainSeq{{IDs: seqs[0].IDs, Start: seqs[0].Start, Mask: mask}}
	for i := range mask {
		if !mask[i] {
			w[0][i] = float32(math.NaN()) // a masked token's loss inputs are never read
		}
	}
	res, err := tr.Accumulate(ctx, masked, trGradLoss(w))
	require.NoError(t, err)
	lp, ent := res.LogP, res.Entropy
	for i := range mask {
		if mask[i] {
			assert.Equal(t, full[0][i], lp[0][i])
		} else {
			assert.Zero(t, lp[0][i])
			assert.Zero(t, ent[0][i])
		}
	}
	for i, g := range trGrads(tr) {
		assert.Less(t, trRelErr(g, trF64(want[i])), 1e-6, tr.Params()[i].Name)
	}
}

// TestTransposeMat checks lm_head's transposed copy at shapes that do not
// divide the CPU backend's tile, in every storage type, on both backends.
func TestTransposeMat(t *testing.T) {
	for _, sh := range [][2]int{{1, 1}, {3, 130}, {67, 65}, {128, 64}} {
		r, c := sh[0], sh[1]
		f := make([]float32, r*c)
		u := make([]uint16, r*c)
		for i := range f {
			f[i], u[i] = float32(i), uint16(i)
		}
		for _, w := range []kernels.Mat{kernels.MatF32(f, r, c), kernels.MatBF16(u, r, c), kernels.MatF16(u, r, c)} {
			be := kernels.Backend(ref.Backend{})
			if r > 1 {
				cb := cpu.New(2)
				defer cb.Close()
				be = cb
			}
			tw, err := transposeMat(be, w)
			require.NoError(t, err)
			require.Equal(t, [2]int{c, r}, [2]int{tw.Rows, tw.Cols})
			for i := range r {
				for j := range c {
					require.Equal(t, w.At(i, j), tw.At(j, i), "%v [%d,%d] at %d,%d", w.DType, r, c, i, j)
				}
			}
		}
	}
}
