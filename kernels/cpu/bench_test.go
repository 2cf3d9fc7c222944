package cpu

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"github.com/x/kernels"
)

// BenchmarkPeakFMA measures the float32 FMA peak of this machine on all of
// the Backend's threads, per SIMD path the CPU has (avx512: 24 chains of
// 16-lane FMAs; avx2: 12 chains of 8-lane FMAs), no memory: the ceiling
// the matmul figures of that path compare with.
func BenchmarkPeakFMA(b *testing.B) {
	be := New(0)
	defer be.Close()
	const iters = 1 << 20
	for _, p := range simdPaths() {
		loop, perIter := fmaLoop, 768.0
		switch p.name {
		case "avx2":
			loop, perIter = fmaLoop2, 192
		case "generic":
			continue // no FMA loop in portable Go
		}
		b.Run(p.name, func(b *testing.B) {
			if p.missing != "" {
				b.Skipf("%s path not run: %s", p.name, p.missing)
			}
			cpu0 := cpuSeconds()
			for range b.N {
				be.parallelFor(be.threads, func(lo, hi int) {
					for range hi - lo {
						loop(iters)
					}
				})
			}
			flops(b, float64(be.threads)*iters*perIter, cpu0)
			b.ReportMetric(float64(be.threads), "threads")
		})
	}
}

// cpuSeconds is the CPU time (user + system) this process has used. The
// benchmarks report FLOP per CPU-second next to FLOP per wall second: on a
// machine shared with other jobs the wall figure drops with the load, the
// per-CPU-second figure (×threads for the machine) much less.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// flops reports GFLOP/s over wall time and GFLOP per CPU-second.
func flops(b *testing.B, perOp float64, cpu0 float64) {
	b.ReportMetric(perOp*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if c := cpuSeconds() - cpu0; c > 0 {
		b.ReportMetric(perOp*float64(b.N)/c/1e9, "GFLOP/cpu-s")
	}
}

func benchMat(dt kernels.DType, rows, cols int) kernels.Mat {
	r := rand.New(rand.NewPCG(1, 2))
	if dt == kernels.F32 {
		f := make([]float32, rows*cols)
		for i := range f {
			f[i] = float32(r.NormFloat64() * 0.02)
		}
		return kernels.MatF32(f, rows, cols)
	}
	u := make([]uint16, rows*cols)
	for i := range u {
		u[i] = kernels.F32ToBF16(float32(r.NormFloat64() * 0.02))
	}
	return kernels.MatBF16(u, rows, cols)
}

func benchVec(n int) []float32 {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// BenchmarkMatMul: out[M,N] = x[M,K]·Wᵀ at Qwen3-0.6B's shapes (hidden
// 1024, q 2048, MLP 3072, vocabulary 151936); GFLOP/s, and GB/s of weight
// bytes streamed (the figure that matters at M = 1).
func BenchmarkMatMul(b *testing.B) {
	be := New(0)
	defer be.Close()
	shapes := [][3]int{ // M, N, K
		{1, 1024, 1024}, {1, 3072, 1024}, {1, 1024, 3072}, {1, 151936, 1024},
		{8, 3072, 1024}, {64, 3072, 1024},
		{512, 1024, 1024}, {512, 3072, 1024}, {512, 1024, 3072}, {512, 2048, 1024}, {2048, 1024, 4096},
	}
	for _, dt := range []kernels.DType{kernels.BF16, kernels.F32} {
		for _, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			b.Run(fmt.Sprintf("%s_M%d_N%d_K%d", dt, m, n, k), func(b *testing.B) {
				w := benchMat(dt, n, k)
				x, out := benchVec(m*k), make([]float32, m*n)
				be.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, false)
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for range b.N {
					be.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, false)
				}
				flops(b, 2*float64(m*n*k), cpu0)
				b.ReportMetric(float64(n*k*dt.Size())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkMatMulNN and BenchmarkMatMulTN: the two gradient matmuls at a
// training shape (M = 512 tokens; MatMulNN also at the lm_head's N).
func BenchmarkMatMulNN(b *testing.B) {
	be := New(0)
	defer be.Close()
	for _, dt := range []kernels.DType{kernels.BF16, kernels.F32} {
		// N 151936: the lm_head's input gradient (N ≫ K).
		for _, s := range [][3]int{{512, 1024, 1024}, {512, 3072, 1024}, {512, 1024, 3072}, {128, 151936, 1024}} {
			m, n, k := s[0], s[1], s[2]
			b.Run(fmt.Sprintf("%s_M%d_N%d_K%d", dt, m, n, k), func(b *testing.B) {
				w := benchMat(dt, n, k)
				dy, out := benchVec(m*n), make([]float32, m*k)
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for range b.N {
					be.MatMulNN(kernels.HostF32(out), kernels.HostF32(dy), w, m, false)
				}
				flops(b, 2*float64(m*n*k), cpu0)
			})
		}
	}
}

func BenchmarkMatMulTN(b *testing.B) {
	be := New(0)
	defer be.Close()
	for _, s := range [][3]int{{512, 1024, 1024}, {512, 3072, 1024}, {512, 1024, 3072}} {
		m, n, k := s[0], s[1], s[2]
		b.Run(fmt.Sprintf("M%d_N%d_K%d", m, n, k), func(b *testing.B) {
			dy, x, dw := benchVec(m*n), benchVec(m*k), make([]float32, n*k)
			b.ResetTimer()
			cpu0 := cpuSeconds()
			for range b.N {
				be.MatMulTN(kernels.HostF32(dw), kernels.HostF32(dy), kernels.HostF32(x), m, n, k)
			}
			flops(b, 2*float64(m*n*k), cpu0)
		})
	}
}

// BenchmarkAttention: prefill (T = 512 from an empty cache) and decode (T =
// 1 after 512 tokens) with Qwen3-0.6B's 16 query / 8 kv heads of dim 128.
func BenchmarkAttention(b *testing.B) {
	be := New(0)
	defer be.Close()
	const h, kvh, d = 16, 8, 128
	for _, c := range []struct{ t, start int }{{512, 0}, {1, 512}, {1, 4096}} {
		b.Run(fmt.Sprintf("T%d_Start%d", c.t, c.start), func(b *testing.B) {
			n := c.start + c.t
			seqs := kernels.OneSeq(benchVec(c.t*h*d), make([]float32, c.t*h*d), make([]float32, c.t*h), benchVec(n*kvh*d), benchVec(n*kvh*d), c.t, c.start)
			b.ResetTimer()
			cpu0 := cpuSeconds()
			for range b.N {
				be.Attention(seqs, h, kvh, d, 0.088)
			}
			// QKᵀ and PV over the causal triangle: 4·D FLOP per (query, key, head).
			pairs := float64(c.t)*float64(c.start) + float64(c.t)*float64(c.t+1)/2
			flops(b, 4*d*h*pairs, cpu0)
		})
	}
}

// BenchmarkRMSNorm at one decode row and a 512-token prefill of hidden 1024.
func BenchmarkRMSNorm(b *testing.B) {
	be := New(0)
	defer be.Close()
	for _, rows := range []int{1, 512} {
		b.Run(fmt.Sprintf("R%d_C1024", rows), func(b *testing.B) {
			x, w, out := benchVec(rows*1024), benchVec(1024), make([]float32, rows*1024)
			b.ResetTimer()
			for range b.N {
				be.RMSNorm(kernels.HostF32(out), kernels.HostF32(x), kernels.HostF32(w), rows, 1024, 1e-6)
			}
			b.ReportMetric(float64(8*rows*1024)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkLogSoftmaxGather over Qwen3's vocabulary, with entropy.
func BenchmarkLogSoftmaxGather(b *testing.B) {
	be := New(0)
	defer be.Close()
	const v = 151936
	for _, rows := range []int{1, 64} {
		b.Run(fmt.Sprintf("R%d_V%d", rows, v), func(b *testing.B) {
			logits := benchVec(rows * v)
			targets := make([]int32, rows)
			logp, ent := make([]float32, rows), make([]float32, rows)
			b.ResetTimer()
			for range b.N {
				be.LogSoftmaxGather(kernels.HostF32(logp), kernels.HostF32(ent), kernels.HostF32(logits), kernels.HostI32(targets), rows, v)
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkReadBandwidth is the memory-read anchor for the GEMV figures:
// a SIMD max over 256 MiB of float32 (far beyond the caches), split over
// the threads like a GEMV; GB/s over wall time and per CPU-second.
func BenchmarkReadBandwidth(b *testing.B) {
	be := New(0)
	defer be.Close()
	x := benchVec(64 << 20)
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for range b.N {
		be.parallelFor(64, func(lo, hi int) {
			n := len(x) / 64
			bwMax(be.simd.isa(), x[lo*n:hi*n])
		})
	}
	bytes := float64(4*len(x)) * float64(b.N)
	b.ReportMetric(bytes/b.Elapsed().Seconds()/1e9, "GB/s")
	if c := cpuSeconds() - cpu0; c > 0 {
		b.ReportMetric(bytes/c/1e9, "GB/cpu-s")
	}
}

// BenchmarkMatMulAVX2 is MatMul on the AVX2 kernels (what a CPU without
// AVX-512 runs), forced on this machine.
func BenchmarkMatMulAVX2(b *testing.B) {
	be := New(0)
	defer be.Close()
	if !be.simd.avx2 {
		b.Skip("no AVX2")
	}
	be.simd = features{avx2: true}
	for _, s := range [][3]int{{1, 3072, 1024}, {1, 151936, 1024}, {512, 1024, 1024}} {
		m, n, k := s[0], s[1], s[2]
		b.Run(fmt.Sprintf("BF16_M%d_N%d_K%d", m, n, k), func(b *testing.B) {
			w := benchMat(kernels.BF16, n, k)
			x, out := benchVec(m*k), make([]float32, m*n)
			b.ResetTimer()
			cpu0 := cpuSeconds()
			for range b.N {
				be.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, false)
			}
			flops(b, 2*float64(m*n*k), cpu0)
		})
	}
}

// BenchmarkSampleRows over Qwen3's vocabulary, 16 rows per call (a decode
// step's batch): greedy (the baseline: argmax and the full log-prob),
// plain temperature (an exp per token), Qwen3's defaults (top-k 20, top-p
// 0.95), and top-p alone; rows/s reported.
func BenchmarkSampleRows(b *testing.B) {
	be := New(0)
	defer be.Close()
	const rows, v = 16, 151936
	logits := make([]float32, 0, rows*v)
	for range rows {
		logits = append(logits, benchVec(v)...)
	}
	ids, lp, full := make([]int32, rows), make([]float32, rows), make([]float32, rows)
	u := make([]float64, rows)
	for _, p := range []kernels.SamplingParams{{}, {Temperature: 1}, {Temperature: 0.6, TopK: 20, TopP: 0.95}, {Temperature: 1, TopP: 0.9}} {
		params := make([]kernels.SamplingParams, rows)
		for i := range params {
			params[i] = p
		}
		b.Run(fmt.Sprintf("T%g_K%d_P%g", p.Temperature, p.TopK, p.TopP), func(b *testing.B) {
			for i := range b.N {
				for r := range u {
					u[r] = float64((i+r)%100) / 100
				}
				be.SampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), kernels.HostSampleArgs(params, u), rows, v)
			}
			b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkPolicyLoss over 64 sequences of 2,048 tokens (a GRPO batch), at
// token and sequence level; Mtok/s reported.
func BenchmarkPolicyLoss(b *testing.B) {
	be := New(0)
	defer be.Close()
	const seqs, l = 64, 2048
	n := seqs * l
	in := kernels.HostLossInput{LogP: benchVec(n), OldLogP: benchVec(n), RefLogP: benchVec(n), Entropy: benchVec(n),
		Adv: benchVec(n), Weight: benchVec(n), Seg: make([]int32, seqs+1)}
	for s := range in.Seg {
		in.Seg[s] = int32(s * l)
	}
	f := func() []float32 { return make([]float32, n) }
	out := kernels.HostLossOutput{Loss: f(), DLogP: f(), DEntropy: f(), Ratio: f(), KL: f(), Phi: f(), Clip: make([]uint8, n)}
	for _, seq := range []bool{false, true} {
		p := kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.28, Beta: 0.04, EntropyCoef: 0.01, SequenceRatio: seq}
		b.Run(fmt.Sprintf("sequence=%v", seq), func(b *testing.B) {
			for range b.N {
				be.PolicyLoss(out.Buffers(), in.Buffers(), p, n)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds()/1e6, "Mtok/s")
		})
	}
}

// BenchmarkMicroKernel times the AVX-512 register blocks alone on
// cache-resident data, one thread: dotNT 6×4 over K = 1024 (L1) including
// its horizontal reduction, axpy 6×64 over a 512-row packed panel (L2), and
// the FMA loop as the ceiling. The gap between these and BenchmarkMatMul is
// the cost of the tiling around them.
func BenchmarkMicroKernel(b *testing.B) {
	if !detect().avx512 {
		b.Skip("no AVX-512")
	}
	const k = 1024
	x, w, out := benchVec(6*k), benchVec(4*k), make([]float32, 6*4)
	b.Run("dotNT_6x4_K1024", func(b *testing.B) {
		cpu0 := cpuSeconds()
		for range b.N {
			dotNTAsm(0, 6, 4, &x[0], k*4, unsafe.Pointer(&w[0]), k*4, k/16, &out[0], 16, 0)
		}
		flops(b, 2*6*4*k, cpu0)
	})
	a, p, c := benchVec(6*512), benchVec(512*64), make([]float32, 6*64)
	b.Run("axpy_6x64_P512", func(b *testing.B) {
		cpu0 := cpuSeconds()
		for range b.N {
			axpyAsm(0, 6, 4, &a[0], 512*4, 4, unsafe.Pointer(&p[0]), 64*4, 512, &c[0], 64*4, 1)
		}
		flops(b, 2*6*64*512, cpu0)
	})
	b.Run("fmaLoop", func(b *testing.B) {
		cpu0 := cpuSeconds()
		for range b.N {
			fmaLoop(1000)
		}
		flops(b, 768*1000, cpu0)
	})
}
