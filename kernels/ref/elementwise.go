package ref

import "github.com/x/kernels"

// Add: dst[N] += src[N].
func (Backend) Add(dst, src kernels.Buffer) {
	kernels.CheckAdd(dst, src)
	add(dst.F32(), src.F32())
}

// add is Add on host slices.
func add(dst, src []float32) {
	for i := range dst {
		dst[i] += src[i]
	}
}

// Scale: x[N] *= s.
func (Backend) Scale(x kernels.Buffer, s float32) {
	kernels.CheckScale(x)
	scale(x.F32(), s)
}

// scale is Scale on host slices.
func scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}
