package ref

// RoPEBackward maps dy[T,H,D] to dx in place: the transpose of RoPE's
// rotation, which is the rotation by −angle. For i < D/2 the pair
// (dy[i], dy[i+D/2]) becomes (dy[i]·cos + dy[i+D/2]·sin,
// dy[i+D/2]·cos − dy[i]·sin), angle = pos[t] / theta^(2i/D) in float64.
func (Backend) RoPEBackward(dx []float32, pos []int32, heads, headDim int, theta float64) {
	rope(dx, pos, heads, headDim, theta, -1, "RoPEBackward")
}
