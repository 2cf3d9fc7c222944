package cpu

import (
	"math"

	"github.com/x/kernels"
)

// rmsnormChunk is the number of rows per task of RMSNormBackward. Each
// chunk sums its rows' dw terms into its own partial row, and the partials
// are added in chunk order, so the result does not depend on the thread
// count.
const rmsnormChunk = 32

// RMSNormBackward computes dx[R,C] (=) and dw[C] (+=) of
// y = w·x/sqrt(mean(x²)+eps); see ref.Backend.RMSNormBackward for the
// formula. Per row: one vector pass for Σx² and Σw·dy·x (float32 lanes),
// then one that writes dx and adds the row's dw terms to its chunk's
// partial; chunks of rows run in parallel, and the partials are summed in
// float64 in chunk order. Element (r, i) is read before dx(r, i) is
// written, so dx may alias dout or x.
func (b *Backend) RMSNormBackward(dx, dw, dout, x, w kernels.Buffer, rows, cols int, eps float32) {
	kernels.CheckRMSNormBackward(dx, dw, dout, x, w, rows, cols)
	b.rmsNormBackward(dx.F32(), dw.F32(), dout.F32(), x.F32(), w.F32(), rows, cols, eps)
}

// rmsNormBackward is RMSNormBackward on host slices.
func (b *Backend) rmsNormBackward(dx, dw, dout, x, w []float32, rows, cols int, eps float32) {
	n := rows * cols
	if n == 0 {
		return
	}
	avx := b.simd.isa()
	w = w[:cols]
	chunks := (rows + rmsnormChunk - 1) / rmsnormChunk
	partial := make([]float32, chunks*cols) // [chunks, C]
	rowChunks := func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			acc := partial[ch*cols : (ch+1)*cols]
			for r := ch * rmsnormChunk; r < min(rows, (ch+1)*rmsnormChunk); r++ {
				xr, dy := x[r*cols:(r+1)*cols], dout[r*cols:(r+1)*cols]
				ss, dot := bwRMSRow(avx, xr, dy, w)
				rs := 1 / math.Sqrt(float64(ss)/float64(cols)+float64(eps))
				k := float64(dot) * rs * rs * rs / float64(cols)
				bwRMSCols(avx, dx[r*cols:(r+1)*cols], dy, xr, w, acc, float32(rs), float32(k))
			}
		}
	}
	const blk = 256
	reduce := func(lo, hi int) {
		for bi := lo; bi < hi; bi++ {
			for c := bi * blk; c < min(cols, (bi+1)*blk); c++ {
				var s float64
				for ch := range chunks {
					s += float64(partial[ch*cols+c])
				}
				dw[c] += float32(s)
			}
		}
	}
	nblk := (cols + blk - 1) / blk
	if n < 1<<14 {
		rowChunks(0, chunks)
		reduce(0, nblk)
		return
	}
	b.parallelFor(chunks, rowChunks)
	b.parallelFor(nblk, reduce)
}
