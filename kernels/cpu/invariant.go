package cpu

import "github.com/x/kernels"

var _ kernels.BatchInvariantSetter = (*Backend)(nil)

// SetBatchInvariant turns batch-invariant MatMul on or off (off by
// default). MatMul's paths sum a row's products in orders that depend on
// how many rows the call has (matVec at M = 1, the direct kernel's small
// row groups at M = 2, the packed kernel from mDirect or mBig rows), so
// the same row of x, multiplied alongside other rows, can come out
// different in its last bits. In batched generation the other rows are the
// other sequences decoding in that step, which depends on timing (which
// rollouts are waiting on a tool), so two identical runs would differ. In
// batch-invariant mode every MatMul runs the direct kernel over groups of
// exactly mmKernels.mr rows (the last group padded with zero rows), and a
// row's result depends only on the row: bit for bit the same for any M,
// any position in the batch and any thread count. For 3 ≤ M < mDirect on
// AVX-512 (mBig on AVX2) that is what MatMul computes anyway; M = 1 costs
// up to mr rows of arithmetic for one row's weight traffic, and M ≥ mDirect
// gives up packing. Under kernels.MatMulBF16 x is rounded to bf16 and the exact
// kernels run (as at M = 1), never VDPBF16PS. MatMulNN and MatMulTN
// (gradients) are not affected. Like SetMatMulPrecision it is the
// backend's setting: set it around the calls it is for.
func (b *Backend) SetBatchInvariant(on bool) { b.invariant = on }

// BatchInvariant reports whether SetBatchInvariant turned the mode on.
func (b *Backend) BatchInvariant() bool { return b.invariant }

// invariantRows is the smallest row group of the direct kernel whose rows
// sum their products as a whole group's do (smaller groups, like matVec,
// interleave the sums of one row for latency): a property of the kernels
// that TestMatMulBatchInvariant holds them to.
const invariantRows = 3

// invariantM is how many rows matMulInvariant computes for m: m itself when
// matMulDirect's balanced groups of up to mr rows are all at least
// invariantRows (m ≥ 3 when mr ≥ 5, as on AVX-512), else m rounded up to a
// whole number of such groups (AVX2's mr of 3: groups of exactly 3).
func invariantM(m, mr int) int {
	if mr >= 2*invariantRows-1 { // any m ≥ 3 splits into groups of 3..mr
		return max(m, invariantRows)
	}
	return (m + mr - 1) / mr * mr // whole groups (AVX2: mr = invariantRows)
}

// matMulInvariant is MatMul in batch-invariant mode (x already rounded
// under kernels.MatMulBF16): matMulDirect over invariantM(m) rows, the rows past m
// zero in scratch of the backend's own.
func (b *Backend) matMulInvariant(kn mmKernels, out, x []float32, w kernels.Mat, m int, accumulate bool) {
	p := invariantM(m, kn.mr)
	if p == m {
		b.matMulDirect(kn, out, x, w, m, accumulate)
		return
	}
	n, k := w.Rows, w.Cols
	if cap(b.padX) < p*k {
		b.padX = make([]float32, p*k)
	}
	if cap(b.padOut) < p*n {
		b.padOut = make([]float32, p*n)
	}
	px, po := b.padX[:p*k], b.padOut[:p*n]
	copy(px, x[:m*k])
	clear(px[m*k:])
	if accumulate {
		copy(po, out[:m*n])
	}
	b.matMulDirect(kn, po, px, w, p, accumulate)
	copy(out[:m*n], po[:m*n])
}
