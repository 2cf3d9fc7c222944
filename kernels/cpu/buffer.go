package cpu

import (
	"fmt"
	"math"

	"github.com/x/kernels"
)

// Copy: dst[N] = src[N], casting between F32 and BF16, in parallel blocks.
func (b *Backend) Copy(dst, src kernels.Buffer) {
	kernels.CheckCopy(dst, src)
	n := dst.Len()
	switch {
	case dst.DType() == src.DType():
		switch dst.DType() {
		case kernels.F32:
			d, s := dst.F32(), src.F32()
			b.elementwise(n, func(lo, hi int) { copy(d[lo:hi], s[lo:hi]) })
		case kernels.BF16, kernels.F16:
			d, s := dst.U16(), src.U16()
			b.elementwise(n, func(lo, hi int) { copy(d[lo:hi], s[lo:hi]) })
		case kernels.I32:
			d, s := dst.I32(), src.I32()
			b.elementwise(n, func(lo, hi int) { copy(d[lo:hi], s[lo:hi]) })
		}
	case dst.DType() == kernels.BF16:
		d, s := dst.BF16(), src.F32()
		b.elementwise(n, func(lo, hi int) {
			for i, v := range s[lo:hi] {
				d[lo+i] = kernels.F32ToBF16(v)
			}
		})
	default:
		d, s := dst.F32(), src.BF16()
		b.elementwise(n, func(lo, hi int) {
			dd := d[lo:hi]
			for i, u := range s[lo:hi] {
				dd[i] = math.Float32frombits(uint32(u) << 16)
			}
		})
	}
}

// GatherRows: dst[i, :] = src[idx[i], :], rows in parallel.
func (b *Backend) GatherRows(dst, src, idx kernels.Buffer, cols int) {
	rows := kernels.CheckRows("GatherRows", dst, src, idx, cols)
	ix := idx.I32()
	checkIndices("GatherRows", ix, rows)
	b.moveRows(len(ix), cols, func(i int) (int, int) { return i * cols, int(ix[i]) * cols }, dst, src)
}

// ScatterRows: dst[idx[i], :] = src[i, :], rows in parallel (the indices
// are distinct, so no two rows write the same memory).
func (b *Backend) ScatterRows(dst, src, idx kernels.Buffer, cols int) {
	rows := kernels.CheckRows("ScatterRows", src, dst, idx, cols)
	ix := idx.I32()
	checkIndices("ScatterRows", ix, rows)
	b.moveRows(len(ix), cols, func(i int) (int, int) { return int(ix[i]) * cols, i * cols }, dst, src)
}

// checkIndices panics unless every index is in [0, rows).
func checkIndices(op string, ix []int32, rows int) {
	for i, r := range ix {
		if r < 0 || int(r) >= rows {
			panic(fmt.Sprintf("kernels/cpu: %s: idx[%d] = %d outside [0, %d)", op, i, r, rows))
		}
	}
}

// moveRows copies n rows of cols elements, row i from src offset so to
// dst offset do where (do, so) = at(i); moves up to serialMove elements
// stay on the caller.
func (b *Backend) moveRows(n, cols int, at func(i int) (int, int), dst, src kernels.Buffer) {
	run := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			do, so := at(i)
			switch dst.DType() {
			case kernels.F32:
				copy(dst.F32()[do:do+cols], src.F32()[so:so+cols])
			case kernels.BF16, kernels.F16:
				copy(dst.U16()[do:do+cols], src.U16()[so:so+cols])
			case kernels.I32:
				copy(dst.I32()[do:do+cols], src.I32()[so:so+cols])
			}
		}
	}
	if n*cols <= serialMove {
		run(0, n)
		return
	}
	b.parallelFor(n, run)
}

// serialMove is the number of elements up to which a row move or a
// transpose runs on the caller: these ops are bound by memory, not
// arithmetic, and below about a megabyte waking the workers (and their
// spinning afterwards) costs more CPU than it saves time.
const serialMove = 1 << 18

// transposeTile is the square tile Transpose moves at a time, so that both
// the rows read and the rows written stay in cache.
const transposeTile = 64

// Transpose: dst[cols, rows] = src[rows, cols]ᵀ, tile by tile, bands of
// source rows in parallel (on the caller up to serialMove elements).
func (b *Backend) Transpose(dst, src kernels.Buffer, rows, cols int) {
	kernels.CheckTranspose(dst, src, rows, cols)
	bands := (rows + transposeTile - 1) / transposeTile
	par := b.parallelFor
	if rows*cols <= serialMove {
		par = func(n int, fn func(lo, hi int)) { fn(0, n) }
	}
	switch dst.DType() {
	case kernels.F32:
		d, s := dst.F32(), src.F32()
		par(bands, func(lo, hi int) { transposeBands(d, s, rows, cols, lo, hi) })
	case kernels.BF16, kernels.F16:
		d, s := dst.U16(), src.U16()
		par(bands, func(lo, hi int) { transposeBands(d, s, rows, cols, lo, hi) })
	case kernels.I32:
		d, s := dst.I32(), src.I32()
		par(bands, func(lo, hi int) { transposeBands(d, s, rows, cols, lo, hi) })
	}
}

// transposeBands transposes source rows [lo·tile, hi·tile).
func transposeBands[T any](dst, src []T, rows, cols, lo, hi int) {
	for i0 := lo * transposeTile; i0 < min(hi*transposeTile, rows); i0 += transposeTile {
		for j0 := 0; j0 < cols; j0 += transposeTile {
			for i := i0; i < min(i0+transposeTile, rows); i++ {
				row := src[i*cols : (i+1)*cols]
				for j := j0; j < min(j0+transposeTile, cols); j++ {
					dst[j*rows+i] = row[j]
				}
			}
		}
	}
}

// SumSquares returns Σ x² in float64: each block of grain elements is
// summed in order on one goroutine, and the blocks' sums are added in
// order, so the result does not depend on the thread count.
func (b *Backend) SumSquares(xs ...kernels.Buffer) (float64, error) {
	kernels.CheckReduce("SumSquares", xs)
	var total float64
	var part []float64
	for _, x := range xs {
		v := x.F32()
		blocks := (len(v) + grain - 1) / grain
		part = append(part[:0], make([]float64, blocks)...)
		run := func(lo, hi int) {
			for k := lo; k < hi; k++ {
				var s float64
				for _, f := range v[k*grain : min((k+1)*grain, len(v))] {
					s += float64(f) * float64(f)
				}
				part[k] = s
			}
		}
		if blocks <= 1 {
			run(0, blocks)
		} else {
			b.parallelFor(blocks, run)
		}
		for _, s := range part {
			total += s
		}
	}
	return total, nil
}

// AllFinite reports whether no element is NaN or ±Inf (exponent bits all
// ones), blocks in parallel.
func (b *Backend) AllFinite(xs ...kernels.Buffer) (bool, error) {
	kernels.CheckReduce("AllFinite", xs)
	for _, x := range xs {
		v := x.F32()
		blocks := (len(v) + grain - 1) / grain
		bad := make([]bool, blocks)
		run := func(lo, hi int) {
			for k := lo; k < hi; k++ {
				for _, f := range v[k*grain : min((k+1)*grain, len(v))] {
					if math.Float32bits(f)&0x7f800000 == 0x7f800000 {
						bad[k] = true
						break
					}
				}
			}
		}
		if blocks <= 1 {
			run(0, blocks)
		} else {
			b.parallelFor(blocks, run)
		}
		for _, f := range bad {
			if f {
				return false, nil
			}
		}
	}
	return true, nil
}
