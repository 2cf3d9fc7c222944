package cpu

import "math"

// RoPEBackward maps dy[T,H,D] to dx in place by the inverse rotation (see
// ref.Backend.RoPEBackward). The angle pos[t]/theta^(2i/D) and its sine and
// cosine are computed in float64, once per (t, i) and shared by the heads;
// tokens run in parallel.
func (b *Backend) RoPEBackward(dx []float32, pos []int32, heads, headDim int, theta float64) {
	const op = "RoPEBackward"
	needDims(op, heads, headDim)
	if headDim%2 != 0 {
		panic("kernels/cpu: " + op + ": odd head dim")
	}
	t := len(pos)
	need(op, "x", len(dx), t*heads*headDim)
	half := headDim / 2
	denom := make([]float64, half)
	for i := range denom {
		denom[i] = math.Pow(theta, float64(2*i)/float64(headDim))
	}
	run := func(lo, hi int) {
		for ti := lo; ti < hi; ti++ {
			p := float64(pos[ti])
			for i := range half {
				sin, cos := math.Sincos(p / denom[i])
				s, c := float32(sin), float32(cos)
				for h := range heads {
					row := dx[(ti*heads+h)*headDim:]
					a, bb := row[i], row[i+half]
					row[i] = a*c + bb*s
					row[i+half] = bb*c - a*s
				}
			}
		}
	}
	if t*heads*headDim < 1<<13 {
		run(0, t)
		return
	}
	b.parallelFor(t, run)
}
