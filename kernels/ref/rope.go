package ref

import (
	"math"

	"github.com/x/kernels"
)

// RoPE rotates x[T,H,D] in place, rotate-half convention, angle =
// pos[t] / theta^(2i/D) computed in float64.
func (Backend) RoPE(x, pos kernels.Buffer, heads, headDim int, theta float64) {
	kernels.CheckRoPE("RoPE", x, pos, heads, headDim)
	rope(x.F32(), pos.I32(), heads, headDim, theta, 1)
}

// rope rotates by sign·angle; the backward rotation uses sign = −1.
func rope(x []float32, pos []int32, heads, headDim int, theta float64, sign float64) {
	half := headDim / 2
	for ti, p := range pos {
		for i := 0; i < half; i++ {
			angle := float64(p) / math.Pow(theta, float64(2*i)/float64(headDim))
			sin, cos := math.Sincos(angle)
			sin *= sign
			for h := 0; h < heads; h++ {
				base := (ti*heads + h) * headDim
				a, b := float64(x[base+i]), float64(x[base+i+half])
				x[base+i] = float32(a*cos - b*sin)
				x[base+i+half] = float32(b*cos + a*sin)
			}
		}
	}
}
