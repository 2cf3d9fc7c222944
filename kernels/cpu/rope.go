package cpu

import (
	"math"

	"github.com/x/kernels"
)

// RoPE rotates x[T,H,D] in place (rotate-half convention). Angles are
// pos/theta^(2i/D) in float64, as in the reference; each token's cos/sin
// are computed once and used for all its heads.
func (b *Backend) RoPE(x, pos kernels.Buffer, heads, headDim int, theta float64) {
	kernels.CheckRoPE("RoPE", x, pos, heads, headDim)
	b.rope(x.F32(), pos.I32(), heads, headDim, theta)
}

// rope is RoPE on host slices.
func (b *Backend) rope(x []float32, pos []int32, heads, headDim int, theta float64) {
	half := headDim / 2
	if half == 0 || heads == 0 {
		return
	}
	denom := make([]float64, half)
	for i := range denom {
		denom[i] = math.Pow(theta, float64(2*i)/float64(headDim))
	}
	run := func(w, lo, hi int) {
		cs := b.scratch(w, headDim)
		cos, sin := cs[:half], cs[half:]
		for t := lo; t < hi; t++ {
			p := float64(pos[t])
			for i := 0; i < half; i++ {
				s, c := math.Sincos(p / denom[i])
				cos[i], sin[i] = float32(c), float32(s)
			}
			for h := 0; h < heads; h++ {
				v := x[(t*heads+h)*headDim : (t*heads+h+1)*headDim]
				lo, hi := v[:half], v[half:]
				for i := range lo {
					a, bb := lo[i], hi[i]
					lo[i] = a*cos[i] - bb*sin[i]
					hi[i] = bb*cos[i] + a*sin[i]
				}
			}
		}
	}
	if len(pos)*heads*headDim <= grain {
		run(0, 0, len(pos))
		return
	}
	b.parallelForWorker(len(pos), run)
}
