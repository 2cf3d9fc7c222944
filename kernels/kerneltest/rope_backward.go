package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// RoPEBackward checks the inverse rotation against the reference, and that
// it undoes the backend's own forward RoPE (a rotation's transpose is its
// inverse), at D = 2, D not a multiple of the SIMD width, head dims 64 and
// 128, large positions and theta 1e6.
func RoPEBackward(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		t, heads, dim int
		pos0          int32
		theta         float64
	}{
		{1, 1, 2, 0, 1e4}, {3, 2, 16, 0, 1e4}, {5, 16, 128, 40000, 1e6}, {7, 3, 24, 9, 1e4},
		{64, 16, 128, 0, 1e6}, {33, 8, 64, 1000, 1e4},
	}
	for _, c := range cases {
		name := fmt.Sprintf("T%d_H%d_D%d_pos%d_theta%g", c.t, c.heads, c.dim, c.pos0, c.theta)
		t.Run(name, func(t *testing.T) {
			rng := newRNG("RoPEBackward" + name)
			n := c.t * c.heads * c.dim
			pos := make([]int32, c.t)
			for i := range pos {
				pos[i] = c.pos0 + int32(i*i%97) // not monotone, repeats allowed
			}
			dy := uniform(rng, n, 1)
			want := clone(dy)
			r.RoPEBackward(kernels.HostF32(want), kernels.HostI32(pos), c.heads, c.dim, c.theta)
			got := padded(dy, bwPad)
			b.RoPEBackward(kernels.HostF32(got), kernels.HostI32(pos), c.heads, c.dim, c.theta)
			CheckClose(t, "dx", got[:n], want, Tolerance("RoPEBackward"))
			CheckExact(t, "dx past T·H·D", got[n:], padded(nil, bwPad))
			again := clone(dy)
			b.RoPEBackward(kernels.HostF32(again), kernels.HostI32(pos), c.heads, c.dim, c.theta)
			CheckExact(t, "repeated call", again, got[:n])

			// Round trip: RoPE then RoPEBackward is the identity, up to
			// two roundings of a rotation (same tolerance).
			rt := clone(dy)
			b.RoPE(kernels.HostF32(rt), kernels.HostI32(pos), c.heads, c.dim, c.theta)
			b.RoPEBackward(kernels.HostF32(rt), kernels.HostI32(pos), c.heads, c.dim, c.theta)
			CheckClose(t, "RoPEBackward(RoPE(x))", rt, dy, Tolerance("RoPEBackward"))
		})
	}
}
