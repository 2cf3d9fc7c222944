//go:build cudahost

package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
)

// conformance runs one kerneltest family against a Device on the host
// twin with two workers, so two blocks run at once on two OS threads (each
// with its own __shared__ storage), as blocks do on different SMs. It is
// the device path itself (memory, staging, launches, status words); the
// Device must end without a sticky error, having leaked no Buffer the
// family freed.
func conformance(t *testing.T, family func(*testing.T, kernels.Backend)) {
	d := NewHost(2)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	family(t, d)
	require.NoError(t, d.Sync())
}

func TestMatMul(t *testing.T)   { conformance(t, kerneltest.MatMul) }
func TestMatMulNN(t *testing.T) { conformance(t, kerneltest.MatMulNN) }
func TestMatMulTN(t *testing.T) { conformance(t, kerneltest.MatMulTN) }
func TestMatMulBatchInvariance(t *testing.T) {
	conformance(t, kerneltest.MatMulBatchInvariance)
}
func TestMatMulBF16(t *testing.T)        { conformance(t, kerneltest.MatMulBF16) }
func TestMatMulMany(t *testing.T)        { conformance(t, kerneltest.MatMulMany) }
func TestEmbedding(t *testing.T)         { conformance(t, kerneltest.Embedding) }
func TestEmbeddingBackward(t *testing.T) { conformance(t, kerneltest.EmbeddingBackward) }
func TestRMSNorm(t *testing.T)           { conformance(t, kerneltest.RMSNorm) }
func TestRMSNormBackward(t *testing.T)   { conformance(t, kerneltest.RMSNormBackward) }
func TestRoPE(t *testing.T)              { conformance(t, kerneltest.RoPE) }
func TestRoPEBackward(t *testing.T)      { conformance(t, kerneltest.RoPEBackward) }
func TestAttention(t *testing.T)         { conformance(t, kerneltest.Attention) }
func TestAttentionBackward(t *testing.T) { conformance(t, kerneltest.AttentionBackward) }
func TestAttentionPaged(t *testing.T)    { conformance(t, kerneltest.AttentionPaged) }
func TestAttentionBackwardPaged(t *testing.T) {
	conformance(t, kerneltest.AttentionBackwardPaged)
}
func TestAttentionInvariance(t *testing.T) {
	conformance(t, kerneltest.AttentionInvariance)
}
func TestWriteKV(t *testing.T)                  { conformance(t, kerneltest.WriteKV) }
func TestFused(t *testing.T)                    { conformance(t, kerneltest.Fused) }
func TestSwiGLU(t *testing.T)                   { conformance(t, kerneltest.SwiGLU) }
func TestSwiGLUBackward(t *testing.T)           { conformance(t, kerneltest.SwiGLUBackward) }
func TestAdd(t *testing.T)                      { conformance(t, kerneltest.Add) }
func TestScale(t *testing.T)                    { conformance(t, kerneltest.Scale) }
func TestLogSoftmaxGather(t *testing.T)         { conformance(t, kerneltest.LogSoftmaxGather) }
func TestLogSoftmaxGatherBackward(t *testing.T) { conformance(t, kerneltest.LogSoftmaxGatherBackward) }
func TestSoftmax(t *testing.T)                  { conformance(t, kerneltest.Softmax) }
func TestArgmax(t *testing.T)                   { conformance(t, kerneltest.Argmax) }
func TestSampleRows(t *testing.T)               { conformance(t, kerneltest.SampleRows) }
func TestStepGraphs(t *testing.T)               { conformance(t, kerneltest.StepGraphs) }
func TestSampleFullLogProbExact(t *testing.T)   { conformance(t, kerneltest.SampleFullLogProbExact) }
func TestAdamW(t *testing.T)                    { conformance(t, kerneltest.AdamW) }
func TestPolicyLoss(t *testing.T)               { conformance(t, kerneltest.PolicyLoss) }
func TestMemory(t *testing.T)                   { conformance(t, kerneltest.Memory) }
func TestCopy(t *testing.T)                     { conformance(t, kerneltest.Copy) }
func TestGatherRows(t *testing.T)               { conformance(t, kerneltest.GatherRows) }
func TestScatterRows(t *testing.T)              { conformance(t, kerneltest.ScatterRows) }
func TestTranspose(t *testing.T)                { conformance(t, kerneltest.Transpose) }
func TestSumSquares(t *testing.T)               { conformance(t, kerneltest.SumSquares) }
func TestAllFinite(t *testing.T)                { conformance(t, kerneltest.AllFinite) }
func TestResident(t *testing.T)                 { conformance(t, kerneltest.Resident) }
