package ref

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// Hand-computed answers for every forward op, on inputs small enough to do
// on paper. Tolerance: 1e-6 absolute, the float32 rounding of the answers.
const handTol = 1e-6

func bf16Mat(v []float32, rows, cols int) kernels.Mat {
	u := make([]uint16, len(v))
	for i, f := range v {
		u[i] = kernels.F32ToBF16(f)
	}
	return kernels.MatBF16(u, rows, cols)
}

func TestMatMulHand(t *testing.T) {
	var b Backend
	x := []float32{1, 2, 3, 4, 5, 6}         // [2,3]
	wv := []float32{1, 0, -1, 0.5, 0.5, 0.5} // [2,3], exact in bf16
	for _, w := range []kernels.Mat{kernels.MatF32(wv, 2, 3), bf16Mat(wv, 2, 3)} {
		tests := []struct {
			name string
			acc  bool
			init []float32
			want []float32
		}{
			{"set", false, []float32{9, 9, 9, 9}, []float32{-2, 3, -2, 7.5}},
			{"accumulate", true, []float32{1, 1, 1, 1}, []float32{-1, 4, -1, 8.5}},
		}
		for _, tc := range tests {
			t.Run(w.DType.String()+"_"+tc.name, func(t *testing.T) {
				out := append([]float32(nil), tc.init...)
				b.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, 2, tc.acc)
				assert.InDeltaSlice(t, tc.want, out, handTol)
			})
		}
		out := []float32{0, 0, 0}
		b.MatMulNN(kernels.HostF32(out), kernels.HostF32([]float32{1, 2}), w, 1, false) // 1·row0 + 2·row1
		assert.InDeltaSlice(t, []float32{2, 1, 0}, out, handTol)
	}
	dw := make([]float32, 6)
	b.MatMulTN(kernels.HostF32(dw), kernels.HostF32([]float32{1, 0, 0, 2}), kernels.HostF32(x), 2, 2, 3) // dyᵀ·x
	assert.InDeltaSlice(t, []float32{1, 2, 3, 8, 10, 12}, dw, handTol)
}

func TestEmbeddingHand(t *testing.T) {
	var b Backend
	out := make([]float32, 4)
	b.Embedding(kernels.HostF32(out), bf16Mat([]float32{1, 2, 3, 4, 5, 6}, 3, 2), kernels.HostI32([]int32{2, 0}))
	assert.Equal(t, []float32{5, 6, 1, 2}, out)
	assert.Panics(t, func() { b.Embedding(kernels.HostF32(out), bf16Mat([]float32{1, 2}, 1, 2), kernels.HostI32([]int32{1})) })
}

func TestRMSNormHand(t *testing.T) {
	var b Backend
	x := []float32{3, 4}
	out := make([]float32, 2)
	b.RMSNorm(kernels.HostF32(out), kernels.HostF32(x), kernels.HostF32([]float32{1, 2}), 1, 2, 0) // rms = √12.5
	assert.InDeltaSlice(t, []float32{0.84852814, 2.2627417}, out, handTol)
	b.RMSNorm(kernels.HostF32(x), kernels.HostF32(x), kernels.HostF32([]float32{1, 2}), 1, 2, 0) // in place
	assert.InDeltaSlice(t, out, x, 0)
}

func TestRoPEHand(t *testing.T) {
	var b Backend
	x := []float32{1, 0}
	b.RoPE(kernels.HostF32(x), kernels.HostI32([]int32{1}), 1, 2, 10000) // i = 0: angle = pos
	assert.InDeltaSlice(t, []float32{float32(math.Cos(1)), float32(math.Sin(1))}, x, handTol)
	// D = 4, theta = 100: angles 2 and 2/100^(1/2) = 0.2 for the pairs
	// (x0, x2) = (1, 0) and (x1, x3) = (0, 1).
	x = []float32{1, 0, 0, 1}
	b.RoPE(kernels.HostF32(x), kernels.HostI32([]int32{2}), 1, 4, 100)
	want := []float32{float32(math.Cos(2)), float32(-math.Sin(0.2)), float32(math.Sin(2)), float32(math.Cos(0.2))}
	assert.InDeltaSlice(t, want, x, handTol)
}

func TestAttentionHand(t *testing.T) {
	var b Backend
	// One head, D = 1: query 1 sees scores (0, ln 3), so p = (1/4, 3/4).
	k, v := []float32{0, float32(math.Log(3))}, []float32{4, 8}
	s := kernels.OneSeq([]float32{1, 1}, make([]float32, 2), make([]float32, 2), k, v, 2, 0)
	b.Attention(s, 1, 1, 1, 1)
	assert.InDeltaSlice(t, []float32{4, 7}, s.Out.F32(), handTol)
	assert.InDeltaSlice(t, []float32{0, float32(math.Log(4))}, s.LSE.F32(), handTol)
	// The same last query as decode: T = 1 at Start = 1.
	d := kernels.OneSeq([]float32{1}, make([]float32, 1), nil, k, v, 1, 1)
	b.Attention(d, 1, 1, 1, 1)
	assert.InDelta(t, 7, d.Out.F32()[0], handTol)
}

func TestElementwiseHand(t *testing.T) {
	var b Backend
	out := make([]float32, 2)
	b.SwiGLU(kernels.HostF32(out), kernels.HostF32([]float32{0, 1}), kernels.HostF32([]float32{5, 2})) // 2·σ(1)
	assert.InDeltaSlice(t, []float32{0, 1.4621172}, out, handTol)
	x := []float32{1, 2}
	b.Add(kernels.HostF32(x), kernels.HostF32([]float32{0.5, -1}))
	assert.Equal(t, []float32{1.5, 1}, x)
	b.Scale(kernels.HostF32(x), 2)
	assert.Equal(t, []float32{3, 2}, x)
}

func TestSoftmaxFamilyHand(t *testing.T) {
	var b Backend
	l3 := float32(math.Log(3))
	logp, ent := make([]float32, 2), make([]float32, 2)
	negInf := float32(math.Inf(-1))
	b.LogSoftmaxGather(kernels.HostF32(logp), kernels.HostF32(ent), kernels.HostF32([]float32{0, l3, negInf, 7}), kernels.HostI32([]int32{1, 1}), 2, 2)
	assert.InDeltaSlice(t, []float32{float32(math.Log(0.75)), 0}, logp, handTol)
	assert.InDeltaSlice(t, []float32{0.5623351, 0}, ent, handTol) // −(¼ln¼ + ¾ln¾); a −Inf logit adds nothing
	x := []float32{0, l3}
	b.Softmax(kernels.HostF32(x), 1, 2)
	assert.InDeltaSlice(t, []float32{0.25, 0.75}, x, handTol)
	id, err := b.Argmax(kernels.HostF32([]float32{1, 3, 3, 2}))
	require.NoError(t, err)
	assert.Equal(t, int32(1), id)
}

func TestSampleHand(t *testing.T) {
	var b Backend
	l3 := float32(math.Log(3))
	logits := []float32{0, l3} // p = (1/4, 3/4) at temperature 1
	tests := []struct {
		name string
		p    kernels.SamplingParams
		u    float64
		id   int32
		lp   float64 // under the filtered distribution
		full float64 // under the temperature-scaled full distribution
	}{
		{"greedy", kernels.SamplingParams{}, 0.1, 1, 0, math.Log(0.75)},
		{"first", kernels.SamplingParams{Temperature: 1}, 0.2, 0, math.Log(0.25), math.Log(0.25)},
		{"second", kernels.SamplingParams{Temperature: 1}, 0.3, 1, math.Log(0.75), math.Log(0.75)},
		{"topk1", kernels.SamplingParams{Temperature: 1, TopK: 1}, 0.1, 1, 0, math.Log(0.75)},
		{"topp_drops", kernels.SamplingParams{Temperature: 1, TopP: 0.5}, 0.1, 1, 0, math.Log(0.75)},
		{"topp_keeps", kernels.SamplingParams{Temperature: 1, TopP: 0.8}, 0.1, 0, math.Log(0.25), math.Log(0.25)},
		{"minp", kernels.SamplingParams{Temperature: 1, MinP: 0.5}, 0.1, 1, 0, math.Log(0.75)},
		{"temperature", kernels.SamplingParams{Temperature: 0.5}, 0.05, 0, math.Log(0.1), math.Log(0.1)}, // p ∝ (1, 9)
	}
	// All rows in one call, each with its own parameters and u.
	n := len(tests)
	rows := make([]float32, 0, 2*n)
	params := make([]kernels.SamplingParams, n)
	us := make([]float64, n)
	for i, tc := range tests {
		rows = append(rows, logits...)
		params[i], us[i] = tc.p, tc.u
	}
	ids, lp, full := make([]int32, n), make([]float32, n), make([]float32, n)
	b.SampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(rows), kernels.HostSampleArgs(params, us), n, 2)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.id, ids[i])
			assert.InDelta(t, tc.lp, lp[i], handTol)
			assert.InDelta(t, tc.full, full[i], handTol)
		})
	}
	one := func(p kernels.SamplingParams, u float64) func() {
		return func() {
			b.SampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), kernels.HostSampleArgs([]kernels.SamplingParams{p}, []float64{u}), 1, 2)
		}
	}
	assert.Panics(t, one(kernels.SamplingParams{Temperature: 1}, 1))
	assert.Panics(t, one(kernels.SamplingParams{Temperature: -1}, 0))
}
