package cpu

import (
	"math"

	"github.com/x/kernels"
)

// RoPEBackward maps dy[T,H,D] to dx in place by the inverse rotation (see
// ref.Backend.RoPEBackward). The angle pos[t]/theta^(2i/D) and its sine and
// cosine are computed in float64, once per (t, i) and shared by the heads;
// the rotation of a token's heads is one vector pass; tokens run in
// parallel.
func (b *Backend) RoPEBackward(dx, pos kernels.Buffer, heads, headDim int, theta float64) {
	kernels.CheckRoPE("RoPEBackward", dx, pos, heads, headDim)
	b.ropeBackward(dx.F32(), pos.I32(), heads, headDim, theta)
}

// ropeBackward is RoPEBackward on host slices.
func (b *Backend) ropeBackward(dx []float32, pos []int32, heads, headDim int, theta float64) {
	t := len(pos)
	half := headDim / 2
	if half == 0 || heads == 0 {
		return
	}
	denom := make([]float64, half)
	for i := range denom {
		denom[i] = math.Pow(theta, float64(2*i)/float64(headDim))
	}
	avx := b.simd.isa()
	run := func(lo, hi int) {
		cs := make([]float32, 2*half)
		cos, sin := cs[:half], cs[half:]
		for ti := lo; ti < hi; ti++ {
			p := float64(pos[ti])
			for i := range half {
				s, c := math.Sincos(p / denom[i])
				cos[i], sin[i] = float32(c), float32(s)
			}
			bwRoPERow(avx, dx[ti*heads*headDim:(ti+1)*heads*headDim], cos, sin, half, heads, headDim)
		}
	}
	if t*heads*headDim < 1<<13 {
		run(0, t)
		return
	}
	b.parallelFor(t, run)
}
