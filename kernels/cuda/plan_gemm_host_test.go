//go:build cudahost

package cuda

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestGemmSmemMatchesKernels checks plan_gemm.go's dynamic shared memory
// per gemm_bf16 variant, which the device launcher passes to
// cuLaunchKernel, against matmul.cu's own layout (TC::kSmem), which the
// kernels index and the host entries allocate: a launch with less would
// overrun shared memory on the GPU.
func TestGemmSmemMatchesKernels(t *testing.T) {
	for _, large := range []bool{false, true} {
		for _, wt := range []bool{false, true} {
			for _, terms := range []int{termsBF16, termsExact} {
				v := gemmVariant{large: large, wt: wt, terms: terms}
				t.Run(fmt.Sprintf("%+v", v), func(t *testing.T) {
					assert.Equal(t, gemmBF16SmemKernel(v), gemmBF16Smem(v))
				})
			}
		}
	}
}
