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
