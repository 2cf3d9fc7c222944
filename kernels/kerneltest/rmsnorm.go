package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// RMSNorm checks out[R,C] = w·x/rms(x), in place and not, including rows
// of large values and C not divisible by the SIMD width.
func RMSNorm(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		rows, cols int
		scale      float64
		alias      bool
	}{
		{1, 1, 1, false}, {1, 16, 1, false}, {3, 17, 1, true}, {7, 128, 1, false}, {2, 1027, 1, false},
		{5, 1024, 1000, true}, {32, 128, 1e-3, false}, {2, 4096, 1, false}, {200, 64, 1, false},
	}
	for _, c := range cases {
		name := fmt.Sprintf("R%d_C%d_scale%g_alias%v", c.rows, c.cols, c.scale, c.alias)
		t.Run(name, func(t *testing.T) {
			rng := newRNG("RMSNorm" + name)
			x := uniform(rng, c.rows*c.cols, c.scale)
			w := uniform(rng, c.cols, 2)
			const eps = 1e-6
			want := make([]float32, len(x))
			r.RMSNorm(kernels.HostF32(want), kernels.HostF32(x), kernels.HostF32(w), c.rows, c.cols, eps)
			var got []float32
			if c.alias {
				got = padded(x, 3)
				b.RMSNorm(kernels.HostF32(got), kernels.HostF32(got), kernels.HostF32(w), c.rows, c.cols, eps)
			} else {
				got = padded(make([]float32, len(x)), 3)
				b.RMSNorm(kernels.HostF32(got), kernels.HostF32(x), kernels.HostF32(w), c.rows, c.cols, eps)
			}
			CheckClose(t, "out", got[:len(x)], want, Tolerance("RMSNorm"))
			CheckExact(t, "out past R·C", got[len(x):], padded(nil, 3))
		})
	}
}
