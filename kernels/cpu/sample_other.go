//go:build !amd64

package cpu

func expRowAVX2(dst *float64, x *float32, n int, c *[2]float64) {
	panic("kernels/cpu: no SIMD kernels on this architecture")
}

// vecExpExact: no vector exp off amd64 (SampleRows calls math.Exp).
func vecExpExact() bool { return false }
