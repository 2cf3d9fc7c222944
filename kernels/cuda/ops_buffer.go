package cuda

import (
	"unsafe"

	"github.com/x/kernels"
)

// The data-movement and reduction ops of Device (buffer.cu's kernels).

// Copy is dst = src, raw or cast between F32 and BF16.
func (d *Device) Copy(dst, src kernels.Buffer) {
	const op = "Copy"
	kernels.CheckCopy(dst, src)
	n := dst.Len()
	if n == 0 {
		return
	}
	s := d.begin(op)
	pd, ps := s.inout(dst), s.in(src)
	s.launch("copy_cast", elementwisePlan(n), argsOf().ptr(pd).ptr(ps).i32(int(dst.DType())).i32(int(src.DType())).
		i32(dst.DType().Size()).i64(n))
	s.end()
}

// GatherRows is dst[i, :] = src[idx[i], :]; device indices out of range
// are reported at the next sync point.
func (d *Device) GatherRows(dst, src, idx kernels.Buffer, cols int) {
	rows := kernels.CheckRows("GatherRows", dst, src, idx, cols)
	d.moveRows(false, dst, src, idx, cols, rows)
}

// ScatterRows is dst[idx[i], :] = src[i, :]; device indices out of range
// are reported at the next sync point.
func (d *Device) ScatterRows(dst, src, idx kernels.Buffer, cols int) {
	rows := kernels.CheckRows("ScatterRows", src, dst, idx, cols)
	d.moveRows(true, dst, src, idx, cols, rows)
}

// moveRows runs gather_rows (scatter_rows if scatter) over a table of
// rows rows of cols elements, idx checked in the kernel against rows (on
// the host first when it is host memory).
func (d *Device) moveRows(scatter bool, dst, src, idx kernels.Buffer, cols, rows int) {
	op, kernel, slot := "GatherRows", "gather_rows", stGatherRows
	if scatter {
		op, kernel, slot = "ScatterRows", "scatter_rows", stScatterRows
	}
	if idx.Host() {
		rowIndices(op, idx.I32(), rows)
	}
	if idx.Len() == 0 || cols == 0 {
		return
	}
	s := d.begin(op)
	pd, ps, pi := s.inout(dst), s.in(src), s.in(idx)
	s.launch(kernel, elementwisePlan(idx.Len()*cols), argsOf().ptr(pd).ptr(ps).ptr(pi).
		i32(dst.DType().Size()).i64(idx.Len()).i64(cols).i64(rows).ptr(d.slot(slot)))
	s.end()
}

// Transpose is dst[cols, rows] = src[rows, cols]ᵀ.
func (d *Device) Transpose(dst, src kernels.Buffer, rows, cols int) {
	const op = "Transpose"
	kernels.CheckTranspose(dst, src, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	s := d.begin(op)
	pd, ps := s.inout(dst), s.in(src)
	s.launch("transpose_rows", elementwisePlan(rows*cols), argsOf().ptr(pd).ptr(ps).
		i32(dst.DType().Size()).i64(rows).i64(cols))
	s.end()
}

// reduce runs one scalar reduction, a sync point: an 8-byte result
// initialised to init (its first 4 bytes), each non-empty buffer launched
// by launch, and the result read back.
func (d *Device) reduce(op string, xs []kernels.Buffer, init uint32, launch func(s *session, out, x devptr, n int)) ([8]byte, error) {
	var res [8]byte
	s := d.begin(op)
	out := s.scratch(8)
	s.memset32(out, 0, 2)
	s.memset32(out, init, 1)
	for _, x := range xs {
		if x.Len() > 0 {
			launch(s, out, s.in(x), x.Len())
		}
	}
	if s.err == nil {
		s.outs = append(s.outs, hostCopy{host: unsafe.Pointer(&res[0]), dev: out, n: 8})
	}
	s.end()
	if s.err != nil {
		return res, d.err
	}
	return res, nil
}

// SumSquares is Σ x² over the F32 buffers, in float64: a sync point.
func (d *Device) SumSquares(xs ...kernels.Buffer) (float64, error) {
	kernels.CheckReduce("SumSquares", xs)
	res, err := d.reduce("SumSquares", xs, 0, func(s *session, out, x devptr, n int) {
		s.launch("sum_squares", singleBlockPlan(), argsOf().ptr(out).ptr(x).i64(n))
	})
	return *(*float64)(unsafe.Pointer(&res[0])), err
}

// AllFinite reports whether no element of the F32 buffers is NaN or ±Inf:
// a sync point.
func (d *Device) AllFinite(xs ...kernels.Buffer) (bool, error) {
	kernels.CheckReduce("AllFinite", xs)
	res, err := d.reduce("AllFinite", xs, 1, func(s *session, out, x devptr, n int) {
		s.launch("all_finite", elementwisePlan(n), argsOf().ptr(out).ptr(x).i64(n))
	})
	return err == nil && *(*int32)(unsafe.Pointer(&res[0])) == 1, err
}
