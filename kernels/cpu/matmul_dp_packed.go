package cpu

import (
	"unsafe"

	"github.com/x/kernels"
)

// dpkc is the K columns per packed weight block of matMulDPPacked (a
// multiple of 16). Its panels hold bf16, half the bytes of the float32
// panels of matMulPacked, so at the same L2 footprint (nbNT·dpkc·2 bytes
// = 128 KiB) a block could span twice matMulPacked's kc; 2048 measured no
// different from 1024 (BenchmarkMatMulPrecision, M 64 and M 512 × K 3072,
// interleaved, on a loaded 2-core Zen 4), so the smaller footprint stays.
const dpkc = 1024

// dpPacked reports whether MatMul takes matMulDPPacked: kernels.MatMulBF16 on bf16
// weights, a CPU with AVX-512 and AVX512_BF16, and M ≥ mBig.
func (b *Backend) dpPacked(w kernels.Mat, m int) bool {
	return b.roundsX(w) && b.BF16Dot() && m >= mBig
}

// matMulDPPacked is MatMul under kernels.MatMulBF16 for M ≥ mBig on VDPBF16PS, in
// matMulPacked's outer-product form: x is rounded to bf16 once (bf16Rows);
// each task (an N block of nbNT weight rows × an M block of mbNT x rows)
// packs each nbNT × dpkc block of bf16 weights into a K-pair-interleaved
// panel, one 64-lane row per column pair p whose lane j holds
// (w[j, 2p], w[j, 2p+1]) (a 32-bit transpose of the rows, packT2_f32 on
// the bf16 bits: no widening), then for every 6-row group of its M block
// adds x[group, k0:k0+dpkc]·panel to the outputs with the dpaxpy kernels
// (per column pair 4 panel loads, 6 broadcasts of x's pair, 24
// VDPBF16PS). The ragged edges take the exact kernels on x rounded to bf16
// and widened back (roundedX), the same products exactly: output columns
// past the last multiple of 16 (the dot-product kernel and dotTail, as in
// matMulPacked) and K columns past the last multiple of 16 (dotTail).
//
// Each output's sum is the dpkc blocks in order, each block's pairs in
// order, then the block's K tail: an order fixed by the blocking, never by
// scheduling, so results are deterministic run to run. VDPBF16PS treats
// denormal inputs and sums as zero (the exact kernels do not): per term a
// difference below 2⁻¹²⁶ times the other factor, plus 2⁻¹²⁶ for a
// flushed sum (TestMatMulBF16Specials).
func (b *Backend) matMulDPPacked(kn mmKernels, out, x []float32, w kernels.Mat, m int, accumulate bool) {
	n, k := w.Rows, w.Cols
	var xr []float32 // x rounded to bf16 as float32, for the ragged edges
	if n%vecSz != 0 || k%16 != 0 {
		xr = b.roundedX(x[:m*k])
	}
	h, ld := b.bf16Rows(x, m, k)
	nBlocks := (n + nbNT - 1) / nbNT
	mBlocks := (m + mbNT - 1) / mbNT
	const pw = cols // panel width in 32-bit lanes: 64 outputs
	b.parallelForWorker(nBlocks*mBlocks, func(wk, lo, hi int) {
		panel := b.scratch(wk, dpkc/2*pw) // [dpkc/2 pairs][pw] 32-bit lanes of bf16 pairs
		for task := lo; task < hi; task++ {
			n0, m0 := (task/mBlocks)*nbNT, (task%mBlocks)*mbNT
			n1, m1 := min(n0+nbNT, n), min(m0+mbNT, m)
			np := (n1 - n0) &^ (vecSz - 1) // columns in the panel
			nv := np / vecSz
			for k0 := 0; k0 < k; k0 += dpkc {
				kl := min(dpkc, k-k0)
				kp := kl &^ 15 // K columns through the panel (8 pairs per packT2 step)
				acc := b2i(accumulate || k0 > 0)
				if kp > 0 {
					for c := 0; c < np; c += 8 {
						packT2Asm(0, &panel[c], rowPtr(w, n0+c, k0), k*2, kp/2, pw*4)
					}
				}
				for i0 := m0; i0 < m1; i0 += mr {
					mrr := min(mr, m1-i0)
					if nv > 0 {
						if kp > 0 {
							dpaxpyAsm(mrr, nv, unsafe.Pointer(&h[i0*ld+k0]), ld*2, 4, unsafe.Pointer(&panel[0]), pw*4, kp/2,
								&out[i0*n+n0], n*4, acc)
						} else if acc == 0 {
							for i := i0; i < i0+mrr; i++ {
								clear(out[i*n+n0 : i*n+n0+np])
							}
						}
						if kp < kl {
							dotTail(out, xr, w, i0, mrr, n0, np, k0+kp, k0+kl)
						}
					}
					// Ragged columns: the exact dot-product kernel on xr.
					kd := kl &^ (vecSz - 1)
					for j0 := n0 + np; j0 < n1; j0 += nr {
						nrr := min(nr, n1-j0)
						if kd > 0 {
							kn.dot(dtIndex(w.DType), mrr, nrr, &xr[i0*k+k0], k*4, rowPtr(w, j0, k0), k*2, kd/vecSz, &out[i0*n+j0], n*4, acc)
						} else if acc == 0 {
							for i := i0; i < i0+mrr; i++ {
								clear(out[i*n+j0 : i*n+j0+nrr])
							}
						}
						if kd < kl {
							dotTail(out, xr, w, i0, mrr, j0, nrr, k0+kd, k0+kl)
						}
					}
				}
			}
		}
	})
}
