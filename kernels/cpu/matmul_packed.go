package cpu

import (
	"unsafe"

	"github.com/x/kernels"
)

// matMulPacked is MatMul for M ≥ mBig in the outer-product form: each task
// transposes a block of nbNT weight rows × kc columns into panels of
// [kc, kn.cols] float32 (packT2, widening bf16/f16), then for every
// kn.mr-row group of its M block adds x[group, k0:k0+kc]·panel to the
// outputs with the axpy kernel (AVX2: 3 broadcasts and 4 panel loads per
// 12 FMAs; AVX-512: 6 and 4 per 24; no horizontal sums, the panel
// contiguous). The dot-product form this replaced (dotNT over widened
// weight rows) loads as much but streams 4 weight rows and up to 6 x rows
// 4 KiB apart, which alias in L1. Output columns past the last multiple of
// kn.vec in a block, and K columns past the last multiple of 8 (of kn.vec
// for those columns), take the dot-product kernels and dotTail. The sum
// order of each output depends only on the blocking, never on scheduling.
func (b *Backend) matMulPacked(kn mmKernels, out, x []float32, w kernels.Mat, m int, accumulate bool) {
	n, k := w.Rows, w.Cols
	dt, es := dtIndex(w.DType), w.DType.Size()
	nBlocks := (n + nbNT - 1) / nbNT
	mBlocks := (m + mbNT - 1) / mbNT
	b.parallelForWorker(nBlocks*mBlocks, func(wk, lo, hi int) {
		scratch := b.scratch(wk, nbNT*kc)
		for task := lo; task < hi; task++ {
			n0, m0 := (task/mBlocks)*nbNT, (task%mBlocks)*mbNT
			n1, m1 := min(n0+nbNT, n), min(m0+mbNT, m)
			pw := kn.cols                   // panel width
			np := (n1 - n0) &^ (kn.vec - 1) // columns in panels
			for k0 := 0; k0 < k; k0 += kc {
				kl := min(kc, k-k0)
				kp := kl &^ 7 // K columns through the panels
				acc := b2i(accumulate || k0 > 0)
				for c := 0; c < np; c += 8 { // panel c/pw, columns c%pw…+8
					dst := scratch[(c/pw)*kc*pw+c%pw:]
					packT2Asm(dt, &dst[0], rowPtr(w, n0+c, k0), k*es, kp, pw*4)
				}
				for i0 := m0; i0 < m1; i0 += kn.mr {
					mrr := min(kn.mr, m1-i0)
					for c := 0; c < np; c += pw {
						nv := min(pw, np-c) / kn.vec
						if kp > 0 {
							kn.axpy(0, mrr, nv, &x[i0*k+k0], k*4, 4, unsafe.Pointer(&scratch[(c/pw)*kc*pw]), pw*4, kp,
								&out[i0*n+n0+c], n*4, acc)
						} else if acc == 0 {
							for i := i0; i < i0+mrr; i++ {
								clear(out[i*n+n0+c : i*n+n0+c+kn.vec*nv])
							}
						}
						if kp < kl {
							dotTail(out, x, w, i0, mrr, n0+c, kn.vec*nv, k0+kp, k0+kl)
						}
					}
					// Ragged columns: the dot-product kernel, as matMulBlocked.
					kd := kl &^ (kn.vec - 1) // K columns through the dot kernel
					for j0 := n0 + np; j0 < n1; j0 += nr {
						nrr := min(nr, n1-j0)
						if kd > 0 {
							kn.dot(dt, mrr, nrr, &x[i0*k+k0], k*4, rowPtr(w, j0, k0), k*es, kd/kn.vec, &out[i0*n+j0], n*4, acc)
						} else if acc == 0 {
							for i := i0; i < i0+mrr; i++ {
								clear(out[i*n+j0 : i*n+j0+nrr])
							}
						}
						if kd < kl {
							dotTail(out, x, w, i0, mrr, j0, nrr, k0+kd, k0+kl)
						}
					}
				}
			}
		}
	})
}
