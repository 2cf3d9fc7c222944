package cpu

import (
	"github.com/x/kernels"
)

// kernels.MatMulBF16's direct path: MatMul with 2 ≤ M < mBig (batched decode) on
// bf16 weights, on a CPU with AVX512_BF16. x is rounded to bf16 once
// (bf16Rows); the dpNT kernels (asm/dpdirect.go) then read 64 bytes of
// each weight row and of each x row per 32 K-columns and run one VDPBF16PS
// per (x row, weight row): no widening, 32 products per instruction where
// the exact path's dotNT widens the weights and does 16 per FMA.
//
// dpMR and dpNR are the register block (x rows × weight rows, 24
// accumulators): a weight load serves all 8 rows of a batch-8 step. dpK is
// the K-columns per kernel step; K columns past the last multiple of dpK
// take dotTail on x rounded to float32 (the same products, exact in
// float32). nbDP is the weight rows per task (a multiple of dpNR), the
// unit the cores split N by.
const (
	dpMR = 8
	dpNR = 3
	dpK  = 32
	nbDP = 48
)

// dpDirect reports whether MatMul of m rows by w runs on the direct
// VDPBF16PS path: kernels.MatMulBF16, bf16 weights, AVX-512 with AVX512_BF16, and
// 2 ≤ m < mBig.
func (b *Backend) dpDirect(w kernels.Mat, m int) bool {
	return b.roundsX(w) && b.BF16Dot() && m >= 2 && m < mBig
}

// matMulDPDirect is MatMul on the direct VDPBF16PS path (see dpDirect):
// out[m, n] (=, or += if accumulate) x·wᵀ with x rounded to bf16. The
// cores split N into tasks of nbDP weight rows; within a task every block
// of dpNR weight rows meets each row group of x (balanced groups of at
// most dpMR rows: 12 rows as 6 + 6, not 8 + 4). Each output's sum runs
// over its own accumulator lanes in K order and is reduced by a fixed
// tree, so the result does not depend on the blocking or the scheduling.
func (b *Backend) matMulDPDirect(out, x []float32, w kernels.Mat, m int, accumulate bool) {
	n, k := w.Rows, w.Cols
	h, ld := b.bf16Rows(x[:m*k], m, k)
	steps := k / dpK
	var xr []float32 // x rounded, for the K tail
	if steps*dpK < k {
		xr = b.roundedX(x[:m*k])
	}
	acc := b2i(accumulate)
	blocks := (n + nbDP - 1) / nbDP
	groups := (m + dpMR - 1) / dpMR
	b.parallelFor(blocks, func(lo, hi int) {
		for j0 := lo * nbDP; j0 < min(hi*nbDP, n); j0 += dpNR {
			nrr := min(dpNR, n-j0)
			for g := range groups {
				i0 := g * m / groups
				mrr := (g+1)*m/groups - i0
				dpNTAsm(mrr, nrr, &h[i0*ld], ld*2, rowPtr(w, j0, 0), k*2, steps, &out[i0*n+j0], n*4, acc)
				if xr != nil {
					dotTail(out, xr, w, i0, mrr, j0, nrr, steps*dpK, k)
				}
			}
		}
	})
}
