package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// RMSNormBackward checks dx (=) and dw (+=, from a random start) against
// the reference: T = 1, C = 1, C not divisible by the SIMD width, per-head
// norm shapes (C = head dim, many rows), rows of large and tiny values, and
// shapes big enough for a parallel backend to split. It also requires a
// repeated call to give bitwise the same result. (C = 1 uses |x| ≲ 1e-3,
// where eps matters: at |x| ≫ √eps the row's output is w·sign(x), dx is the
// float32 cancellation residue of two O(1) terms, and NMSE is meaningless.)
func RMSNormBackward(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		rows, cols int
		scale      float64
	}{
		{1, 1, 1e-3}, {1, 7, 1}, {3, 17, 1}, {5, 128, 1}, {2, 1027, 1000}, {32, 128, 1e-3},
		{64, 1024, 1}, {17, 4099, 1}, {1024, 16, 1}, {4, 64, 1e-4},
	}
	for _, c := range cases {
		name := fmt.Sprintf("R%d_C%d_scale%g", c.rows, c.cols, c.scale)
		t.Run(name, func(t *testing.T) {
			rng := newRNG("RMSNormBackward" + name)
			n := c.rows * c.cols
			x := uniform(rng, n, c.scale)
			w := uniform(rng, c.cols, 2)
			dout := uniform(rng, n, 1)
			dw0 := uniform(rng, c.cols, 1)
			const eps = 1e-6
			wantDx, wantDw := make([]float32, n), clone(dw0)
			r.RMSNormBackward(kernels.HostF32(wantDx), kernels.HostF32(wantDw), kernels.HostF32(dout), kernels.HostF32(x), kernels.HostF32(w), c.rows, c.cols, eps)

			run := func() (dx, dw []float32) {
				dx, dw = bwNaNs(n), padded(dw0, bwPad)
				b.RMSNormBackward(kernels.HostF32(dx), kernels.HostF32(dw), kernels.HostF32(dout), kernels.HostF32(x), kernels.HostF32(w), c.rows, c.cols, eps)
				return dx, dw
			}
			dx, dw := run()
			CheckClose(t, "dx", dx[:n], wantDx, Tolerance("RMSNormBackward"))
			CheckClose(t, "dw", dw[:c.cols], wantDw, Tolerance("RMSNormBackward"))
			CheckExact(t, "dx past R·C", dx[n:], padded(nil, bwPad))
			CheckExact(t, "dw past C", dw[c.cols:], padded(nil, bwPad))
			dx2, dw2 := run()
			CheckExact(t, "dx repeated call", dx2, dx)
			CheckExact(t, "dw repeated call", dw2, dw)
		})
	}
}
