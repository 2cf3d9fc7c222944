package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
)

// TestMatMulBF16Logits runs a random bf16 model (std 0.1, so logits are
// far from uniform) under kernels.MatMulExact and kernels.MatMulBF16 side by side:
// a 24-token prefill (M = 24, the packed matmul path, on VDPBF16PS where
// the CPU has AVX512_BF16), then 8 greedy decode steps (M = 1).
//
// The bound. MatMulBF16 rounds every linear layer's input to bf16, a
// relative error of at most 2⁻⁸ per element. Along the depth of the
// model a logit sees 9 such roundings (per layer the attention input,
// shared by q, k and v, o_proj's input, the MLP input, shared by gate
// and up, and down_proj's input; 2 layers; then lm_head's input), so to
// first order, if no layer amplifies a relative error of its input (a
// heuristic, not a bound: a weight matrix can, in directions where it is
// ill-conditioned), its relative error is about 9 · 2⁻⁸ ≈ 0.035 of the
// logits' scale at most, and the RMS over a position's logits less (the
// errors are independent and partly cancel). The test checks that relative RMS
// difference at every position against 9 · 2⁻⁸ (measured 0.004–0.009 on
// this shape; a wrong kernel, e.g. a misplaced pair or a dropped K block,
// moves it to O(1)), that it is not zero (the rounding happened), and that
// greedy decoding picks the same token as long as the exact logits' top-2
// margin exceeds twice the largest logit difference seen (beyond that the
// tokens may legitimately differ, and the contexts with them).
func TestMatMulBF16Logits(t *testing.T) {
	cfg := Config{VocabSize: 512, HiddenSize: 128, IntermediateSize: 384, NumLayers: 2, NumHeads: 4, NumKVHeads: 2,
		HeadDim: 32, RopeTheta: 1e6, RMSNormEps: 1e-6, TieWordEmbeddings: true, BOSTokenID: -1, EOSTokenIDs: []int32{511}}
	dir := t.TempDir()
	require.NoError(t, WriteRandom(dir, cfg, kernels.BF16, 11, RandomOptions{Std: 0.1, NormStd: 0.1}))
	var models [2]*Model
	for i, p := range []kernels.MatMulPrecision{kernels.MatMulExact, kernels.MatMulBF16} {
		be := cpu.New(2)
		t.Cleanup(be.Close)
		require.NoError(t, be.SetMatMulPrecision(p))
		m, err := Load(dir, be)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, m.Close()) })
		models[i] = m
	}
	const relBound = 9.0 / 256
	V := cfg.VocabSize
	prompt := randomTokens(rand.New(rand.NewPCG(3, 4)), 24, V-1)

	// relRMS is ‖a − b‖ / ‖b‖ over one position's logits, and max |a − b|.
	relRMS := func(a, b []float32) (rel, maxAbs float64) {
		var d2, b2 float64
		for i := range b {
			d := float64(a[i]) - float64(b[i])
			d2 += d * d
			b2 += float64(b[i]) * float64(b[i])
			maxAbs = math.Max(maxAbs, math.Abs(d))
		}
		return math.Sqrt(d2 / b2), maxAbs
	}

	var runners [2]*Runner
	var caches [2]KVCache
	var logits [2][]float32
	for i, m := range models {
		runners[i] = m.NewRunner()
		t.Cleanup(runners[i].Release)
		h := runners[i].Forward([]*KVCache{&caches[i]}, [][]int32{prompt})
		logits[i] = append([]float32(nil), runners[i].Logits(h, len(prompt))...)
	}
	var total float64
	for p := range prompt {
		rel, _ := relRMS(logits[1][p*V:(p+1)*V], logits[0][p*V:(p+1)*V])
		assert.LessOrEqualf(t, rel, relBound, "prefill position %d: relative RMS logit difference", p)
		total += rel
	}
	assert.Positive(t, total, "MatMulBF16 left the prefill logits bit-identical: x was not rounded")

	last := [2][]float32{logits[0][(len(prompt)-1)*V:], logits[1][(len(prompt)-1)*V:]}
	for step := range 8 {
		rel, maxAbs := relRMS(last[1], last[0])
		assert.LessOrEqualf(t, rel, relBound, "decode step %d: relative RMS logit difference", step)
		tok := [2]int32{argmax(last[0]), argmax(last[1])}
		if margin(last[0]) <= 2*maxAbs {
			t.Logf("step %d: exact top-2 margin %.3g within 2× the logit difference %.3g: stop comparing tokens", step, margin(last[0]), maxAbs)
			return
		}
		require.Equalf(t, tok[0], tok[1], "decode step %d: greedy tokens differ although the exact margin %.3g exceeds 2× the logit difference %.3g", step, margin(last[0]), maxAbs)
		for i := range runners {
			h := runners[i].Forward([]*KVCache{&caches[i]}, [][]int32{{tok[i]}})
			last[i] = append([]float32(nil), runners[i].Logits(h, 1)...)
		}
	}
}

// argmax is the index of v's largest element (the first of ties).
func argmax(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

// margin is v's largest element minus its second largest.
func margin(v []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, x := range v {
		switch f := float64(x); {
		case f > a:
			a, b = f, a
		case f > b:
			b = f
		}
	}
	return a - b
}
