package cpu

import "math"

// SwiGLU: out[N] = silu(gate)·up; out may alias gate or up.
func (b *Backend) SwiGLU(out, gate, up []float32) {
	const op = "SwiGLU"
	n := len(out)
	need(op, "gate", len(gate), n)
	need(op, "up", len(up), n)
	b.elementwise(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := gate[i]
			out[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
		}
	})
}
