package ref

// Add: dst[N] += src[N].
func (Backend) Add(dst, src []float32) {
	need("Add", "src", len(src), len(dst))
	for i := range dst {
		dst[i] += src[i]
	}
}

// Scale: x[N] *= s.
func (Backend) Scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}
