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
)

// invariantWeights is w as an F32, BF16 or F16 Mat of n×k random values.
func invariantWeights(r *rand.Rand, dt kernels.DType, n, k int) kernels.Mat {
	f := make([]float32, n*k)
	for i := range f {
		f[i] = r.Float32() - 0.5
	}
	return kerneltest.ToMat(dt, f, n, k)
}

// TestMatMulBatchInvariant: in batch-invariant mode a row of x gives the
// same outputs, bit for bit, whatever the number of rows M beside it, its
// position among them, accumulate, and the thread count, on every SIMD
// path, weight dtype and precision; and they are MatMul's values within
// the tolerance of float32 summation orders (a relative 1e-5 of the sum
// of |products| for these K ≤ 150). Without the mode, M = 1, 2 and 112
// differ (the test checks it does not pass vacuously).
func TestMatMulBatchInvariant(t *testing.T) {
	forEachPath(t, func(t *testing.T, p simdPath) {
		one := pathBackend(t, p, 1)
		two := pathBackend(t, p, 2)
		for _, dt := range []kernels.DType{kernels.F32, kernels.BF16, kernels.F16} {
			for _, prec := range []kernels.MatMulPrecision{kernels.MatMulExact, kernels.MatMulBF16} {
				if prec == kernels.MatMulBF16 && dt != kernels.BF16 {
					continue
				}
				for _, nk := range [][2]int{{70, 37}, {130, 150}} {
					name := fmt.Sprintf("%s/%s/%dx%d", dt, prec, nk[0], nk[1])
					t.Run(name, func(t *testing.T) {
						checkInvariant(t, one, two, dt, prec, nk[0], nk[1])
					})
				}
			}
		}
	})
}

func checkInvariant(t *testing.T, one, two *Backend, dt kernels.DType, prec kernels.MatMulPrecision, n, k int) {
	r := rand.New(rand.NewPCG(uint64(n), uint64(k)))
	w := invariantWeights(r, dt, n, k)
	row := make([]float32, k)
	for i := range row {
		row[i] = r.Float32() - 0.5
	}
	init := make([]float32, n) // what accumulate adds to
	for i := range init {
		init[i] = r.Float32()
	}
	for _, b := range []*Backend{one, two} {
		require.NoError(t, b.SetMatMulPrecision(prec))
		b.SetBatchInvariant(true)
	}
	defer func() {
		for _, b := range []*Backend{one, two} {
			_ = b.SetMatMulPrecision(kernels.MatMulExact)
			b.SetBatchInvariant(false)
		}
	}()
	// mul runs MatMul on b with the row at position pos of m rows.
	mul := func(b *Backend, m, pos int, accumulate bool) []float32 {
		x := make([]float32, m*k)
		for i := range x {
			x[i] = r.Float32() - 0.5
		}
		copy(x[pos*k:], row)
		out := make([]float32, m*n)
		for i := range out {
			out[i] = r.Float32()
		}
		copy(out[pos*n:], init)
		b.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, accumulate)
		return out[pos*n : (pos+1)*n]
	}
	want, wantAcc := mul(one, 1, 0, false), mul(one, 1, 0, true)
	for _, m := range []int{1, 2, 3, 5, 6, 7, 12, 13, 111, 112, 113, 200} {
		for _, pos := range []int{0, m / 2, m - 1} {
			for _, b := range []*Backend{one, two} {
				assert.Equal(t, want, mul(b, m, pos, false), "M %d, row %d, %d threads", m, pos, b.Threads())
				assert.Equal(t, wantAcc, mul(b, m, pos, true), "accumulate: M %d, row %d, %d threads", m, pos, b.Threads())
			}
		}
	}

	// The values are MatMul's: against a float64 sum of the products of
	// the row (rounded to bf16 under kernels.MatMulBF16) by the weights.
	wrow := make([]float32, k)
	for j := range n {
		w.Row(wrow, j)
		var s, mag float64
		for p, v := range row {
			if prec == kernels.MatMulBF16 {
				v = kernels.BF16ToF32(kernels.F32ToBF16(v))
			}
			s += float64(v) * float64(wrow[p])
			mag += math.Abs(float64(v) * float64(wrow[p]))
		}
		require.InDelta(t, s, float64(want[j]), 1e-5*mag+1e-7, "output %d", j)
	}

	// Not vacuous: the default mode's M = 1, 2 and 112 do not all agree.
	for _, b := range []*Backend{one, two} {
		b.SetBatchInvariant(false)
	}
	base := mul(one, 3, 1, false)
	differ := false
	for _, m := range []int{1, 2, 112} {
		differ = differ || !equalF32(base, mul(one, m, m-1, false))
	}
	if one.SIMD() != "generic" && dt != kernels.F16 {
		assert.True(t, differ, "the default mode is batch-dependent here (else this test proves nothing)")
	}
}

func equalF32(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// TestSwiGLUPositionInvariant: an element's SwiGLU does not depend on
// where it falls in the tensor (before, the last few elements of a range
// took the scalar math.Exp and the others the vector exp, which differ in
// the last bit), on every SIMD path and thread count.
func TestSwiGLUPositionInvariant(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *Backend) {
		r := rand.New(rand.NewPCG(5, 6))
		g0, u0 := r.Float32()*8-4, r.Float32()*2-1
		var want float32
		for k, n := range []int{1, 7, 16, 17, 40, 100, 5000, 70001} {
			gate, up := make([]float32, n), make([]float32, n)
			for i := range gate {
				gate[i], up[i] = r.Float32()*8-4, r.Float32()*2-1
			}
			for _, pos := range []int{0, n / 2, n - 1} {
				gate[pos], up[pos] = g0, u0
			}
			out := make([]float32, n)
			b.SwiGLU(kernels.HostF32(out), kernels.HostF32(gate), kernels.HostF32(up))
			if k == 0 {
				want = out[0]
			}
			for _, pos := range []int{0, n / 2, n - 1} {
				assert.Equal(t, want, out[pos], "n %d, element %d", n, pos)
			}
		}
	})
}

// BenchmarkMatMulBatchInvariant is MatMul at Qwen3-0.6B's MLP shape (bf16
// weights 3072×1024) with and without batch invariance: padding costs the
// batches below a whole row group (mr) arithmetic, packing is given up
// from mDirect rows. GFLOP/s counts the rows asked for, not the padding.
func BenchmarkMatMulBatchInvariant(b *testing.B) {
	be := New(0)
	defer be.Close()
	r := rand.New(rand.NewPCG(1, 2))
	n, k := 3072, 1024
	w := invariantWeights(r, kernels.BF16, n, k)
	for _, m := range []int{1, 2, 4, 8, 64, 128} {
		x := make([]float32, m*k)
		for i := range x {
			x[i] = r.Float32() - 0.5
		}
		out := make([]float32, m*n)
		for _, inv := range []bool{false, true} {
			b.Run(fmt.Sprintf("M%d/invariant=%v", m, inv), func(b *testing.B) {
				be.SetBatchInvariant(inv)
				defer be.SetBatchInvariant(false)
				for b.Loop() {
					be.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, false)
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
