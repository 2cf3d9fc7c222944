package cpu

import (
	"unsafe"

	"github.com/x/kernels"
)

// direct2MR and direct2NR are the largest direct2 block (x rows × weight
// rows); direct2Ahead is how many blocks ahead the first row group
// prefetches (1 to 32 blocks of 2 rows ahead measured alike on the lm_head
// at M = 8; no prefetch streamed the weights 30% slower).
const (
	direct2MR    = 3
	direct2NR    = 4
	direct2Ahead = 1
)

// matMulDirect2 is matMulDirect on the AVX2 path: the direct2 kernels
// (asm/avx2.go, dotNT2's blocks with a prefetch) over blocks of direct2NR
// weight rows, with the rows of x in balanced groups of at most direct2MR
// (8 rows as 2 + 3 + 3). The first group of each block prefetches the
// weight rows direct2Ahead blocks further on (within the task's range) into
// L2, so that the other groups and the next block find their weights in
// cache instead of stalling on memory. Each output's sum is the one dotNT2
// computes (the same lanes in the same order, the same reduction).
func (b *Backend) matMulDirect2(kn mmKernels, out, x []float32, w kernels.Mat, m int, accumulate bool) {
	n, k := w.Rows, w.Cols
	dt, es := dtIndex(w.DType), w.DType.Size()
	steps := k / kn.vec
	acc := b2i(accumulate)
	blocks := (n + nbNT - 1) / nbNT
	groups := (m + direct2MR - 1) / direct2MR
	b.parallelFor(blocks, func(lo, hi int) {
		end := min(hi*nbNT, n)
		for j0 := lo * nbNT; j0 < end; j0 += direct2NR {
			nrr := min(direct2NR, n-j0)
			var pf unsafe.Pointer
			if p := j0 + direct2Ahead*direct2NR; p+direct2NR <= end {
				pf = rowPtr(w, p, 0)
			}
			for g := 0; g < groups; g++ {
				i0 := g * m / groups
				mrr := (g+1)*m/groups - i0
				direct2Asm(dt, mrr, nrr, &x[i0*k], k*4, rowPtr(w, j0, 0), k*es, steps, &out[i0*n+j0], n*4, acc, pf)
				pf = nil
				if steps*kn.vec < k {
					dotTail(out, x, w, i0, mrr, j0, nrr, steps*kn.vec, k)
				}
			}
		}
	})
}
