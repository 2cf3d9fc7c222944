package ref

import "github.com/x/kernels"

// Add: dst[N] += src[N].
func (Backend) Add(dst, src []float32) {
	kernels.CheckAdd(dst, src)
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
