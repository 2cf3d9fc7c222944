package cpu_test

import (
	"fmt"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
)

// A Backend owns worker goroutines: create one per model, use it from one
// goroutine at a time, and Close it when done.
func ExampleNew() {
	b := cpu.New(0) // one thread per CPU
	defer b.Close()

	// out[1,2] = x[1,3] · wᵀ with w a [2,3] bf16 weight (torch Linear layout).
	wf := []float32{1, 0, -1, 0.5, 0.5, 0.5}
	u := make([]uint16, len(wf))
	for i, f := range wf {
		u[i] = kernels.F32ToBF16(f)
	}
	w := kernels.MatBF16(u, 2, 3)
	out := make([]float32, 2)
	b.MatMul(kernels.HostF32(out), kernels.HostF32([]float32{1, 2, 3}), w, 1, false)
	fmt.Println(out)
	// Output: [-2 3]
}

// SampleRows draws one token per row with caller-owned uniforms u, so a
// seeded stream per sequence gives the same tokens whatever the batch
// layout. Top-k 1 keeps one token: its sampled log-prob is 0, its full
// log-prob (what training computes) is log softmax(logits)[1].
func ExampleBackend_SampleRows() {
	b := cpu.New(1)
	defer b.Close()
	logits := []float32{1, 3, 2, -1}
	ids, logp, full := make([]int32, 1), make([]float32, 1), make([]float32, 1)
	b.SampleRows(kernels.HostI32(ids), kernels.HostF32(logp), kernels.HostF32(full), kernels.HostF32(logits), kernels.HostSampleArgs([]kernels.SamplingParams{{Temperature: 1, TopK: 1}}, []float64{0.42}), 1, 4)
	fmt.Printf("%d %.0f %.4f\n", ids[0], logp[0], full[0])
	// Output: 1 0 -0.4197
}
