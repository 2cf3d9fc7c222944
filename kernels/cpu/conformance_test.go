package cpu

import (
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
)

// The whole interface, checked at compile time by the tests (not in the
// package, so forward and backward kernels can land separately).
var _ kernels.Backend = (*Backend)(nil)

// conformance runs a kerneltest family on every SIMD path the CPU has
// (forced on, each on two threads and on one): subtests
// <path>/threads<n>, the paths the CPU lacks skipped with the reason.
func conformance(t *testing.T, family func(*testing.T, kernels.Backend)) {
	forEachBackend(t, func(t *testing.T, b *Backend) { family(t, b) })
}

func TestMatMul(t *testing.T)         { conformance(t, kerneltest.MatMul) }
func TestMatMulNN(t *testing.T)       { conformance(t, kerneltest.MatMulNN) }
func TestMatMulTN(t *testing.T)       { conformance(t, kerneltest.MatMulTN) }
func TestEmbedding(t *testing.T)      { conformance(t, kerneltest.Embedding) }
func TestRMSNorm(t *testing.T)        { conformance(t, kerneltest.RMSNorm) }
func TestRoPE(t *testing.T)           { conformance(t, kerneltest.RoPE) }
func TestAttention(t *testing.T)      { conformance(t, kerneltest.Attention) }
func TestAttentionPaged(t *testing.T) { conformance(t, kerneltest.AttentionPaged) }
func TestAttentionInvariance(t *testing.T) {
	conformance(t, kerneltest.AttentionInvariance)
}
func TestSampleFullLogProbExact(t *testing.T) {
	conformance(t, kerneltest.SampleFullLogProbExact)
}
func TestWriteKV(t *testing.T)          { conformance(t, kerneltest.WriteKV) }
func TestFused(t *testing.T)            { conformance(t, kerneltest.Fused) }
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
func TestResident(t *testing.T)         { conformance(t, kerneltest.Resident) }
