//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// GEMM benchmarks on the GPU (the gpu-check's gemm stage): the Device's
// MatMul and MatMulTN on device-resident operands, b.N launches queued
// without waiting between two syncs (the host time between the waits is
// the GPU's, plus one round trip: under 1 % at 20 launches of the smallest
// shape). Each reports the analytic FLOPs and bytes per launch against the
// H200's ceilings, so a figure reads as a fraction of what the hardware
// can do.

// H200 SXM ceilings (NVIDIA's datasheet).
const (
	h200BF16DensePeak = 989.0    // TFLOP/s, bf16 tensor cores, dense (1979 with 2:4 sparsity)
	h200FP32Peak      = 67.0     // TFLOP/s, FP32 CUDA cores
	h200HBM           = 4.8      // TB/s
	h200L2            = 50 << 20 // bytes
)

// gemmShape is one linear layer, out[M,N] = x[M,K]·wᵀ.
type gemmShape struct {
	name string
	n, k int
}

// qwen3Projections are the Qwen3-0.6B linear layers (k and v share a shape).
func qwen3Projections() []gemmShape {
	return []gemmShape{{"q", 2048, 1024}, {"kv", 1024, 1024}, {"o", 1024, 2048}, {"gateup", 3072, 1024}, {"down", 1024, 3072}}
}

// BenchmarkGEMM times MatMul with bf16 weights at both precisions: the
// decode GEMV (M 1 and 8: the skinny kernel, split-K) and the
// prefill/training GEMM (M 4096; gateup is issue 20's 4096 × 3072 × 1024)
// on every Qwen3-0.6B projection, and the LM head (N 151,936) at M 1.
// Reported per launch: TFLOP/s of the useful 2·M·N·K (the exact kernels
// run 3× the mma) and its fraction of the dense bf16 peak; GB/s of the
// analytic traffic (weights once, x, out) and the weights' share of the
// HBM bandwidth (the GEMV goal: ≥ 70 %). Small weights rotate through
// copies that together exceed the L2 four times, so a launch reads its
// weights from HBM as a decode step does.
func BenchmarkGEMM(b *testing.B) {
	d := openDevice(b)
	weights := map[[2]int][]uint16{} // random bf16 weights per shape, made once (the LM head's are 155 M values)
	weight := func(n, k int) []uint16 {
		w, ok := weights[[2]int{n, k}]
		if !ok {
			rng := rand.New(rand.NewPCG(uint64(n), uint64(k)))
			w = make([]uint16, n*k)
			for i := range w {
				w[i] = kernels.F32ToBF16(rng.Float32() - 0.5)
			}
			weights[[2]int{n, k}] = w
		}
		return w
	}
	for _, prec := range []kernels.MatMulPrecision{kernels.MatMulBF16, kernels.MatMulExact} {
		require.NoError(b, d.SetMatMulPrecision(prec))
		for _, m := range []int{1, 8, 4096} {
			for _, sh := range qwen3Projections() {
				b.Run(fmt.Sprintf("%s_M%d_%s_N%d_K%d", prec, m, sh.name, sh.n, sh.k), func(b *testing.B) {
					benchMatMul(b, d, m, sh.n, sh.k, weight(sh.n, sh.k))
				})
			}
		}
		b.Run(fmt.Sprintf("%s_M1_lmhead_N151936_K1024", prec), func(b *testing.B) {
			benchMatMul(b, d, 1, 151936, 1024, weight(151936, 1024))
		})
	}
}

// BenchmarkGEMMLoRAGrad times MatMulTN at the LoRA r16 gradients of a
// 64 × 512-token step on Qwen3-0.6B shapes: dA[16,1024] += gᵀ·x and
// dB[N,16] += dyᵀ·h, split over the tokens; TFLOP/s against the FP32
// CUDA-core peak.
func BenchmarkGEMMLoRAGrad(b *testing.B) {
	d := openDevice(b)
	const m = 64 * 512
	for _, sh := range []gemmShape{{"dA", 16, 1024}, {"dB_kv", 1024, 16}, {"dB_gateup", 3072, 16}} {
		b.Run(fmt.Sprintf("%s_M%d_N%d_K%d", sh.name, m, sh.n, sh.k), func(b *testing.B) { benchTN(b, d, m, sh.n, sh.k) })
	}
}

// randF32 is n values uniform in [−0.5, 0.5).
func randF32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = rng.Float32() - 0.5
	}
	return x
}

// imported is x on d, freed at the end of the benchmark.
func imported(b *testing.B, d *Device, x kernels.Buffer) kernels.Buffer {
	p, err := d.Import(x)
	require.NoError(b, err)
	b.Cleanup(func() { d.Free(p) })
	return p
}

// timed runs op once, then b.N times between two syncs, and returns the
// seconds per call.
func timed(b *testing.B, d *Device, op func(it int)) float64 {
	op(0)
	require.NoError(b, d.Sync())
	start := time.Now()
	for it := range b.N {
		op(it + 1)
	}
	require.NoError(b, d.Sync())
	return time.Since(start).Seconds() / float64(b.N)
}

// benchMatMul times MatMul of an [m,k] x by the bf16 weight w [n,k].
func benchMatMul(b *testing.B, d *Device, m, n, k int, w []uint16) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := imported(b, d, kernels.HostF32(randF32(rng, m*k)))
	copies := 1
	if m <= gemmSkinnyRows {
		copies = min(64, max(1, ceilDiv(4*h200L2, n*k*2)))
	}
	ws := make([]kernels.Mat, copies)
	for c := range ws {
		ws[c] = kernels.MatOf(imported(b, d, kernels.HostBF16(w)), n, k)
	}
	out, err := d.Alloc(kernels.F32, m*n)
	require.NoError(b, err)
	b.Cleanup(func() { d.Free(out) })
	sec := timed(b, d, func(it int) { d.MatMul(out, x, ws[it%copies], m, false) })
	flops := 2 * float64(m) * float64(n) * float64(k)
	wbytes := float64(n) * float64(k) * 2
	bytes := wbytes + float64(m)*float64(k)*4 + float64(m)*float64(n)*4
	p := gemmBF16Plan(m, n, k, gemmBF16Variant(m, true, gemmTerms(d.MatMulPrecision())))
	b.ReportMetric(flops/sec/1e12, "TFLOP/s")
	b.ReportMetric(100*flops/sec/1e12/h200BF16DensePeak, "%peak")
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(100*wbytes/sec/1e12/h200HBM, "%HBM_weights")
	b.ReportMetric(float64(p.splits), "splits")
	b.ReportMetric(sec*1e6, "us/launch")
}

// benchTN times MatMulTN: dw[n,k] += dy[m,n]ᵀ·x[m,k].
func benchTN(b *testing.B, d *Device, m, n, k int) {
	rng := rand.New(rand.NewPCG(3, 4))
	dy := imported(b, d, kernels.HostF32(randF32(rng, m*n)))
	x := imported(b, d, kernels.HostF32(randF32(rng, m*k)))
	dw := imported(b, d, kernels.HostF32(make([]float32, n*k)))
	sec := timed(b, d, func(int) { d.MatMulTN(dw, dy, x, m, n, k) })
	flops := 2 * float64(m) * float64(n) * float64(k)
	bytes := float64(m)*float64(n+k)*4 + 2*float64(n)*float64(k)*4
	b.ReportMetric(flops/sec/1e12, "TFLOP/s")
	b.ReportMetric(100*flops/sec/1e12/h200FP32Peak, "%fp32peak")
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(float64(gemmF32Plan(n, k, m, true).splits), "splits")
	b.ReportMetric(sec*1e6, "us/launch")
}
