package ref

import "github.com/x/kernels"

// RoPEBackward maps dy[T,H,D] to dx in place: the transpose of RoPE's
// rotation, which is the rotation by −angle. For i < D/2 the pair
// (dy[i], dy[i+D/2]) becomes (dy[i]·cos + dy[i+D/2]·sin,
// dy[i+D/2]·cos − dy[i]·sin), angle = pos[t] / theta^(2i/D) in float64.
func (Backend) RoPEBackward(dx, pos kernels.Buffer, heads, headDim int, theta float64) {
	kernels.CheckRoPE("RoPEBackward", dx, pos, heads, headDim)
	rope(dx.F32(), pos.I32(), heads, headDim, theta, -1)
}
