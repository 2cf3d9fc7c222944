package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
)

// TestDirect2MatchesDotNT2 checks that the AVX2 direct path (direct2
// kernels: dotNT2's blocks with a prefetch) gives bitwise the outputs of the
// dotNT2 kernels, for every M it serves, every weight dtype, ragged N
// (odd, not a multiple of the 64-row task), K with and without a tail past
// the last multiple of 8, and both store modes.
func TestDirect2MatchesDotNT2(t *testing.T) {
	if !detect().avx2 {
		t.Skip("this CPU lacks AVX2 + FMA + F16C (or GODEBUG turned it off)")
	}
	b := pathBackend(t, simdPath{name: "avx2", f: features{avx2: true}}, 2)
	kn, ok := b.mm()
	require.True(t, ok, "AVX2 kernels")
	r := rand.New(rand.NewPCG(11, 12))
	mats := func(dt kernels.DType, n, k int) kernels.Mat {
		f := make([]float32, n*k)
		for i := range f {
			f[i] = float32(r.NormFloat64())
		}
		return matAs(dt, f, n, k)
	}
	for _, dt := range []kernels.DType{kernels.BF16, kernels.F16, kernels.F32} {
		for _, nk := range [][2]int{{1, 8}, {3, 24}, {7, 40}, {130, 1024}, {197, 1100}, {64, 13}, {5, 4}} {
			n, k := nk[0], nk[1]
			w := mats(dt, n, k)
			for m := 2; m < mBig; m++ {
				x := make([]float32, m*k)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				init := make([]float32, m*n)
				for i := range init {
					init[i] = float32(r.NormFloat64())
				}
				for _, accumulate := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s_M%d_N%d_K%d_acc%v", dt, m, n, k, accumulate), func(t *testing.T) {
						got, want := append([]float32(nil), init...), append([]float32(nil), init...)
						b.matMulDirect2(kn, got, x, w, m, accumulate)
						b.matMulDirect(kn, want, x, w, m, accumulate)
						kerneltest.CheckExact(t, "direct2", got, want)
					})
				}
			}
		}
	}
}

// BenchmarkDirectAVX2 is MatMul's direct path (batched decode, 1 < M < 16)
// on the AVX2 kernels at Qwen3-0.6B's shapes (the MLP's up and down
// projections and the lm_head at 8 rows), the direct2 blocks against the
// dotNT2 blocks they replaced; GFLOP per CPU-second is the figure a loaded
// machine still ranks.
func BenchmarkDirectAVX2(b *testing.B) {
	be := New(0)
	defer be.Close()
	if !be.simd.avx2 {
		b.Skip("no AVX2")
	}
	be.simd = features{avx2: true}
	kn, _ := be.mm()
	for _, s := range [][3]int{{8, 3072, 1024}, {8, 1024, 3072}, {8, 151936, 1024}, {4, 3072, 1024}} {
		m, n, k := s[0], s[1], s[2]
		w := benchMat(kernels.BF16, n, k)
		x, out := benchVec(m*k), make([]float32, m*n)
		for _, v := range []struct {
			name string
			fn   func()
		}{
			{"dotNT2", func() { be.matMulDirect(kn, out, x, w, m, false) }},
			{"direct2", func() { be.matMulDirect2(kn, out, x, w, m, false) }},
		} {
			b.Run(fmt.Sprintf("BF16_M%d_N%d_K%d/%s", m, n, k, v.name), func(b *testing.B) {
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for range b.N {
					v.fn()
				}
				flops(b, 2*float64(m*n*k), cpu0)
				b.ReportMetric(float64(n*k*2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
