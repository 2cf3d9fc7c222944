package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// RoPE checks the in-place rotate-half rotation at head dims 16/64/128,
// T = 1, several heads, Qwen3's theta and positions up to 40959.
func RoPE(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		t, heads, dim int
		theta         float64
		maxPos        int
	}{
		{1, 1, 2, 10000, 0}, {1, 16, 128, 1e6, 5}, {5, 3, 16, 10000, 100}, {17, 8, 64, 1e6, 40959},
		{64, 2, 128, 1e6, 4096}, {3, 1, 6, 500, 10},
	}
	for _, c := range cases {
		name := fmt.Sprintf("T%d_H%d_D%d_theta%g", c.t, c.heads, c.dim, c.theta)
		t.Run(name, func(t *testing.T) {
			rng := newRNG("RoPE" + name)
			x := uniform(rng, c.t*c.heads*c.dim, 2)
			pos := make([]int32, c.t)
			for i := range pos {
				pos[i] = int32(rng.IntN(c.maxPos + 1))
			}
			pos[0] = int32(c.maxPos)
			want := clone(x)
			r.RoPE(kernels.HostF32(want), kernels.HostI32(pos), c.heads, c.dim, c.theta)
			got := padded(x, 3)
			b.RoPE(kernels.HostF32(got), kernels.HostI32(pos), c.heads, c.dim, c.theta)
			CheckClose(t, "x", got[:len(x)], want, Tolerance("RoPE"))
			CheckExact(t, "x past T·H·D", got[len(x):], padded(nil, 3))
		})
	}
}
