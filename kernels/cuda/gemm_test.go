//go:build cudahost || cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
)

// TestSeamMatMulNNSameSum: MatMul(x, w) and MatMulNN(x, wᵀ) compute the
// same sum bit for bit at the exact precision, for every weight dtype and
// M: the model's training forward adds a LoRA update as MatMulNN(u, Bᵀ)
// where inference (sampling) uses MatMul(u, B), so a sampled token's
// log-prob equals the training forward's only if the two agree (and
// MatMulNN, like MatMul, must not split by M).
func TestSeamMatMulNNSameSum(t *testing.T) {
	d := newTestDevice(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16, kernels.F16} {
		for _, s := range [][3]int{{1, 1024, 16}, {64, 1024, 64}, {300, 70, 200}, {5, 33, 4160}} {
			m, n, k := s[0], s[1], s[2]
			t.Run(fmt.Sprintf("%s_M%d_N%d_K%d", dt, m, n, k), func(t *testing.T) {
				x := make([]float32, m*k)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				w, wt := make([]float32, n*k), make([]float32, k*n)
				for i := range n {
					for j := range k {
						v := float32(rng.NormFloat64())
						w[i*k+j], wt[j*n+i] = v, v
					}
				}
				init := make([]float32, m*n)
				for i := range init {
					init[i] = float32(rng.NormFloat64())
				}
				a, b := append([]float32(nil), init...), append([]float32(nil), init...)
				d.MatMul(kernels.HostF32(a), kernels.HostF32(x), kerneltest.ToMat(dt, w, n, k), m, true)
				d.MatMulNN(kernels.HostF32(b), kernels.HostF32(x), kerneltest.ToMat(dt, wt, k, n), m, true)
				require.NoError(t, d.Err())
				kerneltest.CheckExact(t, "MatMulNN(x, wᵀ) vs MatMul(x, w)", b, a)
			})
		}
	}
}
