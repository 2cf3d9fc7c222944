package ref

import (
	"math"

	"github.com/x/kernels"
)

// SwiGLU: out[N] = silu(gate[N]) * up[N]; out may alias gate or up.
func (Backend) SwiGLU(out, gate, up kernels.Buffer) {
	kernels.CheckSwiGLU(out, gate, up)
	swiGLU(out.F32(), gate.F32(), up.F32())
}

// swiGLU is SwiGLU on host slices.
func swiGLU(out, gate, up []float32) {
	n := len(out)
	for i := 0; i < n; i++ {
		g := float64(gate[i])
		out[i] = float32(g / (1 + math.Exp(-g)) * float64(up[i]))
	}
}
