package kerneltest

import (
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// LogSoftmaxGatherBackward checks dlogits (=) against the reference on the
// forward's logit cases (V = 1, −Inf entries, offsets of 5e4, the Qwen3
// vocabulary with few rows), with a zero dlogp row, without and with an
// entropy gradient (a zero dentropy row too), and requires the in-place
// call (dlogits aliasing logits, which the contract allows) to give bitwise
// the same result as a separate output.
func LogSoftmaxGatherBackward(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	for _, c := range logitCases() {
		for _, withEnt := range []bool{false, true} {
			name := c.name()
			if withEnt {
				name += "_entropy"
			}
			t.Run(name, func(t *testing.T) {
				x, targets := c.logits("LogSoftmaxGatherBackward" + c.name())
				dlogp := uniform(newRNG("dlogp"+name), c.rows, 2)
				if c.rows > 2 {
					dlogp[1] = 0
				}
				var dent []float32
				tol := Tolerance("LogSoftmaxGatherBackward")
				if withEnt {
					dent = uniform(newRNG("dent"+name), c.rows, 2)
					if c.rows > 3 {
						dent[2] = 0
					}
					tol = Tolerance("EntropyBackward")
				}
				n := c.rows * c.v
				want := make([]float32, n)
				r.LogSoftmaxGatherBackward(kernels.HostF32(want), kernels.HostF32(x), kernels.HostI32(targets), kernels.HostF32(dlogp), kernels.HostF32(dent), c.rows, c.v)
				got := bwNaNs(n)
				b.LogSoftmaxGatherBackward(kernels.HostF32(got), kernels.HostF32(x), kernels.HostI32(targets), kernels.HostF32(dlogp), kernels.HostF32(dent), c.rows, c.v)
				CheckClose(t, "dlogits", got[:n], want, tol)
				CheckExact(t, "dlogits past R·V", got[n:], padded(nil, bwPad))
				inPlace := padded(x, bwPad)
				b.LogSoftmaxGatherBackward(kernels.HostF32(inPlace), kernels.HostF32(inPlace), kernels.HostI32(targets), kernels.HostF32(dlogp), kernels.HostF32(dent), c.rows, c.v)
				CheckExact(t, "in place (dlogits = logits)", inPlace, got)
			})
		}
	}
}
