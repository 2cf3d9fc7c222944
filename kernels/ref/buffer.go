package ref

import (
	"fmt"
	"math"

	"github.com/x/kernels"
)

// Copy: dst[N] = src[N], casting between F32 and BF16.
func (Backend) Copy(dst, src kernels.Buffer) {
	kernels.CheckCopy(dst, src)
	switch {
	case dst.DType() == src.DType():
		switch dst.DType() {
		case kernels.F32:
			copy(dst.F32(), src.F32())
		case kernels.BF16, kernels.F16:
			copy(dst.U16(), src.U16())
		case kernels.I32:
			copy(dst.I32(), src.I32())
		}
	case dst.DType() == kernels.BF16:
		d := dst.BF16()
		for i, v := range src.F32() {
			d[i] = kernels.F32ToBF16(v)
		}
	default:
		d := dst.F32()
		for i, u := range src.BF16() {
			d[i] = kernels.BF16ToF32(u)
		}
	}
}

// GatherRows: dst[i, :] = src[idx[i], :].
func (Backend) GatherRows(dst, src, idx kernels.Buffer, cols int) {
	rows := kernels.CheckRows("GatherRows", dst, src, idx, cols)
	for i, r := range idx.I32() {
		checkIndex("GatherRows", i, r, rows)
		moveRows(dst, src, i*cols, int(r)*cols, cols)
	}
}

// ScatterRows: dst[idx[i], :] = src[i, :].
func (Backend) ScatterRows(dst, src, idx kernels.Buffer, cols int) {
	rows := kernels.CheckRows("ScatterRows", src, dst, idx, cols)
	for i, r := range idx.I32() {
		checkIndex("ScatterRows", i, r, rows)
		moveRows(dst, src, int(r)*cols, i*cols, cols)
	}
}

// checkIndex panics unless row index r (idx[i]) is in [0, rows).
func checkIndex(op string, i int, r int32, rows int) {
	if r < 0 || int(r) >= rows {
		panic(fmt.Sprintf("kernels/ref: %s: idx[%d] = %d outside [0, %d)", op, i, r, rows))
	}
}

// moveRows copies n elements from src at so to dst at do (same dtype).
func moveRows(dst, src kernels.Buffer, do, so, n int) {
	switch dst.DType() {
	case kernels.F32:
		copy(dst.F32()[do:do+n], src.F32()[so:so+n])
	case kernels.BF16, kernels.F16:
		copy(dst.U16()[do:do+n], src.U16()[so:so+n])
	case kernels.I32:
		copy(dst.I32()[do:do+n], src.I32()[so:so+n])
	}
}

// Transpose: dst[cols, rows] = src[rows, cols]ᵀ.
func (Backend) Transpose(dst, src kernels.Buffer, rows, cols int) {
	kernels.CheckTranspose(dst, src, rows, cols)
	switch dst.DType() {
	case kernels.F32:
		transpose(dst.F32(), src.F32(), rows, cols)
	case kernels.BF16, kernels.F16:
		transpose(dst.U16(), src.U16(), rows, cols)
	case kernels.I32:
		transpose(dst.I32(), src.I32(), rows, cols)
	}
}

func transpose[T any](dst, src []T, rows, cols int) {
	for i := range rows {
		for j := range cols {
			dst[j*rows+i] = src[i*cols+j]
		}
	}
}

// SumSquares returns Σ x², in float64, element by element in order.
func (Backend) SumSquares(xs ...kernels.Buffer) (float64, error) {
	kernels.CheckReduce("SumSquares", xs)
	var s float64
	for _, x := range xs {
		for _, v := range x.F32() {
			s += float64(v) * float64(v)
		}
	}
	return s, nil
}

// AllFinite reports whether no element is NaN or ±Inf.
func (Backend) AllFinite(xs ...kernels.Buffer) (bool, error) {
	kernels.CheckReduce("AllFinite", xs)
	for _, x := range xs {
		for _, v := range x.F32() {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return false, nil
			}
		}
	}
	return true, nil
}
