package cpu

import (
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
)

// The whole interface, checked at compile time by the tests (not in the
// package, so forward and backward kernels can land separately).
var _ kernels.Backend = (*Backend)(nil)

// backends are the configurations the forward kernels are checked in: the
// default (AVX-512 where the CPU has it) on two threads, the portable
// pure-Go path forced on, the AVX2 path forced on (on AVX-512 machines),
// and one thread (no workers).
func backends(t *testing.T) map[string]*Backend {
	def, one, generic := New(2), New(1), New(2)
	generic.simd = features{}
	t.Cleanup(func() { def.Close(); one.Close(); generic.Close() })
	bs := map[string]*Backend{"default_" + def.SIMD(): def, "generic": generic, "1thread_" + one.SIMD(): one}
	if def.simd.avx512 && def.simd.avx2 { // also the AVX2 path a machine without AVX-512 takes
		avx2 := New(2)
		avx2.simd = features{avx2: true}
		t.Cleanup(avx2.Close)
		bs["avx2"] = avx2
	}
	return bs
}

func conformance(t *testing.T, family func(*testing.T, kernels.Backend)) {
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) { family(t, b) })
	}
}

func TestMatMul(t *testing.T)           { conformance(t, kerneltest.MatMul) }
func TestMatMulNN(t *testing.T)         { conformance(t, kerneltest.MatMulNN) }
func TestMatMulTN(t *testing.T)         { conformance(t, kerneltest.MatMulTN) }
func TestEmbedding(t *testing.T)        { conformance(t, kerneltest.Embedding) }
func TestRMSNorm(t *testing.T)          { conformance(t, kerneltest.RMSNorm) }
func TestRoPE(t *testing.T)             { conformance(t, kerneltest.RoPE) }
func TestAttention(t *testing.T)        { conformance(t, kerneltest.Attention) }
func TestAttentionPaged(t *testing.T)   { conformance(t, kerneltest.AttentionPaged) }
func TestSwiGLU(t *testing.T)           { conformance(t, kerneltest.SwiGLU) }
func TestAdd(t *testing.T)              { conformance(t, kerneltest.Add) }
func TestScale(t *testing.T)            { conformance(t, kerneltest.Scale) }
func TestLogSoftmaxGather(t *testing.T) { conformance(t, kerneltest.LogSoftmaxGather) }
func TestSoftmax(t *testing.T)          { conformance(t, kerneltest.Softmax) }
func TestArgmax(t *testing.T)           { conformance(t, kerneltest.Argmax) }
func TestSampleRows(t *testing.T)       { conformance(t, kerneltest.SampleRows) }
func TestPolicyLoss(t *testing.T)       { conformance(t, kerneltest.PolicyLoss) }
func TestMemory(t *testing.T)           { conformance(t, kerneltest.Memory) }
func TestCopy(t *testing.T)             { conformance(t, kerneltest.Copy) }
func TestGatherRows(t *testing.T)       { conformance(t, kerneltest.GatherRows) }
func TestScatterRows(t *testing.T)      { conformance(t, kerneltest.ScatterRows) }
func TestTranspose(t *testing.T)        { conformance(t, kerneltest.Transpose) }
func TestSumSquares(t *testing.T)       { conformance(t, kerneltest.SumSquares) }
func TestAllFinite(t *testing.T)        { conformance(t, kerneltest.AllFinite) }
