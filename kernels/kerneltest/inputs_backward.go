package kerneltest

import "math"

// bwPad is how many sentinel NaNs follow every output of the backward
// checks, so a kernel that writes past its shape is caught.
const bwPad = 3

// bwNaNs returns n NaNs followed by bwPad sentinels: the starting value of
// an output the kernel must overwrite (=), which a kernel that accumulates
// into it instead would leave NaN.
func bwNaNs(n int) []float32 {
	out := make([]float32, n+bwPad)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	return out
}
