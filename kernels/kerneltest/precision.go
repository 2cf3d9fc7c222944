package kerneltest

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// MatMulBF16 checks a backend's kernels.MatMulBF16 precision, or skips
// when the backend does not implement kernels.MatMulPrecisionSetter. With
// it set: for bf16 weights MatMul must equal kernels/ref's MatMul of x
// rounded to bf16 (nearest, ties to even) within MatMul's own tolerance
// (the products of bf16 values are exact in float32, so only the float32
// summation differs, as at the exact precision), and lie within the
// rounding's bound of the exact product, |Δ| ≤ 2⁻⁸·Σ|x||w| + ATol; for f32
// and f16 weights MatMul, and MatMulNN and MatMulTN for every weight, stay
// exact (the MatMul family for f32/f16 and MatMulNN's for bf16 weights, and
// MatMulTN's, at this precision); and MatMul
// stays batch-invariant (MatMulBatchInvariance). The precision the backend
// had is restored at the end.
func MatMulBF16(t *testing.T, b kernels.Backend) {
	ps, ok := b.(kernels.MatMulPrecisionSetter)
	if !ok {
		t.Skipf("%T does not implement kernels.MatMulPrecisionSetter", b)
	}
	defer restorePrecision(t, ps)()
	require.NoError(t, ps.SetMatMulPrecision(kernels.MatMulBF16))
	require.Equal(t, kernels.MatMulBF16, ps.MatMulPrecision())
	tol := Tolerance("MatMul")
	t.Run("rounded", func(t *testing.T) {
		for _, s := range matmulShapes() {
			m, n, k := s[0], s[1], s[2]
			for _, acc := range []bool{false, true} {
				name := matmulCaseName(m, n, k, kernels.BF16, acc)
				t.Run(name, func(t *testing.T) {
					x, w, init := MatMulInputs("MatMul", m, n, k, kernels.BF16, acc)
					xr := make([]float32, len(x))
					for i, v := range x {
						xr[i] = kernels.BF16ToF32(kernels.F32ToBF16(v))
					}
					want, exact := clone(init), clone(init)
					ref.Backend{}.MatMul(kernels.HostF32(want), kernels.HostF32(xr), w, m, acc)
					ref.Backend{}.MatMul(kernels.HostF32(exact), kernels.HostF32(x), w, m, acc)
					got := clone(init)
					b.MatMul(kernels.HostF32(got), kernels.HostF32(x), w, m, acc)
					CheckClose(t, "out vs reference on rounded x", got, want, matmulTol("MatMul", k))
					for i := range m {
						for j := range n {
							var s float64
							for r := range k {
								s += math.Abs(float64(x[i*k+r]) * float64(w.At(j, r)))
							}
							bound := s/256 + tol.ATol
							d := math.Abs(float64(got[i*n+j]) - float64(exact[i*n+j]))
							if !assert.LessOrEqualf(t, d, bound, "out[%d,%d] off the exact product by more than bf16 rounding of x allows", i, j) {
								return
							}
						}
					}
				})
			}
		}
	})
	t.Run("exact", func(t *testing.T) {
		// f32 and f16 weights, and the gradients, ignore the precision
		// (MatMulNN with bf16 weights, the one that shares MatMul's
		// kernels; the other dtypes take the f32 path at any precision).
		matmulFamily(t, "MatMul", b.MatMul, ref.Backend{}.MatMul, func(n, k int) (int, int) { return k, n }, []kernels.DType{kernels.F32, kernels.F16})
		matmulFamily(t, "MatMulNN", b.MatMulNN, ref.Backend{}.MatMulNN, func(n, k int) (int, int) { return n, k }, []kernels.DType{kernels.BF16})
		MatMulTN(t, b)
	})
	t.Run("batch", func(t *testing.T) { MatMulBatchInvariance(t, b) })
	assert.Equal(t, kernels.MatMulBF16, ps.MatMulPrecision(), "the precision stays set")
}

// restorePrecision returns a func that sets ps back to the precision it
// has now (for a defer).
func restorePrecision(t *testing.T, ps kernels.MatMulPrecisionSetter) func() {
	prev := ps.MatMulPrecision()
	return func() { require.NoError(t, ps.SetMatMulPrecision(prev)) }
}
