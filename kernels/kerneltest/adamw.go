package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// AdamW checks three consecutive AdamW steps (param, m and v after each)
// against the reference, at N = 0, lengths around the SIMD width and a parallel
// backend's chunk size, with PyTorch's defaults, a large eps with no weight
// decay, and gradients so small that eps dominates the denominator. A
// repeated run from the same state must match bitwise.
func AdamW(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	params := []kernels.AdamWParams{
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01},
		{LR: 0.1, Beta1: 0.5, Beta2: 0.75, Eps: 0.1},
		{LR: 3e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.1},
	}
	gradScales := []float64{1, 1, 1e-7}
	for pi, p := range params {
		for _, n := range []int{0, 1, 15, 16, 17, 1000, 2*16384 + 3} {
			name := fmt.Sprintf("params%d_N%d", pi, n)
			t.Run(name, func(t *testing.T) {
				rng := newRNG("AdamW" + name)
				param0 := uniform(rng, n, 1)
				want := [3][]float32{clone(param0), make([]float32, n), make([]float32, n)}
				got := [3][]float32{padded(param0, bwPad), padded(make([]float32, n), bwPad), padded(make([]float32, n), bwPad)}
				var grads [][]float32
				for step := 1; step <= 3; step++ {
					g := uniform(rng, n, gradScales[pi])
					grads = append(grads, g)
					r.AdamW(kernels.HostF32(want[0]), kernels.HostF32(g), kernels.HostF32(want[1]), kernels.HostF32(want[2]), p, step)
					b.AdamW(kernels.HostF32(got[0][:n]), kernels.HostF32(g), kernels.HostF32(got[1][:n]), kernels.HostF32(got[2][:n]), p, step)
					for i, what := range []string{"param", "m", "v"} {
						CheckClose(t, fmt.Sprintf("step %d %s", step, what), got[i][:n], want[i], Tolerance("AdamW"))
						CheckExact(t, fmt.Sprintf("step %d %s past N", step, what), got[i][n:], padded(nil, bwPad))
					}
				}
				again := [3][]float32{clone(param0), make([]float32, n), make([]float32, n)}
				for step := 1; step <= 3; step++ {
					b.AdamW(kernels.HostF32(again[0]), kernels.HostF32(grads[step-1]), kernels.HostF32(again[1]), kernels.HostF32(again[2]), p, step)
				}
				for i := range again {
					CheckExact(t, "repeated run", again[i], got[i][:n])
				}
			})
		}
	}
}
