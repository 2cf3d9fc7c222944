//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/cu"

	"github.com/x/kernels"
)

// GEMM benchmarks on the GPU (the gpu-check's gemm stage): matmul.cu's
// kernels alone, on device-resident operands, timed by events around
// b.N launches through the same launch code as the Backend (session.gemmBF16,
// session.gemmTN: plan, kernel, split-K reduction). Each reports the
// analytic FLOPs and bytes per launch against the H200's ceilings, so a
// figure reads as a fraction of what the hardware can do.

// H200 SXM ceilings (NVIDIA's datasheet).
const (
	h200BF16DensePeak = 989.0 // TFLOP/s, bf16 tensor cores, dense (1979 with 2:4 sparsity)
	h200FP32Peak      = 67.0  // TFLOP/s, FP32 CUDA cores
	h200HBM           = 4.8   // TB/s
	h200L2            = 50 << 20
)

// qwen3Projections are the Qwen3-0.6B linear layers as out[M,N] = x[M,K]·wᵀ.
func qwen3Projections() []struct {
	name string
	n, k int
} {
	return []struct {
		name string
		n, k int
	}{{"q", 2048, 1024}, {"kv", 1024, 1024}, {"o", 1024, 2048}, {"gateup", 3072, 1024}, {"down", 1024, 3072}}
}

// BenchmarkGEMM times MatMul's bf16 kernels at both precisions: the
// decode GEMV (M 1 and 8; the skinny kernel, split-K) and prefill/training
// GEMMs (M 4096; gateup is the 4096 × 3072 × 1024 of issue 20) on every
// Qwen3-0.6B projection, and the LM head (N 151,936) at M 1. Reported per
// launch: TFLOP/s of the useful 2·M·N·K (the exact kernels run 3× the
// mma) and its fraction of the dense bf16 peak; GB/s of the analytic
// traffic (weights once, x, out) and the weights' share of HBM bandwidth
// (the GEMV goal: ≥ 70 %). Small weights rotate through copies that
// together exceed the L2, so each launch reads its weights from HBM.
func BenchmarkGEMM(b *testing.B) {
	d := openDevice(b)
	for _, prec := range []gemmPrecision{{bf16: true}, {}} {
		name := "exact"
		if prec.bf16 {
			name = "bf16"
		}
		for _, m := range []int{1, 8, 4096} {
			for _, sh := range qwen3Projections() {
				b.Run(fmt.Sprintf("%s_M%d_%s_N%d_K%d", name, m, sh.name, sh.n, sh.k), func(b *testing.B) {
					benchMatMul(b, d, m, sh.n, sh.k, prec.terms())
				})
			}
		}
		b.Run(fmt.Sprintf("%s_M1_lmhead_N151936_K1024", name), func(b *testing.B) {
			benchMatMul(b, d, 1, 151936, 1024, prec.terms())
		})
	}
}

// BenchmarkGEMMLoRAGrad times MatMulTN at the LoRA r16 gradients of a
// 64 × 512-token step on Qwen3-0.6B shapes: dA[16,1024] += gᵀ·x and
// dB[N,16] += dyᵀ·h, split over the tokens; TFLOP/s against the FP32 peak.
func BenchmarkGEMMLoRAGrad(b *testing.B) {
	d := openDevice(b)
	const m = 64 * 512
	for _, sh := range []struct {
		name string
		n, k int
	}{{"dA", 16, 1024}, {"dB_kv", 1024, 16}, {"dB_gateup", 3072, 16}} {
		b.Run(fmt.Sprintf("%s_M%d_N%d_K%d", sh.name, m, sh.n, sh.k), func(b *testing.B) {
			benchTN(b, d, m, sh.n, sh.k)
		})
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

// timeLaunches runs launch(it) b.N times (after one warm-up) on the
// driver's stream between two events and returns the seconds per launch.
func timeLaunches(b *testing.B, d *Device, s *session, launch func(it int)) (float64, error) {
	launch(0)
	start, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, fmt.Errorf("cuda: cuEventCreate: %w", err)
	}
	defer func() { _ = cu.DestroyEvent(&start) }()
	stop, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, fmt.Errorf("cuda: cuEventCreate: %w", err)
	}
	defer func() { _ = cu.DestroyEvent(&stop) }()
	if err := start.Record(d.drv.stream); err != nil {
		return 0, fmt.Errorf("cuda: cuEventRecord: %w", err)
	}
	for it := range b.N {
		launch(it + 1)
	}
	if s.err != nil {
		return 0, s.err
	}
	if err := stop.Record(d.drv.stream); err != nil {
		return 0, fmt.Errorf("cuda: cuEventRecord: %w", err)
	}
	if err := stop.Synchronize(); err != nil {
		return 0, fmt.Errorf("cuda: cuEventSynchronize: %w", err)
	}
	ms, err := start.Elapsed(stop)
	if err != nil {
		return 0, fmt.Errorf("cuda: cuEventElapsedTime: %w", err)
	}
	return float64(ms) / 1e3 / float64(b.N), nil
}

// withSession runs f on the driver goroutine with a session whose
// temporaries go back to the pool afterwards.
func withSession(b *testing.B, d *Device, f func(s *session) error) {
	err := d.drv.do(b.Context(), func() error {
		s := &session{d: d}
		defer func() {
			for _, p := range s.temps {
				d.drv.pool.put(p)
			}
		}()
		return f(s)
	})
	require.NoError(b, err)
}

func benchMatMul(b *testing.B, d *Device, m, n, k, terms int) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := randF32(rng, m*k)
	w := make([]uint16, n*k)
	for i := range w {
		w[i] = kernels.F32ToBF16(rng.Float32() - 0.5)
	}
	copies := 1
	if m <= 16 {
		copies = min(64, max(1, ceilDiv(4*h200L2, n*k*2)))
	}
	v := gemmBF16Variant(m, true, terms)
	p := gemmBF16Plan(m, n, k, v)
	var sec float64
	withSession(b, d, func(s *session) error {
		pws := make([]cu.DevicePtr, copies)
		for c := range pws {
			pws[c] = upload(s, w)
		}
		px, po, ws := upload(s, x), s.alloc(int64(m*n)*4), s.alloc(int64(p.ws(m, n))*4)
		if s.err != nil {
			return s.err
		}
		var err error
		sec, err = timeLaunches(b, d, s, func(it int) {
			s.gemmBF16("MatMul", p, v, po, ws, px, pws[it%copies], m, n, k, 0)
		})
		return err
	})
	flops := 2 * float64(m) * float64(n) * float64(k)
	wbytes := float64(n) * float64(k) * 2
	bytes := wbytes + float64(m)*float64(k)*4 + float64(m)*float64(n)*4
	b.ReportMetric(flops/sec/1e12, "TFLOP/s")
	b.ReportMetric(100*flops/sec/1e12/h200BF16DensePeak, "%peak")
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(100*wbytes/sec/1e12/h200HBM, "%HBM_weights")
	b.ReportMetric(float64(p.splits), "splits")
	b.ReportMetric(sec*1e6, "us/launch")
}

func benchTN(b *testing.B, d *Device, m, n, k int) {
	rng := rand.New(rand.NewPCG(3, 4))
	dy, x := randF32(rng, m*n), randF32(rng, m*k)
	p := gemmF32Plan(n, k, m, true)
	var sec float64
	withSession(b, d, func(s *session) error {
		pdy, px, pdw, ws := upload(s, dy), upload(s, x), s.alloc(int64(n*k)*4), s.alloc(int64(p.ws(n, k))*4)
		if s.err != nil {
			return s.err
		}
		var err error
		sec, err = timeLaunches(b, d, s, func(int) { s.gemmTN(p, pdw, ws, pdy, px, m, n, k) })
		return err
	})
	flops := 2 * float64(m) * float64(n) * float64(k)
	bytes := float64(m)*float64(n+k)*4 + 2*float64(n)*float64(k)*4
	b.ReportMetric(flops/sec/1e12, "TFLOP/s")
	b.ReportMetric(100*flops/sec/1e12/h200FP32Peak, "%fp32peak")
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(float64(p.splits), "splits")
	b.ReportMetric(sec*1e6, "us/launch")
}
