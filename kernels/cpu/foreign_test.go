package cpu

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/kernels"
)

// fakeDeviceMem is an allocation of some device backend: a CPU Backend
// holds no device memory, so a Buffer over it is a programmer error.
type fakeDeviceMem int

func (m fakeDeviceMem) Elems() int { return int(m) }

// TestForeignWeights: MatMul and MatMulNN given a weight Mat whose data is
// device memory (another backend's) panic with a message naming the op
// and the device memory, on every SIMD path and at decode (M < mBig) and
// prefill (M ≥ mBig) sizes, instead of handing a nil host address to the
// assembly kernels.
func TestForeignWeights(t *testing.T) {
	const n, k = 8, 32
	forEachBackend(t, func(t *testing.T, b *Backend) {
		for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
			w := kernels.MatOf(kernels.DeviceBuffer(fakeDeviceMem(n*k), dt, 0, n*k), n, k)
			for _, m := range []int{1, mBig} {
				x, out := make([]float32, m*k), make([]float32, m*n)
				assert.PanicsWithValue(t, "kernels/cpu: MatMul: weight data is device memory, not host memory", func() {
					b.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, false)
				}, "%v weights, M = %d", dt, m)
				assert.PanicsWithValue(t, "kernels/cpu: MatMulNN: weight data is device memory, not host memory", func() {
					b.MatMulNN(kernels.HostF32(x), kernels.HostF32(out), w, m, false)
				}, "%v weights, M = %d", dt, m)
			}
		}
	})
}
