package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
	"github.com/x/kernels/ref"
)

// bwConformance is conformance for the backward families.
func bwConformance(t *testing.T, family func(*testing.T, kernels.Backend)) {
	conformance(t, family)
}

func TestRMSNormBackward(t *testing.T)   { bwConformance(t, kerneltest.RMSNormBackward) }
func TestRoPEBackward(t *testing.T)      { bwConformance(t, kerneltest.RoPEBackward) }
func TestSwiGLUBackward(t *testing.T)    { bwConformance(t, kerneltest.SwiGLUBackward) }
func TestEmbeddingBackward(t *testing.T) { bwConformance(t, kerneltest.EmbeddingBackward) }
func TestAttentionBackward(t *testing.T) { bwConformance(t, kerneltest.AttentionBackward) }
func TestAttentionBackwardPaged(t *testing.T) {
	bwConformance(t, kerneltest.AttentionBackwardPaged)
}
func TestAdamW(t *testing.T) { bwConformance(t, kerneltest.AdamW) }
func TestLogSoftmaxGatherBackward(t *testing.T) {
	bwConformance(t, kerneltest.LogSoftmaxGatherBackward)
}

func bwRand(seed uint64, n int, scale float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0xbac4))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((2*r.Float64() - 1) * scale)
	}
	return x
}

// TestBackwardThreadCountIndependent checks the promise of the backward
// kernels that their sums run in a fixed order: one, two and three threads
// give bitwise the same results, on every SIMD path.
func TestBackwardThreadCountIndependent(t *testing.T) {
	forEachPath(t, backwardThreadCountIndependent)
}

func backwardThreadCountIndependent(t *testing.T, p simdPath) {
	type result [][]float32
	const rows, cols, hd = 96, 1030, 64
	x, dout, w := bwRand(1, rows*cols, 1), bwRand(2, rows*cols, 1), bwRand(3, cols, 2)
	logits := bwRand(4, 5*151936, 9)
	targets := []int32{0, 151935, 7, 99999, 3}
	dlogp := bwRand(5, 5, 2)
	ids := []int32{4, 9, 4, 4, 0, 9, 2, 4}
	tt, start, heads, kvh := 70, 30, 8, 2
	nq, nkv := tt*heads*hd, (start+tt)*kvh*hd
	q, k, v, do := bwRand(6, nq, 1), bwRand(7, nkv, 1), bwRand(8, nkv, 1), bwRand(9, nq, 1)
	out, lse := make([]float32, nq), make([]float32, tt*heads)
	fw := pathBackend(t, p, 1)
	fw.Attention(kernels.OneSeq(q, out, lse, k, v, tt, start), heads, kvh, hd, 0.125)

	run := func(b *Backend) result {
		dx, dw := make([]float32, rows*cols), make([]float32, cols)
		b.RMSNormBackward(kernels.HostF32(dx), kernels.HostF32(dw), kernels.HostF32(dout), kernels.HostF32(x), kernels.HostF32(w), rows, cols, 1e-6)
		dl := make([]float32, len(logits))
		b.LogSoftmaxGatherBackward(kernels.HostF32(dl), kernels.HostF32(logits), kernels.HostI32(targets), kernels.HostF32(dlogp), kernels.Buffer{}, 5, 151936)
		dtab := make([]float32, 10*cols)
		b.EmbeddingBackward(kernels.HostF32(dtab), kernels.HostF32(dout[:len(ids)*cols]), kernels.HostI32(ids), cols)
		s := kernels.AttentionGradBatch{AttentionBatch: kernels.OneSeq(q, out, lse, k, v, tt, start), DOut: kernels.HostF32(do),
			DQ: kernels.HostF32(make([]float32, nq)), DK: kernels.HostF32(make([]float32, nkv)), DV: kernels.HostF32(make([]float32, nkv))}
		b.AttentionBackward(s, heads, kvh, hd, 0.125)
		p, m, vv := bwRand(10, 70001, 1), make([]float32, 70001), make([]float32, 70001)
		b.AdamW(kernels.HostF32(p), kernels.HostF32(bwRand(11, 70001, 1)), kernels.HostF32(m), kernels.HostF32(vv), kernels.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}, 1)
		return result{dx, dw, dl, dtab, s.DQ.F32(), s.DK.F32(), s.DV.F32(), p, m, vv}
	}
	var want result
	for threads := 1; threads <= 3; threads++ {
		got := run(pathBackend(t, p, threads))
		if threads == 1 {
			want = got
			continue
		}
		for i := range want {
			kerneltest.CheckExact(t, fmt.Sprintf("threads %d output %d", threads, i), got[i], want[i])
		}
	}
}

// TestBackwardInPlace checks the aliasing the cpu kernels document beyond
// the contract: RMSNormBackward with dx = dout, SwiGLUBackward with
// dgate = gate and dup = up, each bitwise equal to separate buffers.
func TestBackwardInPlace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *Backend) {
		{
			const rows, cols = 40, 1000
			x, dout, w := bwRand(1, rows*cols, 1), bwRand(2, rows*cols, 1), bwRand(3, cols, 2)
			dx, dw := make([]float32, rows*cols), make([]float32, cols)
			b.RMSNormBackward(kernels.HostF32(dx), kernels.HostF32(dw), kernels.HostF32(dout), kernels.HostF32(x), kernels.HostF32(w), rows, cols, 1e-6)
			inPlace, dw2 := append([]float32(nil), dout...), make([]float32, cols)
			b.RMSNormBackward(kernels.HostF32(inPlace), kernels.HostF32(dw2), kernels.HostF32(inPlace), kernels.HostF32(x), kernels.HostF32(w), rows, cols, 1e-6)
			kerneltest.CheckExact(t, "RMSNormBackward dx = dout", inPlace, dx)
			kerneltest.CheckExact(t, "RMSNormBackward dw with dx = dout", dw2, dw)

			const n = 20000
			gate, up, do := bwRand(4, n, 6), bwRand(5, n, 2), bwRand(6, n, 1)
			dg, du := make([]float32, n), make([]float32, n)
			b.SwiGLUBackward(kernels.HostF32(dg), kernels.HostF32(du), kernels.HostF32(do), kernels.HostF32(gate), kernels.HostF32(up))
			g2, u2 := append([]float32(nil), gate...), append([]float32(nil), up...)
			b.SwiGLUBackward(kernels.HostF32(g2), kernels.HostF32(u2), kernels.HostF32(do), kernels.HostF32(g2), kernels.HostF32(u2))
			kerneltest.CheckExact(t, "SwiGLUBackward dgate = gate", g2, dg)
			kerneltest.CheckExact(t, "SwiGLUBackward dup = up", u2, du)
		}
	})
}

// TestSIMDBackwardHelpers compares every SIMD helper on each path the CPU
// has (subtests avx512, avx2, generic) with its portable twin at lengths
// around both vector widths (8 and 16 lanes: tails are masked), and the
// vector exp with float64 math.Exp across its range. On the generic path
// both sides are the portable code and the test checks that path against
// math.Exp alone.
func TestSIMDBackwardHelpers(t *testing.T) {
	forEachPath(t, func(t *testing.T, p simdPath) { simdHelpers(t, p.f.isa()) })
}

func simdHelpers(t *testing.T, avx isa) {
	for _, n := range []int{1, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 100, 1000} {
		t.Run(fmt.Sprintf("N%d", n), func(t *testing.T) {
			x := bwRand(uint64(n), n, 20)
			got, want := make([]float32, n), make([]float32, n)
			gs := bwExpSum(avx, got, x, n, 3)
			ws := expSumGo(want, x, n, 3)
			for i := range x {
				e := math.Exp(float64(x[i] - 3))
				assert.InDelta(t, e, float64(got[i]), 3e-7*e, "exp(%g)", x[i]-3)
			}
			assert.InDelta(t, float64(ws), float64(gs), 1e-6*float64(ws), "exp sum")
			assert.Equal(t, maxGo(x), bwMax(avx, x), "max")

			sc, sw := append([]float32(nil), x...), append([]float32(nil), x...)
			bwScale(avx, sc, -0.37)
			scaleGo(sw, -0.37)
			assert.Equal(t, sw, sc, "scale")

			for _, d := range []int{8, 16, 20, 24, 48, 64, 128, 144} {
				rows := bwRand(uint64(d), (n-1)*(d+5)+d, 1)
				v := bwRand(uint64(d+1), d, 1)
				do, dg := make([]float32, n), make([]float32, n)
				bwDots(avx, do, v, rows, d+5, n, d)
				dotsGo(dg, v, rows, d+5, n, d)
				kerneltest.CheckClose(t, fmt.Sprintf("dots d=%d", d), do, dg, kerneltest.Tol{ATol: 1e-5, RTol: 1e-5, NMSE: 1e-10})
				ao, ag := bwRand(3, d, 1), bwRand(3, d, 1)
				coef := bwRand(4, n, 1)
				bwAxpys(avx, ao, coef, rows, d+5, n, d)
				axpysGo(ag, coef, rows, d+5, n, d)
				kerneltest.CheckClose(t, fmt.Sprintf("axpys d=%d", d), ao, ag, kerneltest.Tol{ATol: 1e-5, RTol: 1e-5, NMSE: 1e-10})
			}

			const ldk = 80
			kt := bwRand(16, n*ldk, 1)
			x1 := bwRand(17, n, 1)
			tA, tG := make([]float32, 128), make([]float32, 128)
			bwTile64(avx, tA, tA[64:], x, x1, kt, n, ldk)
			tile64Go(tG, tG[64:], x, x1, kt, n, ldk)
			kerneltest.CheckClose(t, "tile64", tA, tG, kerneltest.Tol{ATol: 1e-4, RTol: 1e-5, NMSE: 1e-10})

			for _, hd := range []int{2 * n, 2*n + 6} { // D = 2·half, and a head stride past it
				cs := bwRand(18, 2*n, 1)
				rA := bwRand(19, 3*hd, 1)
				rG := append([]float32(nil), rA...)
				bwRoPERow(avx, rA, cs[:n], cs[n:], n, 3, hd)
				ropeRowGo(rG, cs[:n], cs[n:], n, 3, hd)
				kerneltest.CheckClose(t, fmt.Sprintf("rope row stride %d", hd), rA, rG, kerneltest.Tol{ATol: 1e-6, RTol: 1e-6, NMSE: 1e-12})
			}

			gate, up, dout := bwRand(7, n, 12), bwRand(8, n, 2), bwRand(9, n, 1)
			dgA, duA, dgG, duG := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
			bwSwiGLU(avx, dgA, duA, dout, gate, up)
			swigluBackwardGo(dgG, duG, dout, gate, up)
			kerneltest.CheckClose(t, "swiglu dgate", dgA, dgG, kerneltest.Tol{ATol: 1e-6, RTol: 1e-5, NMSE: 1e-11})
			kerneltest.CheckClose(t, "swiglu dup", duA, duG, kerneltest.Tol{ATol: 1e-6, RTol: 1e-5, NMSE: 1e-11})

			w := bwRand(14, n, 2)
			ssA, dotA := bwRMSRow(avx, x, dout, w)
			ssG, dotG := rmsRowGo(x, dout, w)
			assert.InDelta(t, float64(ssG), float64(ssA), 1e-5*float64(ssG)+1e-6, "rms row Σx²")
			assert.InDelta(t, float64(dotG), float64(dotA), 1e-4*math.Abs(float64(dotG))+1e-4, "rms row Σw·dy·x")
			dxA, dxG := make([]float32, n), make([]float32, n)
			accA, accG := bwRand(15, n, 1), bwRand(15, n, 1)
			bwRMSCols(avx, dxA, dout, x, w, accA, 0.7, -0.3)
			rmsColsGo(dxG, dout, x, w, accG, 0.7, -0.3)
			// The assembly fuses multiply-adds (one rounding instead of two);
			// with cancellation in acc + rs·dy·x that is ~1e-8 absolute.
			colTol := kerneltest.Tol{ATol: 1e-6, RTol: 1e-6, NMSE: 1e-10}
			kerneltest.CheckClose(t, "rms cols dx", dxA, dxG, colTol)
			kerneltest.CheckClose(t, "rms cols acc", accA, accG, colTol)

			c := &adamwConsts{0.9, 0.1, 0.999, 0.001, 0.9999, 0.01, 1.5, 1e-8}
			pA, mA, vA := bwRand(10, n, 1), bwRand(11, n, 0.1), bwRand(12, n, 0.01)
			for i := range vA {
				vA[i] = float32(math.Abs(float64(vA[i])))
			}
			pG, mG, vG := append([]float32(nil), pA...), append([]float32(nil), mA...), append([]float32(nil), vA...)
			grad := bwRand(13, n, 1)
			bwAdamW(avx, pA, grad, mA, vA, c)
			adamwGo(pG, grad, mG, vG, c)
			tol := kerneltest.Tol{ATol: 1e-7, RTol: 1e-6, NMSE: 1e-12}
			kerneltest.CheckClose(t, "adamw param", pA, pG, tol)
			kerneltest.CheckClose(t, "adamw m", mA, mG, tol)
			kerneltest.CheckClose(t, "adamw v", vA, vG, tol)
		})
	}
	t.Run("exp_special", func(t *testing.T) {
		in := []float32{float32(math.Inf(-1)), -200, -104, -103, -87.5, -1e-8, 0, 1e-8, 1, 50, 88.5, float32(math.NaN())}
		out := make([]float32, len(in))
		bwExpSum(avx, out, in, len(in), 0)
		for i, x := range in {
			want := math.Exp(float64(x))
			switch {
			case math.IsNaN(want):
				assert.True(t, math.IsNaN(float64(out[i])), "exp(NaN)")
			case want < 1e-37: // subnormal or zero: absolute error only
				assert.InDelta(t, want, float64(out[i]), 2e-45, "exp(%g)", x)
			default:
				assert.InDelta(t, want, float64(out[i]), 3e-7*want, "exp(%g)", x)
			}
		}
	})
}

// TestBackwardPanics checks that a buffer too short for its shape panics
// naming the op and argument, before anything is written.
func TestBackwardPanics(t *testing.T) {
	b := New(2)
	defer b.Close()
	short, buf := make([]float32, 3), make([]float32, 64)
	for _, tc := range []struct {
		name, want string
		call       func()
	}{
		{"rmsnorm dw", "RMSNormBackward: dw", func() {
			b.RMSNormBackward(kernels.HostF32(buf), kernels.HostF32(short), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), 2, 4, 1e-6)
		}},
		{"rope", "RoPEBackward: x", func() { b.RoPEBackward(kernels.HostF32(short), kernels.HostI32([]int32{0}), 1, 4, 1e4) }},
		{"swiglu", "SwiGLUBackward: up", func() {
			b.SwiGLUBackward(kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(short))
		}},
		{"embedding id", "ids[1] = 9", func() {
			b.EmbeddingBackward(kernels.HostF32(buf[:8]), kernels.HostF32(buf), kernels.HostI32([]int32{0, 9}), 4)
		}},
		{"logsoftmax target", "targets[0] = 5", func() {
			b.LogSoftmaxGatherBackward(kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostI32([]int32{5}), kernels.HostF32(buf), kernels.Buffer{}, 1, 5)
		}},
		{"attention DV", "AttentionBackward: DV", func() {
			b.AttentionBackward(kernels.AttentionGradBatch{AttentionBatch: kernels.OneSeq(buf, buf, buf, buf, buf, 1, 2), DOut: kernels.HostF32(buf),
				DQ: kernels.HostF32(buf), DK: kernels.HostF32(buf), DV: kernels.HostF32(short)}, 2, 1, 8, 1)
		}},
		{"attention heads", "heads 3, kvHeads 2", func() { b.AttentionBackward(kernels.AttentionGradBatch{}, 3, 2, 8, 1) }},
		{"adamw step", "step 0", func() {
			b.AdamW(kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), kernels.HostF32(buf), kernels.AdamWParams{}, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "no panic")
				assert.Contains(t, fmt.Sprint(r), tc.want)
			}()
			tc.call()
		})
	}
}

// Benchmarks of the backward kernels on the default Backend (both cores,
// AVX-512 where available). Throughput metrics count the minimal work:
// attention FLOPs are 5 matrix products of 2·D FLOPs per visible (query,
// key) pair per head (S and dP recomputed, dV, dK, dQ); GB/s counts each
// buffer read or written once.

// BenchmarkAttentionBackward: one prefill-shaped sequence with K/V
// contiguous, or read through a block table of 64-position blocks in f32
// or bf16 (the model's KV pool layout).
func BenchmarkAttentionBackward(bm *testing.B) {
	const heads, kvh, d, bs = 16, 8, 128, 64
	for _, c := range []struct {
		tt int
		kv string
	}{{512, "contiguous"}, {1024, "contiguous"}, {1024, "pagedF32"}, {1024, "pagedBF16"}} {
		tt := c.tt
		bm.Run(fmt.Sprintf("T%d_H%d_KVH%d_D%d_%s", tt, heads, kvh, d, c.kv), func(bm *testing.B) {
			b := New(0)
			defer b.Close()
			nq, nkv := tt*heads*d, tt*kvh*d
			q, k, v, do := bwRand(1, nq, 1), bwRand(2, nkv, 1), bwRand(3, nkv, 1), bwRand(4, nq, 1)
			out, lse := make([]float32, nq), make([]float32, tt*heads)
			scale := float32(1 / math.Sqrt(d))
			a := kernels.OneSeq(q, out, lse, k, v, tt, 0)
			b.Attention(a, heads, kvh, d, scale)
			seqs := kernels.AttentionGradBatch{AttentionBatch: a, DOut: kernels.HostF32(do),
				DQ: kernels.HostF32(make([]float32, nq)), DK: kernels.HostF32(make([]float32, nkv)), DV: kernels.HostF32(make([]float32, nkv))}
			if c.kv != "contiguous" {
				dt := kernels.F32
				if c.kv == "pagedBF16" {
					dt = kernels.BF16
				}
				seqs.Paged = benchPool([][]float32{k}, [][]float32{v}, tt, kvh*d, bs, dt)
				seqs.K, seqs.V = kernels.Buffer{}, kernels.Buffer{}
			}
			for bm.Loop() {
				b.AttentionBackward(seqs, heads, kvh, d, scale)
			}
			pairs := float64(heads) * float64(tt) * float64(tt+1) / 2
			bm.ReportMetric(10*d*pairs*float64(bm.N)/bm.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func BenchmarkLogSoftmaxGatherBackward(bm *testing.B) {
	const rows, v = 64, 151936
	b := New(0)
	defer b.Close()
	logits := bwRand(1, rows*v, 10)
	dl := make([]float32, rows*v)
	targets := make([]int32, rows)
	for r := range targets {
		targets[r] = int32(r * 2311)
	}
	dlogp, dent := bwRand(2, rows, 1), bwRand(3, rows, 1)
	for _, c := range []struct {
		name string
		dent []float32
	}{{"logp", nil}, {"logp+entropy", dent}} {
		bm.Run(c.name, func(bm *testing.B) {
			for bm.Loop() {
				b.LogSoftmaxGatherBackward(kernels.HostF32(dl), kernels.HostF32(logits), kernels.HostI32(targets), kernels.HostF32(dlogp), kernels.HostF32(c.dent), rows, v)
			}
			bm.ReportMetric(8*rows*v*float64(bm.N)/bm.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

func BenchmarkAdamW(bm *testing.B) {
	const n = 10_000_000
	b := New(0)
	defer b.Close()
	p, g, m, v := bwRand(1, n, 1), bwRand(2, n, 1), make([]float32, n), make([]float32, n)
	hp := kernels.AdamWParams{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
	step := 0
	for bm.Loop() {
		step++
		b.AdamW(kernels.HostF32(p), kernels.HostF32(g), kernels.HostF32(m), kernels.HostF32(v), hp, step)
	}
	bm.ReportMetric(28*n*float64(bm.N)/bm.Elapsed().Seconds()/1e9, "GB/s") // read p,g,m,v; write p,m,v
}

func BenchmarkRMSNormBackward(bm *testing.B) {
	const rows, cols = 2048, 1024
	b := New(0)
	defer b.Close()
	x, dout, w := bwRand(1, rows*cols, 1), bwRand(2, rows*cols, 1), bwRand(3, cols, 1)
	dx, dw := make([]float32, rows*cols), make([]float32, cols)
	for bm.Loop() {
		b.RMSNormBackward(kernels.HostF32(dx), kernels.HostF32(dw), kernels.HostF32(dout), kernels.HostF32(x), kernels.HostF32(w), rows, cols, 1e-6)
	}
	bm.ReportMetric(12*rows*cols*float64(bm.N)/bm.Elapsed().Seconds()/1e9, "GB/s") // read x, dout; write dx
}

func BenchmarkSwiGLUBackward(bm *testing.B) {
	const n = 2048 * 3072
	b := New(0)
	defer b.Close()
	gate, up, dout := bwRand(1, n, 4), bwRand(2, n, 1), bwRand(3, n, 1)
	dg, du := make([]float32, n), make([]float32, n)
	for bm.Loop() {
		b.SwiGLUBackward(kernels.HostF32(dg), kernels.HostF32(du), kernels.HostF32(dout), kernels.HostF32(gate), kernels.HostF32(up))
	}
	bm.ReportMetric(20*n*float64(bm.N)/bm.Elapsed().Seconds()/1e9, "GB/s") // read gate, up, dout; write dgate, dup
}

func BenchmarkRoPEBackward(bm *testing.B) {
	const tt, heads, d = 2048, 16, 128
	b := New(0)
	defer b.Close()
	x := bwRand(1, tt*heads*d, 1)
	pos := make([]int32, tt)
	for i := range pos {
		pos[i] = int32(i)
	}
	for bm.Loop() {
		b.RoPEBackward(kernels.HostF32(x), kernels.HostI32(pos), heads, d, 1e6)
	}
	bm.ReportMetric(8*tt*heads*d*float64(bm.N)/bm.Elapsed().Seconds()/1e9, "GB/s") // read and write dx
}

func BenchmarkEmbeddingBackward(bm *testing.B) {
	const tt, v, c = 2048, 151936, 1024
	b := New(0)
	defer b.Close()
	dtable := make([]float32, v*c)
	dout := bwRand(1, tt*c, 1)
	ids := make([]int32, tt)
	for i := range ids {
		ids[i] = int32(i * 7919 % v)
	}
	for bm.Loop() {
		b.EmbeddingBackward(kernels.HostF32(dtable), kernels.HostF32(dout), kernels.HostI32(ids), c)
	}
	bm.ReportMetric(12*tt*c*float64(bm.N)/bm.Elapsed().Seconds()/1e9, "GB/s") // read dout and the rows, write the rows
}

// TestAttentionBackwardRandomShapes compares AttentionBackward with the
// reference on random small shapes, to reach tiling edges the fixed cases
// may miss: odd row counts, query groups wider than a tile (40 heads per kv
// head), head dims that are not multiples of 16, causal limits inside key
// blocks, and empty sequences.
func TestAttentionBackwardRandomShapes(t *testing.T) {
	groups := []int{1, 2, 3, 4, 8, 40}
	dims := []int{2, 8, 16, 24, 48, 64, 80, 128}
	var r ref.Backend
	forEachBackend(t, func(t *testing.T, b *Backend) {
		rng := rand.New(rand.NewPCG(7, 11)) // the same shapes on every path
		for i := range 8 {
			group, d := groups[rng.IntN(len(groups))], dims[rng.IntN(len(dims))]
			kvh := 1 + rng.IntN(2)
			heads := group * kvh
			nseq := 1 + rng.IntN(3)
			shapes := make([][2]int, nseq)
			for s := range shapes {
				shapes[s] = [2]int{rng.IntN(90), rng.IntN(80)} // T, Start
			}
			name := fmt.Sprintf("H%d_KVH%d_D%d_%v", heads, kvh, d, shapes)
			t.Run(name, func(t *testing.T) {
				scale := float32(1 / math.Sqrt(float64(d)))
				var want, got []kernels.AttentionGradBatch
				for si, sh := range shapes {
					tt, start := sh[0], sh[1]
					nq, nkv := tt*heads*d, (start+tt)*kvh*d
					seed := uint64(1000*i + 10*si)
					a := kernels.OneSeq(bwRand(seed+1, nq, 1), make([]float32, nq), make([]float32, tt*heads), bwRand(seed+2, nkv, 1), bwRand(seed+3, nkv, 1), tt, start)
					r.Attention(a, heads, kvh, d, scale)
					w := kernels.AttentionGradBatch{AttentionBatch: a, DOut: kernels.HostF32(bwRand(seed, nq, 1)),
						DQ: kernels.HostF32(make([]float32, nq)), DK: kernels.HostF32(bwRand(seed+4, nkv, 1)), DV: kernels.HostF32(bwRand(seed+5, nkv, 1))}
					g := w
					g.DQ, g.DK, g.DV = kernels.HostF32(bwRand(seed+6, nq, 9)), kernels.HostF32(append([]float32(nil), w.DK.F32()...)), kernels.HostF32(append([]float32(nil), w.DV.F32()...))
					r.AttentionBackward(w, heads, kvh, d, scale)
					b.AttentionBackward(g, heads, kvh, d, scale)
					want, got = append(want, w), append(got, g)
				}
				tol := kerneltest.Tolerance("AttentionBackward")
				tol.NMSE = math.Inf(1) // per element only: a sequence's DQ may be all zero (T = 1, Start = 0)
				for s := range want {
					kerneltest.CheckClose(t, fmt.Sprintf("seq %d DQ", s), got[s].DQ.F32(), want[s].DQ.F32(), tol)
					kerneltest.CheckClose(t, fmt.Sprintf("seq %d DK", s), got[s].DK.F32(), want[s].DK.F32(), tol)
					kerneltest.CheckClose(t, fmt.Sprintf("seq %d DV", s), got[s].DV.F32(), want[s].DV.F32(), tol)
				}
			})
		}
	})
}
