package kerneltest

import (
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/x/kernels"
)

// newRNG returns a generator seeded from a test name, so every subtest has
// its own reproducible inputs.
func newRNG(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// uniform returns n values uniform in [−scale, scale).
func uniform(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((2*rng.Float64() - 1) * scale)
	}
	return x
}

// randMat returns a [rows, cols] Mat of dtype dt with values uniform in
// [−scale, scale), rounded to dt.
func randMat(rng *rand.Rand, dt kernels.DType, rows, cols int, scale float64) kernels.Mat {
	v := uniform(rng, rows*cols, scale)
	return ToMat(dt, v, rows, cols)
}

// ToMat stores v [rows, cols] in a host Mat of dtype dt (rounding to
// bf16/f16 to nearest even), as the suite stores its weights.
func ToMat(dt kernels.DType, v []float32, rows, cols int) kernels.Mat {
	switch dt {
	case kernels.BF16:
		u := make([]uint16, len(v))
		for i, f := range v {
			u[i] = kernels.F32ToBF16(f)
		}
		return kernels.MatBF16(u, rows, cols)
	case kernels.F16:
		u := make([]uint16, len(v))
		for i, f := range v {
			u[i] = kernels.F32ToF16(f)
		}
		return kernels.MatF16(u, rows, cols)
	}
	return kernels.MatF32(v, rows, cols)
}

// dtypes are the weight storage types every weight-reading op is tested
// with.
func dtypes() []kernels.DType { return []kernels.DType{kernels.F32, kernels.BF16, kernels.F16} }

// padded returns a copy of v followed by pad sentinel NaNs, so a test can
// check that a kernel writes nothing past the shape it was given.
func padded(v []float32, pad int) []float32 {
	out := make([]float32, len(v)+pad)
	copy(out, v)
	for i := len(v); i < len(out); i++ {
		out[i] = float32(math.NaN())
	}
	return out
}

// clone returns a copy of v.
func clone(v []float32) []float32 { return append([]float32(nil), v...) }
