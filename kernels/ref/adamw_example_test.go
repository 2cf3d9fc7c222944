package ref_test

import (
	"fmt"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// One AdamW step from zero moments moves each parameter by about lr
// against the sign of its gradient (the bias-corrected update is
// lr·g/(|g|+eps)), plus the decoupled weight decay param·lr·wd.
func ExampleBackend_AdamW() {
	param := []float32{1, -2}
	grad := []float32{0.5, -0.25}
	m, v := make([]float32, 2), make([]float32, 2)
	p := kernels.AdamWParams{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}
	ref.Backend{}.AdamW(kernels.HostF32(param), kernels.HostF32(grad), kernels.HostF32(m), kernels.HostF32(v), p, 1)
	fmt.Printf("param %.5f %.5f\nm %.3f %.4f\n", param[0], param[1], m[0], m[1])
	// Output:
	// param 0.98900 -1.98800
	// m 0.050 -0.0250
}
