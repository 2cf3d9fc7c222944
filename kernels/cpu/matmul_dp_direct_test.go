package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// TestDPNTKernels checks every dpNT block shape (mr ≤ dpMR x rows × nr ≤
// dpNR weight rows) directly, with row strides wider than the rows and
// both accumulate modes, against the float64 sum of the same bf16
// products. Each product of two bf16 values is exact in float32, so the
// kernel's only error is its float32 summation: at most
// (steps + 20)·2⁻²⁴·Σ|x||w| (steps additions per lane, 16 pair additions
// inside VDPBF16PS and the 4-level lane reduction, then the accumulate
// add). Outputs outside the block must be left untouched.
func TestDPNTKernels(t *testing.T) {
	if f := detect(); !f.avx512 || !f.avx512bf16 {
		t.Skip("this CPU lacks AVX-512 F/BW/VL/DQ with AVX512_BF16 (or GODEBUG turned one off)")
	}
	const (
		ldxPad = 48 // extra bf16 elements per x row
		ldwPad = 16 // per weight row
		ldoPad = 5  // extra float32 per output row
	)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, steps := range []int{0, 1, 3} {
		k := steps * dpK
		for mr := 1; mr <= dpMR; mr++ {
			for nr := 1; nr <= dpNR; nr++ {
				for _, acc := range []bool{false, true} {
					t.Run(fmt.Sprintf("%dx%d_steps%d_acc%v", mr, nr, steps, acc), func(t *testing.T) {
						ldx, ldw, ldo := k+ldxPad, k+ldwPad, nr+ldoPad
						x := bf16Values(rng, mr*ldx)
						w := bf16Values(rng, nr*ldw)
						out := uniformF32(rng, mr*ldo, 1)
						init := append([]float32(nil), out...)
						dpNTAsm(mr, nr, &x[0], ldx*2, unsafe.Pointer(&w[0]), ldw*2, steps, &out[0], ldo*4, b2i(acc))
						for i := range mr {
							for j := range ldo {
								got := out[i*ldo+j]
								if j >= nr {
									require.Equalf(t, init[i*ldo+j], got, "out[%d, %d] outside the block was written", i, j)
									continue
								}
								var sum, abs float64
								for c := range k {
									p := float64(kernels.BF16ToF32(x[i*ldx+c])) * float64(kernels.BF16ToF32(w[j*ldw+c]))
									sum += p
									abs += math.Abs(p)
								}
								if acc {
									sum += float64(init[i*ldo+j])
									abs += math.Abs(float64(init[i*ldo+j]))
								}
								bound := float64(steps+20) * math.Ldexp(abs, -24)
								assert.LessOrEqualf(t, math.Abs(float64(got)-sum), bound, "out[%d, %d] = %v, want %v", i, j, got, sum)
							}
						}
					})
				}
			}
		}
	}
}

// bf16Values is n bf16 values uniform in [−1, 1).
func bf16Values(rng *rand.Rand, n int) []uint16 {
	h := make([]uint16, n)
	for i, v := range uniformF32(rng, n, 1) {
		h[i] = kernels.F32ToBF16(v)
	}
	return h
}

// TestMatMulDPDirectDeterministic checks matMulDPDirect's claim that each
// output's sum order depends on K alone: for every M of the direct path,
// with N spanning several nbDP tasks and a ragged dpNR block and K with
// and without a tail past dpK, the result is bit-identical with one
// thread and two, run to run, and row by row to the same rows multiplied
// two at a time (other row groups) and to the weight rows shifted by one
// (other blocks).
func TestMatMulDPDirectDeterministic(t *testing.T) {
	p := dpPath()
	if p.missing != "" {
		t.Skip(p.missing)
	}
	one, two := pathBackend(t, p, 1), pathBackend(t, p, 2)
	for _, b := range []*Backend{one, two} {
		require.NoError(t, b.SetMatMulPrecision(kernels.MatMulBF16))
	}
	for _, k := range []int{64, 95} {
		for m := 2; m < mBig; m++ {
			n := 2*nbDP + 7
			t.Run(fmt.Sprintf("M%d_N%d_K%d", m, n, k), func(t *testing.T) {
				require.Truef(t, one.dpDirect(kernels.Mat{DType: kernels.BF16}, m), "M %d does not take the direct VDPBF16PS path", m)
				rng := rand.New(rand.NewPCG(uint64(m), uint64(k)))
				x := uniformF32(rng, m*k, 1/math.Sqrt(float64(k)))
				w := randomMat(rng, kernels.BF16, n, k)
				var got [3][]float32
				for i, b := range []*Backend{one, two, two} {
					got[i] = make([]float32, m*n)
					b.MatMul(kernels.HostF32(got[i]), kernels.HostF32(x), w, m, false)
				}
				assert.Equal(t, got[0], got[1], "one thread and two differ")
				assert.Equal(t, got[1], got[2], "two runs differ")
				pair := make([]float32, 2*n)
				for i := 0; i+2 <= m; i++ {
					two.MatMul(kernels.HostF32(pair), kernels.HostF32(x[i*k:(i+2)*k]), w, 2, false)
					require.Equalf(t, got[0][i*n:(i+2)*n], pair, "rows %d–%d of M %d differ from the same rows multiplied alone", i, i+1, m)
				}
				// The weight rows shifted by one: each meets the kernel at
				// another position of its dpNR block and of its task.
				shifted := make([]float32, m*(n-1))
				two.MatMul(kernels.HostF32(shifted), kernels.HostF32(x), kernels.MatBF16(w.Data.BF16()[k:], n-1, k), m, false)
				for i := range m {
					require.Equalf(t, got[0][i*n+1:(i+1)*n], shifted[i*(n-1):(i+1)*(n-1)], "row %d: weight rows 1… differ when multiplied from row 0 and from row 1", i)
				}
			})
		}
	}
}
