package cpu

import (
	"fmt"

	"github.com/x/kernels"
)

// The backend's MatMul precision (kernels.MatMulPrecision) is its state:
// Backend implements kernels.MatMulPrecisionSetter. Under
// kernels.MatMulBF16, with AVX-512 + AVX512_BF16 and M ≥ 2, MatMul runs on
// VDPBF16PS, twice the multiply-adds per instruction of the exact path:
// for 2 ≤ M < 16 (batched decode) straight from the bf16 weight rows
// (matMulDPDirect), for M ≥ 16 (prefill, larger batches) on weights packed
// into K-pair-interleaved bf16 panels (matMulDPPacked), x rounded once into
// bf16 pairs and ragged edges on the exact kernels over the rounded x;
// everywhere else (M = 1, other CPUs) x is rounded to float32 values that
// bf16 can hold and the exact kernels run (same products, no speed gain).
// VDPBF16PS also treats denormal factors (of x or w) and sums as zero: per
// term a difference below 2⁻¹²⁶ times the other factor, plus 2⁻¹²⁶ for a
// flushed sum.
var _ kernels.MatMulPrecisionSetter = (*Backend)(nil)

// SetMatMulPrecision sets how later MatMul calls with bf16 weights treat
// their activations (see kernels.MatMulPrecision); an unknown value is an error
// and leaves the precision unchanged.
func (b *Backend) SetMatMulPrecision(p kernels.MatMulPrecision) error {
	if !p.Valid() {
		return fmt.Errorf("kernels/cpu: SetMatMulPrecision: unknown precision %d", int(p))
	}
	b.prec = p
	return nil
}

// MatMulPrecision is the precision SetMatMulPrecision last set.
func (b *Backend) MatMulPrecision() kernels.MatMulPrecision { return b.prec }

// BF16Dot reports whether kernels.MatMulBF16 runs its batched and packed products
// (2 ≤ M) on VDPBF16PS here: the CPU has AVX-512 with AVX512_BF16 and
// GODEBUG did not turn either off. Where it is false kernels.MatMulBF16 still
// rounds x the same way, on the exact kernels.
func (b *Backend) BF16Dot() bool { return b.simd.avx512 && b.simd.avx512bf16 }

// roundsX reports whether MatMul rounds x to bf16 for weights w.
func (b *Backend) roundsX(w kernels.Mat) bool {
	return b.prec == kernels.MatMulBF16 && w.DType == kernels.BF16
}

// roundedX returns x rounded to bf16 and widened back to float32 (exact),
// in a buffer of the Backend's own that stays valid until the next MatMul.
func (b *Backend) roundedX(x []float32) []float32 {
	if cap(b.xBF16) < len(x) {
		b.xBF16 = make([]float32, len(x))
	}
	r := b.xBF16[:len(x)]
	for i, v := range x {
		r[i] = kernels.BF16ToF32(kernels.F32ToBF16(v))
	}
	return r
}

// bf16Rows returns the m×k x rounded to bf16 as rows of ld = k rounded up
// to even elements (the pad zero), so that every pair of columns (2c,
// 2c+1) is one aligned 32-bit word, as VDPBF16PS takes its operands. The
// buffer is the Backend's own and stays valid until the next MatMul. The
// rows are split over the workers from bf16RowsPar elements on, and
// rounded 16 at a time by narrowBF16 on the AVX-512 path (bit for bit
// kernels.F32ToBF16, which rounds the rest).
func (b *Backend) bf16Rows(x []float32, m, k int) (h []uint16, ld int) {
	ld = (k + 1) &^ 1
	if cap(b.xH) < m*ld {
		b.xH = make([]uint16, m*ld)
	}
	h = b.xH[:m*ld]
	k16 := 0
	if b.simd.avx512 {
		k16 = k &^ 15
	}
	fill := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row, xi := h[i*ld:(i+1)*ld], x[i*k:(i+1)*k]
			if k16 > 0 {
				narrowBF16(&row[0], &xi[0], k16)
			}
			for c := k16; c < k; c++ {
				row[c] = kernels.F32ToBF16(xi[c])
			}
			if ld > k {
				row[k] = 0
			}
		}
	}
	if m*k < bf16RowsPar {
		fill(0, m)
	} else {
		b.parallelFor(m, fill)
	}
	return h, ld
}

// bf16RowsPar is the elements of x from which bf16Rows splits its rows
// over the workers (below it the hand-off costs more than the rounding).
const bf16RowsPar = 1 << 15
