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

// swiGLU is SwiGLU on host slices. On a SIMD path every element goes
// through the vector kernel, the last few (fewer than a vector) through
// it on a zero-padded copy: the vector exp and the scalar math.Exp differ
// in the last bit, and an element's result must not depend on where it
// falls in the tensor (how many rows share the call: batch invariance).
func (b *Backend) swiGLU(out, gate, up []float32) {
	n := len(out)
	b.elementwise(n, func(lo, hi int) {
		var width int
		var kernel func(out, gate, up *float32, n int)
		switch b.simd.isa() {
		case isaAVX512:
			width, kernel = 16, swigluAsm
		case isaAVX2:
			width, kernel = 8, swigluAVX2
		default:
			for i := lo; i < hi; i++ {
				g := gate[i]
				out[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
			}
			return
		}
		if body := (hi - lo) / width * width; body > 0 {
			kernel(&out[lo], &gate[lo], &up[lo], body)
			lo += body
		}
		if lo < hi {
			var o, g, u [16]float32
			copy(g[:], gate[lo:hi])
			copy(u[:], up[lo:hi])
			kernel(&o[0], &g[0], &u[0], width)
			copy(out[lo:hi], o[:hi-lo])
		}
	})
}
