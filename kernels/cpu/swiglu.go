package cpu

import (
	"math"

	"github.com/x/kernels"
)

// SwiGLU: out[N] = silu(gate)·up; out may alias gate or up. The AVX-512
// path evaluates exp with a degree-5 polynomial (≤ 2 ulp) and VSCALEFPS.
func (b *Backend) SwiGLU(out, gate, up []float32) {
	kernels.CheckSwiGLU(out, gate, up)
	n := len(out)
	b.elementwise(n, func(lo, hi int) {
		if b.simd.avx512 {
			if n16 := (hi - lo) &^ (vecSz - 1); n16 > 0 {
				swigluAsm(&out[lo], &gate[lo], &up[lo], n16)
				lo += n16
			}
		}
		for i := lo; i < hi; i++ {
			g := gate[i]
			out[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
		}
	})
}
