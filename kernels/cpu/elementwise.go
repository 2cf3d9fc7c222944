package cpu

import "github.com/x/kernels"

// grain is the number of elements below which an elementwise kernel runs
// on the calling goroutine: waking the workers costs about a microsecond.
const grain = 1 << 14

// Add: dst[N] += src[N].
func (b *Backend) Add(dst, src []float32) {
	kernels.CheckAdd(dst, src)
	b.elementwise(len(dst), func(lo, hi int) {
		d, s := dst[lo:hi], src[lo:hi]
		for i := range d {
			d[i] += s[i]
		}
	})
}

// Scale: x[N] *= s.
func (b *Backend) Scale(x []float32, s float32) {
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
