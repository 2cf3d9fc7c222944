//go:build cuda

package cuda

// GPU tests: the whole conformance suite (kernels/kerneltest: every op
// against kernels/ref on random inputs at awkward shapes, with the one
// tolerance table, integer outputs exact) on the Device, and the GEMM
// throughput benchmark. A binary built with -tags cuda needs a GPU to
// start at all (gorgonia.org/cu's init calls cuInit and exits without
// one), so these run only on a GPU machine: `make gpu-check`.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/cu"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
)

func openDevice(tb testing.TB) *Device {
	tb.Helper()
	d, err := NewDevice(0)
	require.NoError(tb, err, "opening GPU 0")
	tb.Cleanup(func() { require.NoError(tb, d.Close()) })
	return d
}

// newTestDevice is the Device of the runtime tests in device_test.go: GPU 0
// here (the host twin in make cudahost).
func newTestDevice(t *testing.T) *Device { return openDevice(t) }

func gpuConformance(t *testing.T, family func(*testing.T, kernels.Backend)) {
	family(t, openDevice(t))
}

func TestDeviceInfo(t *testing.T) {
	d := openDevice(t)
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	t.Logf("%s; memory %.1f of %.1f GiB free", d.Name(), float64(free)/(1<<30), float64(total)/(1<<30))
	drv := d.sh.drv.(*cudaDriver)
	require.NoError(t, drv.withContext(func() error {
		for name, k := range drv.byName {
			f := drv.funcs[k]
			regs, err := f.Attribute(cu.NumRegs)
			if err != nil {
				return fmt.Errorf("cuda: cuFuncGetAttribute %s NUM_REGS: %w", name, err)
			}
			local, err := f.Attribute(cu.LocalSizeBytes)
			if err != nil {
				return fmt.Errorf("cuda: cuFuncGetAttribute %s LOCAL_SIZE_BYTES: %w", name, err)
			}
			t.Logf("kernel %-28s regs %3d local %d B", name, regs, local)
			// Spills are checked on the ptxas report (make cuda-check); a
			// stack frame (local > 0) is logged here for the record.
		}
		return nil
	}))
}

func TestGPUMatMul(t *testing.T)   { gpuConformance(t, kerneltest.MatMul) }
func TestGPUMatMulNN(t *testing.T) { gpuConformance(t, kerneltest.MatMulNN) }
func TestGPUMatMulTN(t *testing.T) { gpuConformance(t, kerneltest.MatMulTN) }
func TestGPUMatMulBatchInvariance(t *testing.T) {
	gpuConformance(t, kerneltest.MatMulBatchInvariance)
}
func TestGPUMatMulBF16(t *testing.T)        { gpuConformance(t, kerneltest.MatMulBF16) }
func TestGPUMatMulMany(t *testing.T)        { gpuConformance(t, kerneltest.MatMulMany) }
func TestGPUEmbedding(t *testing.T)         { gpuConformance(t, kerneltest.Embedding) }
func TestGPUEmbeddingBackward(t *testing.T) { gpuConformance(t, kerneltest.EmbeddingBackward) }
func TestGPURMSNorm(t *testing.T)           { gpuConformance(t, kerneltest.RMSNorm) }
func TestGPURMSNormBackward(t *testing.T)   { gpuConformance(t, kerneltest.RMSNormBackward) }
func TestGPURoPE(t *testing.T)              { gpuConformance(t, kerneltest.RoPE) }
func TestGPURoPEBackward(t *testing.T)      { gpuConformance(t, kerneltest.RoPEBackward) }
func TestGPUAttention(t *testing.T)         { gpuConformance(t, kerneltest.Attention) }
func TestGPUAttentionBackward(t *testing.T) { gpuConformance(t, kerneltest.AttentionBackward) }
func TestGPUAttentionPaged(t *testing.T)    { gpuConformance(t, kerneltest.AttentionPaged) }
func TestGPUAttentionInvariance(t *testing.T) {
	gpuConformance(t, kerneltest.AttentionInvariance)
}
func TestGPUWriteKV(t *testing.T) { gpuConformance(t, kerneltest.WriteKV) }
func TestGPUFused(t *testing.T)   { gpuConformance(t, kerneltest.Fused) }
func TestGPUAttentionBackwardPaged(t *testing.T) {
	gpuConformance(t, kerneltest.AttentionBackwardPaged)
}
func TestGPUSwiGLU(t *testing.T)           { gpuConformance(t, kerneltest.SwiGLU) }
func TestGPUSwiGLUBackward(t *testing.T)   { gpuConformance(t, kerneltest.SwiGLUBackward) }
func TestGPUAdd(t *testing.T)              { gpuConformance(t, kerneltest.Add) }
func TestGPUScale(t *testing.T)            { gpuConformance(t, kerneltest.Scale) }
func TestGPULogSoftmaxGather(t *testing.T) { gpuConformance(t, kerneltest.LogSoftmaxGather) }
func TestGPULogSoftmaxGatherBackward(t *testing.T) {
	gpuConformance(t, kerneltest.LogSoftmaxGatherBackward)
}
func TestGPUSoftmax(t *testing.T)    { gpuConformance(t, kerneltest.Softmax) }
func TestGPUArgmax(t *testing.T)     { gpuConformance(t, kerneltest.Argmax) }
func TestGPUSampleRows(t *testing.T) { gpuConformance(t, kerneltest.SampleRows) }
func TestGPUStepGraphs(t *testing.T) { gpuConformance(t, kerneltest.StepGraphs) }
func TestGPUSampleFullLogProbExact(t *testing.T) {
	gpuConformance(t, kerneltest.SampleFullLogProbExact)
}
func TestGPUAdamW(t *testing.T)      { gpuConformance(t, kerneltest.AdamW) }
func TestGPUPolicyLoss(t *testing.T) { gpuConformance(t, kerneltest.PolicyLoss) }

func TestGPUMemory(t *testing.T)      { gpuConformance(t, kerneltest.Memory) }
func TestGPUCopy(t *testing.T)        { gpuConformance(t, kerneltest.Copy) }
func TestGPUGatherRows(t *testing.T)  { gpuConformance(t, kerneltest.GatherRows) }
func TestGPUScatterRows(t *testing.T) { gpuConformance(t, kerneltest.ScatterRows) }
func TestGPUTranspose(t *testing.T)   { gpuConformance(t, kerneltest.Transpose) }
func TestGPUSumSquares(t *testing.T)  { gpuConformance(t, kerneltest.SumSquares) }
func TestGPUAllFinite(t *testing.T)   { gpuConformance(t, kerneltest.AllFinite) }
func TestGPUResident(t *testing.T)    { gpuConformance(t, kerneltest.Resident) }
