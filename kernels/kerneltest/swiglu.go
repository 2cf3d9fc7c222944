package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// SwiGLU checks out = silu(gate)·up, in place on gate or up or not, with
// gates large enough (±90) that exp overflows float32 on one side.
func SwiGLU(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		n     int
		scale float64
		alias string
	}{
		{1, 1, ""}, {15, 4, "gate"}, {16, 4, "up"}, {1000, 8, ""}, {4099, 90, ""}, {3072 * 4, 6, "gate"},
	}
	for _, c := range cases {
		name := fmt.Sprintf("N%d_scale%g_alias%s", c.n, c.scale, c.alias)
		t.Run(name, func(t *testing.T) {
			rng := newRNG("SwiGLU" + name)
			gate := uniform(rng, c.n, c.scale)
			up := uniform(rng, c.n, 2)
			want := make([]float32, c.n)
			r.SwiGLU(kernels.HostF32(want), kernels.HostF32(gate), kernels.HostF32(up))
			g, u := clone(gate), clone(up)
			var got []float32
			switch c.alias {
			case "gate":
				got = g
			case "up":
				got = u
			default:
				got = make([]float32, c.n)
			}
			b.SwiGLU(kernels.HostF32(got), kernels.HostF32(g), kernels.HostF32(u))
			CheckClose(t, "out", got, want, Tolerance("SwiGLU"))
		})
	}
}
