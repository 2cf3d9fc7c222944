package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
)

// TestSampleRowsFullLogProbIsLogSoftmaxGather checks SampleRows' contract
// on every SIMD path: each row's full log-prob equals, bit for bit, Scale
// by 1/T (T ≠ 0, 1) then LogSoftmaxGather at the sampled id.
func TestSampleRowsFullLogProbIsLogSoftmaxGather(t *testing.T) {
	forEachPath(t, func(t *testing.T, p simdPath) {
		b := pathBackend(t, p, 2)
		const rows, v = 5, 151936
		r := rand.New(rand.NewPCG(5, 6))
		logits := make([]float32, rows*v)
		for i := range logits {
			logits[i] = float32(4 * r.NormFloat64())
		}
		for _, temp := range []float32{0, 1, 0.7} {
			t.Run(fmt.Sprintf("T%g", temp), func(t *testing.T) {
				params := make([]kernels.SamplingParams, rows)
				u := make([]float64, rows)
				for i := range params {
					params[i] = kernels.SamplingParams{Temperature: temp}
					u[i] = float64(i) / rows
				}
				ids, lp, full := make([]int32, rows), make([]float32, rows), make([]float32, rows)
				b.SampleRows(kernels.HostI32(ids), kernels.HostF32(lp), kernels.HostF32(full), kernels.HostF32(logits), kernels.HostSampleArgs(params, u), rows, v)
				x := append([]float32(nil), logits...)
				if temp != 0 && temp != 1 {
					b.Scale(kernels.HostF32(x), 1/temp)
				}
				want := make([]float32, rows)
				b.LogSoftmaxGather(kernels.HostF32(want), kernels.Buffer{}, kernels.HostF32(x), kernels.HostI32(ids), rows, v)
				kerneltest.CheckExact(t, "fullLogp", full, want)
			})
		}
	})
}
