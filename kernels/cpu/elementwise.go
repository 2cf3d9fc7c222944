package cpu

import "github.com/x/kernels"

// grain is the number of elements below which an elementwise kernel runs
// on the calling goroutine: waking the workers costs about a microsecond.
const grain = 1 << 14

// Add: dst[N] += src[N].
func (b *Backend) Add(dst, src kernels.Buffer) {
	kernels.CheckAdd(dst, src)
	b.add(dst.F32(), src.F32())
}

// add is Add on host slices.
func (b *Backend) add(dst, src []float32) {
	b.elementwise(len(dst), func(lo, hi int) {
		d, s := dst[lo:hi], src[lo:hi]
		for i := range d {
			d[i] += s[i]
		}
	})
}

// Scale: x[N] *= s.
func (b *Backend) Scale(x kernels.Buffer, s float32) {
	kernels.CheckScale(x)
	b.scale(x.F32(), s)
}

// scale is Scale on host slices.
func (b *Backend) scale(x []float32, s float32) {
	b.elementwise(len(x), func(lo, hi int) {
		bwScale(b.simd.isa(), x[lo:hi], s)
	})
}

// elementwise runs fn over [0, n) in parallel blocks of at least grain
// elements (on the caller alone when n is small).
func (b *Backend) elementwise(n int, fn func(lo, hi int)) {
	if n <= grain {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	blocks := (n + grain - 1) / grain
	b.parallelFor(blocks, func(lo, hi int) { fn(lo*grain, min(hi*grain, n)) })
}
