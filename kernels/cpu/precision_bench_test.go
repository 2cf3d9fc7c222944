package cpu

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
)

// BenchmarkMatMulPrecision compares kernels.MatMulExact and kernels.MatMulBF16 side by
// side, interleaved per shape, on bf16 weights at Qwen3-0.6B's shapes:
// decode (M 1), batched decode (M 8, 64) and prefill (M 512). kernels.MatMulBF16
// includes rounding x, as a model step pays it.
func BenchmarkMatMulPrecision(b *testing.B) {
	be := New(0)
	defer be.Close()
	shapes := [][3]int{{1, 3072, 1024}, {8, 3072, 1024}, {64, 3072, 1024}, {512, 1024, 1024}, {512, 3072, 1024}, {512, 1024, 3072}}
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		w := benchMat(kernels.BF16, n, k)
		x, out := benchVec(m*k), make([]float32, m*n)
		for _, p := range []kernels.MatMulPrecision{kernels.MatMulExact, kernels.MatMulBF16} {
			b.Run(fmt.Sprintf("M%d_N%d_K%d/%s", m, n, k, p), func(b *testing.B) {
				if err := be.SetMatMulPrecision(p); err != nil {
					b.Fatal(err)
				}
				be.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, false)
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for range b.N {
					be.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, false)
				}
				flops(b, 2*float64(m*n*k), cpu0)
			})
		}
	}
}
