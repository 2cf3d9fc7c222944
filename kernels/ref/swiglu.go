package ref

import "math"

// SwiGLU: out[N] = silu(gate[N]) * up[N]; out may alias gate or up.
func (Backend) SwiGLU(out, gate, up []float32) {
	const op = "SwiGLU"
	n := len(out)
	need(op, "gate", len(gate), n)
	need(op, "up", len(up), n)
	for i := 0; i < n; i++ {
		g := float64(gate[i])
		out[i] = float32(g / (1 + math.Exp(-g)) * float64(up[i]))
	}
}
