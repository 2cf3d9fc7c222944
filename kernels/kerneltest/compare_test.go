package kerneltest

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The suite's comparison must be able to fail: these are the verdicts of
// compare on hand-made differences.
func TestCompare(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tol := Tol{ATol: 1e-3, RTol: 1e-2, NMSE: 1e-4}
	tests := []struct {
		name      string
		got, want []float32
		bad       int
		nmseOver  bool
	}{
		{"equal", []float32{1, 2, 3}, []float32{1, 2, 3}, 0, false},
		{"within atol+rtol", []float32{1.0105, 0.0009}, []float32{1, 0}, 0, true}, // NMSE catches what per-element allows
		{"outside", []float32{1.02, 0}, []float32{1, 0}, 1, true},
		{"NaN got", []float32{nan, 1}, []float32{1, 1}, 1, false},
		{"NaN both", []float32{nan}, []float32{nan}, 0, false},
		{"Inf must match", []float32{inf, -inf}, []float32{inf, inf}, 1, false},
		{"many", []float32{9, 9, 9, 9, 9, 9, 9}, []float32{1, 1, 1, 1, 1, 1, 1}, 7, true},
		// A reference of exactly 0 (a certain token's log-prob): rounding
		// far below float32's epsilon passes, an error at 1e-8 fails NMSE
		// (it was +Inf for any nonzero got), a wrong value fails both.
		{"zero reference, rounding", []float32{1e-17, -3.5e-30}, []float32{0, 0}, 0, false},
		{"zero reference, 1e-8 off", []float32{1e-8}, []float32{0}, 0, true},
		{"zero reference, wrong", []float32{-0.01}, []float32{0}, 1, true},
		{"zero among others", []float32{1e-17, 1}, []float32{0, 1}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compare(tc.got, tc.want, tol)
			assert.Equal(t, tc.bad, c.bad)
			assert.Equal(t, tc.nmseOver, c.nmse > tol.NMSE, "nmse %g", c.nmse)
			assert.Equal(t, min(tc.bad, 5), strings.Count(c.first, "\n"), "at most 5 mismatches reported")
		})
	}
}

// TestCompareZeroLogProb is the H200's TestGPUSampleRows failure
// (2026-12-04): a sampled token's log-prob of exactly 0 in the reference
// and 9.5e-17 from the GPU, compared one value at a time under
// SampleLogProb's tolerance. It passed the element check and failed on an
// NMSE of +Inf; the sampler was right.
func TestCompareZeroLogProb(t *testing.T) {
	tol := Tolerance("SampleLogProb")
	c := compare([]float32{9.52e-17}, []float32{0}, tol)
	assert.Zero(t, c.bad)
	assert.LessOrEqual(t, c.nmse, tol.NMSE)
	c = compare([]float32{-1e-7}, []float32{0}, tol) // a certain token given probability 1 − 1e-7
	assert.Zero(t, c.bad, "within ATol")
	assert.Greater(t, c.nmse, tol.NMSE, "but 1e-7 is not float32 rounding of 0")
}

// Every family's tolerance exists and says why.
func TestToleranceTable(t *testing.T) {
	for _, op := range []string{"MatMul", "MatMulNN", "MatMulTN", "MatMulLong", "Embedding", "RMSNorm", "RoPE",
		"Attention", "AttentionLSE", "SwiGLU", "Add", "Scale", "LogSoftmaxGather", "Entropy", "Softmax",
		"SampleLogProb", "SampleFullLogProb", "RMSNormBackward", "RoPEBackward", "AttentionBackward", "SwiGLUBackward",
		"EmbeddingBackward", "LogSoftmaxGatherBackward", "EntropyBackward", "PolicyLoss", "AdamW",
		"ModelLogits", "ModelLogProbs", "ModelLogProbsBF16KV", "ModelGrad", "ModelUpdate"} {
		tol := Tolerance(op)
		assert.NotEmpty(t, tol.Why, op)
		assert.GreaterOrEqual(t, tol.ATol, 0.0, op)
	}
	assert.Panics(t, func() { Tolerance("NoSuchOp") })
}
