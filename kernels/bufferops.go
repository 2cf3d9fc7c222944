package kernels

import "fmt"

// The shape rules of the buffer ops (Backend's Upload, Download, Copy,
// GatherRows, ScatterRows, Transpose, SumSquares, AllFinite) live here
// once: every backend calls the Check function of an op before running it
// and panics with its message, which names the op and the argument.

func bufPanic(op, format string, args ...any) {
	panic("kernels: " + op + ": " + fmt.Sprintf(format, args...))
}

// CheckTransfer panics unless dst and src have the same dtype and length
// (Upload, Download); op names the caller.
func CheckTransfer(op string, dst, src Buffer) {
	if dst.dtype != src.dtype {
		bufPanic(op, "dst holds %v, src %v", dst.dtype, src.dtype)
	}
	if dst.n != src.n {
		bufPanic(op, "dst has %d elements, src %d", dst.n, src.n)
	}
}

// CheckCopy panics unless Copy(dst, src) is defined: equal lengths and
// either equal dtypes or a cast between F32 and BF16.
func CheckCopy(dst, src Buffer) {
	noU8("Copy", dst, src)
	if dst.n != src.n {
		bufPanic("Copy", "dst has %d elements, src %d", dst.n, src.n)
	}
	if dst.dtype != src.dtype && !(dst.dtype == F32 && src.dtype == BF16 || dst.dtype == BF16 && src.dtype == F32) {
		bufPanic("Copy", "cannot cast %v to %v", src.dtype, dst.dtype)
	}
}

// CheckRows panics unless GatherRows or ScatterRows (op) fits: cols ≥ 0,
// idx is I32, dst and src share a dtype, packed holds idx.Len() rows and
// table a whole number of rows. For GatherRows the packed side is dst and
// the table src; for ScatterRows the reverse. It returns the number of
// table rows, which each index must be below.
func CheckRows(op string, packed, table, idx Buffer, cols int) int {
	noU8(op, packed, table)
	if cols < 0 {
		bufPanic(op, "negative cols %d", cols)
	}
	if idx.dtype != I32 {
		bufPanic(op, "idx holds %v, want I32", idx.dtype)
	}
	if packed.dtype != table.dtype {
		bufPanic(op, "dst holds %v, src %v", packed.dtype, table.dtype)
	}
	if packed.n < idx.n*cols {
		bufPanic(op, "packed rows have %d elements, need %d rows of %d", packed.n, idx.n, cols)
	}
	if cols == 0 {
		return 0
	}
	if table.n%cols != 0 {
		bufPanic(op, "table of %d elements is not rows of %d", table.n, cols)
	}
	return table.n / cols
}

// CheckTranspose panics unless Transpose(dst, src, rows, cols) fits: same
// dtype, non-negative shape, both buffers at least rows·cols long.
func CheckTranspose(dst, src Buffer, rows, cols int) {
	noU8("Transpose", dst, src)
	if rows < 0 || cols < 0 {
		bufPanic("Transpose", "negative shape [%d,%d]", rows, cols)
	}
	if dst.dtype != src.dtype {
		bufPanic("Transpose", "dst holds %v, src %v", dst.dtype, src.dtype)
	}
	if src.n < rows*cols || dst.n < rows*cols {
		bufPanic("Transpose", "src has %d and dst %d elements, need [%d,%d]", src.n, dst.n, rows, cols)
	}
}

// CheckReduce panics unless every buffer of a reduction (SumSquares,
// AllFinite: op) holds F32.
func CheckReduce(op string, xs []Buffer) {
	for i, x := range xs {
		if x.dtype != F32 {
			bufPanic(op, "buffer %d holds %v, want F32", i, x.dtype)
		}
	}
}

// noU8 panics if a buffer of a data-movement op (op) is U8: U8 Buffers hold
// PolicyLoss's clip flags, which only Upload and Download move.
func noU8(op string, bs ...Buffer) {
	for _, b := range bs {
		if b.dtype == U8 {
			bufPanic(op, "a U8 buffer (only Upload and Download move flags)")
		}
	}
}
