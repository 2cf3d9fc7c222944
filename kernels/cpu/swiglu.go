package cpu

import (
	"math"

	"github.com/x/kernels"
)

// SwiGLU: out[N] = silu(gate)·up; out may alias gate or up. The SIMD
// paths evaluate exp with a degree-5 polynomial (≤ 2 ulp) and a power-of-two
// scale (VSCALEFPS on AVX-512, exponent arithmetic on AVX2); a remainder
// shorter than a vector runs in Go.
func (b *Backend) SwiGLU(out, gate, up kernels.Buffer) {
	kernels.CheckSwiGLU(out, gate, up)
	b.swiGLU(out.F32(), gate.F32(), up.F32())
}

// swiGLU is SwiGLU on host slices.
func (b *Backend) swiGLU(out, gate, up []float32) {
	n := len(out)
	b.elementwise(n, func(lo, hi int) {
		switch v := b.simd.isa(); {
		case v == isaAVX512 && hi-lo >= 16:
			n16 := (hi - lo) &^ 15
			swigluAsm(&out[lo], &gate[lo], &up[lo], n16)
			lo += n16
		case v == isaAVX2 && hi-lo >= 8:
			n8 := (hi - lo) &^ 7
			swigluAVX2(&out[lo], &gate[lo], &up[lo], n8)
			lo += n8
		}
		for i := lo; i < hi; i++ {
			g := gate[i]
			out[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
		}
	})
}
