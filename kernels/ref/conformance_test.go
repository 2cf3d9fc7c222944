package ref_test

import (
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
	"github.com/x/kernels/ref"
)

// The reference must pass its own suite (a sanity check of the suite: every
// comparison of ref with itself is exact).
func TestConformance(t *testing.T) {
	var b kernels.Backend = ref.Backend{}
	for name, f := range map[string]func(*testing.T, kernels.Backend){
		"MatMul": kerneltest.MatMul, "MatMulNN": kerneltest.MatMulNN, "MatMulTN": kerneltest.MatMulTN,
		"Embedding": kerneltest.Embedding, "RMSNorm": kerneltest.RMSNorm, "RoPE": kerneltest.RoPE,
		"Attention": kerneltest.Attention, "AttentionPaged": kerneltest.AttentionPaged,
		"AttentionBackwardPaged": kerneltest.AttentionBackwardPaged, "SwiGLU": kerneltest.SwiGLU, "Add": kerneltest.Add,
		"Scale": kerneltest.Scale, "LogSoftmaxGather": kerneltest.LogSoftmaxGather,
		"Softmax": kerneltest.Softmax, "Argmax": kerneltest.Argmax, "SampleRows": kerneltest.SampleRows,
		"SampleFullLogProbExact":   kerneltest.SampleFullLogProbExact,
		"LogSoftmaxGatherBackward": kerneltest.LogSoftmaxGatherBackward, "PolicyLoss": kerneltest.PolicyLoss,
		"Memory": kerneltest.Memory, "Copy": kerneltest.Copy, "GatherRows": kerneltest.GatherRows,
		"ScatterRows": kerneltest.ScatterRows, "Transpose": kerneltest.Transpose,
		"SumSquares": kerneltest.SumSquares, "AllFinite": kerneltest.AllFinite, "Resident": kerneltest.Resident,
		"AttentionInvariance": kerneltest.AttentionInvariance, "WriteKV": kerneltest.WriteKV, "Fused": kerneltest.Fused,
	} {
		t.Run(name, func(t *testing.T) { f(t, b) })
	}
}
