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
	w := kernels.Mat{DType: kernels.BF16, Rows: 2, Cols: 3, U16: make([]uint16, len(wf))}
	for i, f := range wf {
		w.U16[i] = kernels.F32ToBF16(f)
	}
	out := make([]float32, 2)
	b.MatMul(out, []float32{1, 2, 3}, w, 1, false)
	fmt.Println(out)
	// Output: [-2 3]
}

// Sample draws from logits with a caller-owned uniform u, so a seeded
// stream per sequence gives the same tokens whatever the batch layout.
func ExampleBackend_Sample() {
	b := cpu.New(1)
	defer b.Close()
	logits := []float32{1, 3, 2, -1}
	id, logp := b.Sample(logits, kernels.SamplingParams{Temperature: 1, TopK: 1}, 0.42, nil)
	fmt.Println(id, logp)
	// Output: 1 0
}
