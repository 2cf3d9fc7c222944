package ref

import (
	"math"

	"github.com/x/kernels"
)

// SwiGLUBackward computes, for out = silu(gate)·up with
// silu(z) = z·sigmoid(z):
//
//	dgate = dout·up·σ(gate)·(1 + gate·(1 − σ(gate)))
//	dup   = dout·silu(gate)
//
// in float64. It reads gate[i], up[i] and dout[i] before writing dgate[i]
// and dup[i], so any of the buffers may alias each other element for
// element (dgate on gate, dup on up).
func (Backend) SwiGLUBackward(dgate, dup, dout, gate, up kernels.Buffer) {
	kernels.CheckSwiGLUBackward(dgate, dup, dout, gate, up)
	swiGLUBackward(dgate.F32(), dup.F32(), dout.F32(), gate.F32(), up.F32())
}

// swiGLUBackward is SwiGLUBackward on host slices.
func swiGLUBackward(dgate, dup, dout, gate, up []float32) {
	n := len(dout)
	for i := range n {
		g, u, d := float64(gate[i]), float64(up[i]), float64(dout[i])
		s := 1 / (1 + math.Exp(-g))
		dgate[i] = float32(d * u * s * (1 + g*(1-s)))
		dup[i] = float32(d * g * s)
	}
}
