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
	"math/rand/v2"
	"testing"
	"time"

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

func TestGPUMatMul(t *testing.T)            { gpuConformance(t, kerneltest.MatMul) }
func TestGPUMatMulNN(t *testing.T)          { gpuConformance(t, kerneltest.MatMulNN) }
func TestGPUMatMulTN(t *testing.T)          { gpuConformance(t, kerneltest.MatMulTN) }
func TestGPUEmbedding(t *testing.T)         { gpuConformance(t, kerneltest.Embedding) }
func TestGPUEmbeddingBackward(t *testing.T) { gpuConformance(t, kerneltest.EmbeddingBackward) }
func TestGPURMSNorm(t *testing.T)           { gpuConformance(t, kerneltest.RMSNorm) }
func TestGPURMSNormBackward(t *testing.T)   { gpuConformance(t, kerneltest.RMSNormBackward) }
func TestGPURoPE(t *testing.T)              { gpuConformance(t, kerneltest.RoPE) }
func TestGPURoPEBackward(t *testing.T)      { gpuConformance(t, kerneltest.RoPEBackward) }
func TestGPUAttention(t *testing.T)         { gpuConformance(t, kerneltest.Attention) }
func TestGPUAttentionBackward(t *testing.T) { gpuConformance(t, kerneltest.AttentionBackward) }
func TestGPUAttentionPaged(t *testing.T)    { gpuConformance(t, kerneltest.AttentionPaged) }
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
func TestGPUAdamW(t *testing.T)      { gpuConformance(t, kerneltest.AdamW) }
func TestGPUPolicyLoss(t *testing.T) { gpuConformance(t, kerneltest.PolicyLoss) }

// h200BF16DensePeak is the H200 SXM's dense bf16 tensor-core peak in
// TFLOP/s (NVIDIA's datasheet: 1979 with 2:4 sparsity, half that dense).
const h200BF16DensePeak = 989.0

// BenchmarkGEMM times gemm_bf16_wt alone on device-resident operands
// (events around the launches, no copies): out[M,N] = x[M,K]·wᵀ at the
// Qwen3-0.6B projection shapes and M from decode (1, 64, 256) to prefill
// (4096). Reported: TFLOP/s (2·M·N·K per launch, the useful flops: the
// kernel's 3-term split of x runs 3× as many mma instructions), the
// fraction of the bf16 dense peak, and GB/s of weight traffic (what bounds
// decode).
func BenchmarkGEMM(b *testing.B) {
	d := openDevice(b)
	for _, sh := range []struct{ n, k int }{{1024, 1024}, {3072, 1024}, {1024, 3072}, {151936, 1024}} {
		for _, m := range []int{1, 64, 256, 4096} {
			b.Run(fmt.Sprintf("M%d_N%d_K%d", m, sh.n, sh.k), func(b *testing.B) {
				benchGEMM(b, d, m, sh.n, sh.k)
			})
		}
	}
}

func benchGEMM(b *testing.B, d *Device, m, n, k int) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, m*k)
	for i := range x {
		x[i] = rng.Float32() - 0.5
	}
	w := make([]uint16, n*k)
	for i := range w {
		w[i] = kernels.F32ToBF16(rng.Float32() - 0.5)
	}
	dx, err := d.Import(kernels.HostF32(x))
	require.NoError(b, err)
	dw, err := d.Import(kernels.HostBF16(w))
	require.NoError(b, err)
	out, err := d.Alloc(kernels.F32, m*n)
	require.NoError(b, err)
	defer func() { d.Free(dx); d.Free(dw); d.Free(out) }()
	wm := kernels.MatOf(dw, n, k)
	d.MatMul(out, dx, wm, m, false) // warm-up
	require.NoError(b, d.Sync())
	// The launches are queued without waiting, so the host time between
	// the two waits is the GPU's (plus one round trip, under 1 % at 20
	// launches of the smallest shape).
	start := time.Now()
	for range b.N {
		d.MatMul(out, dx, wm, m, false)
	}
	require.NoError(b, d.Sync())
	sec := time.Since(start).Seconds() / float64(b.N)
	tflops := 2 * float64(m) * float64(n) * float64(k) / sec / 1e12
	b.ReportMetric(tflops, "TFLOP/s")
	b.ReportMetric(100*tflops/h200BF16DensePeak, "%peak")
	b.ReportMetric(float64(n*k)*2/sec/1e9, "weightGB/s")
	b.ReportMetric(sec*1e6, "us/launch")
}

func TestGPUMemory(t *testing.T)      { gpuConformance(t, kerneltest.Memory) }
func TestGPUCopy(t *testing.T)        { gpuConformance(t, kerneltest.Copy) }
func TestGPUGatherRows(t *testing.T)  { gpuConformance(t, kerneltest.GatherRows) }
func TestGPUScatterRows(t *testing.T) { gpuConformance(t, kerneltest.ScatterRows) }
func TestGPUTranspose(t *testing.T)   { gpuConformance(t, kerneltest.Transpose) }
func TestGPUSumSquares(t *testing.T)  { gpuConformance(t, kerneltest.SumSquares) }
func TestGPUAllFinite(t *testing.T)   { gpuConformance(t, kerneltest.AllFinite) }
func TestGPUResident(t *testing.T)    { gpuConformance(t, kerneltest.Resident) }
