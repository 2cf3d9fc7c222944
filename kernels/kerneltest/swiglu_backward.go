package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// SwiGLUBackward checks dgate and dup (both =) against the reference, at
// lengths around the SIMD width and a parallel backend's chunk size, with
// gates in the saturated range (|gate| up to 100, where exp(−gate)
// overflows float32).
func SwiGLUBackward(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		n         int
		gateScale float64
	}{
		{1, 1}, {15, 4}, {16, 4}, {17, 4}, {1000, 8}, {8193, 4}, {3*8192 + 5, 2}, {257, 100},
	}
	for _, c := range cases {
		name := fmt.Sprintf("N%d_gate%g", c.n, c.gateScale)
		t.Run(name, func(t *testing.T) {
			rng := newRNG("SwiGLUBackward" + name)
			gate := uniform(rng, c.n, c.gateScale)
			up := uniform(rng, c.n, 2)
			dout := uniform(rng, c.n, 1)
			wantG, wantU := make([]float32, c.n), make([]float32, c.n)
			r.SwiGLUBackward(kernels.HostF32(wantG), kernels.HostF32(wantU), kernels.HostF32(dout), kernels.HostF32(gate), kernels.HostF32(up))
			run := func() (dg, du []float32) {
				dg, du = bwNaNs(c.n), bwNaNs(c.n)
				b.SwiGLUBackward(kernels.HostF32(dg), kernels.HostF32(du), kernels.HostF32(dout), kernels.HostF32(gate), kernels.HostF32(up))
				return dg, du
			}
			dg, du := run()
			CheckClose(t, "dgate", dg[:c.n], wantG, Tolerance("SwiGLUBackward"))
			CheckClose(t, "dup", du[:c.n], wantU, Tolerance("SwiGLUBackward"))
			CheckExact(t, "dgate past N", dg[c.n:], padded(nil, bwPad))
			CheckExact(t, "dup past N", du[c.n:], padded(nil, bwPad))
			dg2, du2 := run()
			CheckExact(t, "dgate repeated call", dg2, dg)
			CheckExact(t, "dup repeated call", du2, du)
		})
	}
}
