//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/x/kernels"
)

// The buffer methods of Device (kernels.Backend's Alloc to AllFinite):
// Buffers are pooled device memory (kernels.DeviceBuffer over a Buffer),
// and the six data-movement and reduction ops run buffer.cu's kernels on
// them. They also take host Buffers (kernels.HostF32 ...), which the
// model still passes for training's activations: those are staged through
// temporary device copies, as the compute ops stage theirs. Ops without an
// error result record their first failure, which Err and every later
// error-returning call report (kernels.Backend's error model).

// fail records err as the sticky error if none is recorded yet.
func (d *Device) fail(err error) {
	if err != nil && d.err == nil {
		d.err = err
	}
}

// Err is the first failure of an op that returns no error.
func (d *Device) Err() error { return d.err }

// devBuf returns b's device allocation and the address of its first
// element; it panics (a programmer error) for a host Buffer or one from
// another backend.
func devBuf(op string, b kernels.Buffer) (Buffer, cu.DevicePtr) {
	mem, off := b.Device()
	buf, ok := mem.(Buffer)
	if !ok {
		panic(fmt.Sprintf("kernels/cuda: %s: a %v buffer not allocated by this Device (host: %v)", op, b.DType(), b.Host()))
	}
	return buf, buf.ptr + cu.DevicePtr(off*elemBytes(b.DType()))
}

// Alloc returns a zeroed device Buffer of n elements of dt.
func (d *Device) Alloc(dt kernels.DType, n int) (kernels.Buffer, error) {
	if d.err != nil {
		return kernels.Buffer{}, d.err
	}
	b, err := d.allocBuffer(context.Background(), dt, n)
	if err != nil {
		return kernels.Buffer{}, fmt.Errorf("kernels/cuda: Alloc %v[%d]: %w", dt, n, err)
	}
	return kernels.DeviceBuffer(b, dt, 0, n), nil
}

// Free returns b's memory to the pool. b must come from Alloc or Import,
// not be a view.
func (d *Device) Free(b kernels.Buffer) {
	buf, _ := devBuf("Free", b)
	if _, off := b.Device(); off != 0 || b.Len() != buf.n {
		panic("kernels/cuda: Free: a view, not a buffer from Alloc or Import")
	}
	d.fail(d.freeBuffer(context.Background(), buf))
}

// Import copies the host Buffer src into a new device Buffer.
func (d *Device) Import(src kernels.Buffer) (kernels.Buffer, error) {
	if !src.Host() {
		return kernels.Buffer{}, fmt.Errorf("kernels/cuda: Import: src is not a host buffer")
	}
	dst, err := d.Alloc(src.DType(), src.Len())
	if err != nil {
		return kernels.Buffer{}, err
	}
	if err := d.Upload(dst, src); err != nil {
		d.Free(dst)
		return kernels.Buffer{}, err
	}
	return dst, nil
}

// Upload copies the host Buffer src into the device Buffer dst.
func (d *Device) Upload(dst, src kernels.Buffer) error {
	kernels.CheckTransfer("Upload", dst, src)
	if d.err != nil {
		return d.err
	}
	if !src.Host() {
		panic("kernels/cuda: Upload: src is not a host buffer")
	}
	_, p := devBuf("Upload", dst)
	hp, es := hostData(src)
	n := int64(src.Len() * es)
	if n == 0 {
		return nil
	}
	err := d.drv.do(context.Background(), func() error {
		if err := cu.MemcpyHtoDAsync(p, hp, n, d.drv.stream); err != nil {
			return fmt.Errorf("cuda: cuMemcpyHtoDAsync %d bytes: %w", n, err)
		}
		return d.drv.sync()
	})
	if err != nil {
		err = fmt.Errorf("kernels/cuda: Upload: %w", err)
		d.fail(err)
	}
	return err
}

// Download copies the device Buffer src into the host Buffer dst, after
// the work already queued.
func (d *Device) Download(dst, src kernels.Buffer) error {
	kernels.CheckTransfer("Download", dst, src)
	if d.err != nil {
		return d.err
	}
	if !dst.Host() {
		panic("kernels/cuda: Download: dst is not a host buffer")
	}
	_, p := devBuf("Download", src)
	hp, es := hostData(dst)
	n := int64(dst.Len() * es)
	if n == 0 {
		return nil
	}
	err := d.drv.do(context.Background(), func() error {
		if err := cu.MemcpyDtoHAsync(hp, p, n, d.drv.stream); err != nil {
			return fmt.Errorf("cuda: cuMemcpyDtoHAsync %d bytes: %w", n, err)
		}
		return d.drv.sync()
	})
	if err != nil {
		err = fmt.Errorf("kernels/cuda: Download: %w", err)
		d.fail(err)
	}
	return err
}

// launchOp runs one buffer op without an error result: body launches on
// the driver's stream; a failure becomes the sticky error.
func (d *Device) launchOp(op string, body func(s *session)) {
	if d.err != nil {
		return
	}
	if err := d.exec(op, body); err != nil {
		d.fail(fmt.Errorf("kernels/cuda: %s: %w", op, err))
	}
}

// Copy is dst = src, raw or cast between F32 and BF16.
func (d *Device) Copy(dst, src kernels.Buffer) {
	kernels.CheckCopy(dst, src)
	n := dst.Len()
	if n == 0 {
		return
	}
	d.launchOp("Copy", func(s *session) {
		pd, ps := s.buf("Copy", dst, true), s.buf("Copy", src, false)
		s.launch("copy_cast", elementwisePlan(n), argsOf().ptr(pd).ptr(ps).i32(int(dst.DType())).i32(int(src.DType())).
			i32(elemBytes(dst.DType())).i64(n))
	})
}

// checkIndices checks idx against rows (downloading a device idx): a bad
// index is a programmer error and panics before any kernel reads it.
func (d *Device) checkIndices(op string, idx kernels.Buffer, rows int) {
	if idx.Host() {
		rowIndices(op, idx.I32(), rows)
		return
	}
	host := make([]int32, idx.Len())
	if err := d.Download(kernels.HostI32(host), idx); err != nil {
		return // recorded
	}
	rowIndices(op, host, rows)
}

// GatherRows is dst[i, :] = src[idx[i], :].
func (d *Device) GatherRows(dst, src, idx kernels.Buffer, cols int) {
	rows := kernels.CheckRows("GatherRows", dst, src, idx, cols)
	if idx.Len() == 0 || cols == 0 {
		return
	}
	d.checkIndices("GatherRows", idx, rows)
	d.launchOp("GatherRows", func(s *session) {
		pd, ps, pi := s.buf("GatherRows", dst, true), s.buf("GatherRows", src, false), s.buf("GatherRows", idx, false)
		s.launch("gather_rows", elementwisePlan(idx.Len()*cols), argsOf().ptr(pd).ptr(ps).ptr(pi).
			i32(elemBytes(dst.DType())).i64(idx.Len()).i64(cols))
	})
}

// ScatterRows is dst[idx[i], :] = src[i, :].
func (d *Device) ScatterRows(dst, src, idx kernels.Buffer, cols int) {
	rows := kernels.CheckRows("ScatterRows", src, dst, idx, cols)
	if idx.Len() == 0 || cols == 0 {
		return
	}
	d.checkIndices("ScatterRows", idx, rows)
	d.launchOp("ScatterRows", func(s *session) {
		pd, ps, pi := s.buf("ScatterRows", dst, true), s.buf("ScatterRows", src, false), s.buf("ScatterRows", idx, false)
		s.launch("scatter_rows", elementwisePlan(idx.Len()*cols), argsOf().ptr(pd).ptr(ps).ptr(pi).
			i32(elemBytes(dst.DType())).i64(idx.Len()).i64(cols))
	})
}

// Transpose is dst[cols, rows] = src[rows, cols]ᵀ.
func (d *Device) Transpose(dst, src kernels.Buffer, rows, cols int) {
	kernels.CheckTranspose(dst, src, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	d.launchOp("Transpose", func(s *session) {
		pd, ps := s.buf("Transpose", dst, true), s.buf("Transpose", src, false)
		s.launch("transpose_rows", elementwisePlan(rows*cols), argsOf().ptr(pd).ptr(ps).
			i32(elemBytes(dst.DType())).i64(rows).i64(cols))
	})
}

// reduce runs one scalar reduction: init is the scalar's first 4 bytes,
// each non-empty buffer is launched by launch, and the 8-byte result is
// copied back after the stream drains.
func (d *Device) reduce(op string, xs []kernels.Buffer, init uint32, launch func(s *session, out, x cu.DevicePtr, n int)) ([8]byte, error) {
	res := make([]byte, 8)
	if d.err != nil {
		return [8]byte{}, d.err
	}
	err := d.exec(op, func(s *session) {
		out := output(s, res, false)
		if s.err != nil {
			return
		}
		if err := cu.MemsetD32Async(out, 0, 2, d.drv.stream); err != nil {
			s.err = fmt.Errorf("cuda: cuMemsetD32Async: %w", err)
			return
		}
		if err := cu.MemsetD32Async(out, uint(init), 1, d.drv.stream); err != nil {
			s.err = fmt.Errorf("cuda: cuMemsetD32Async: %w", err)
			return
		}
		for _, x := range xs {
			if x.Len() > 0 {
				launch(s, out, s.buf(op, x, false), x.Len())
			}
		}
	})
	if err != nil {
		err = fmt.Errorf("kernels/cuda: %s: %w", op, err)
		d.fail(err)
	}
	return [8]byte(res), err
}

// SumSquares is Σ x² over the F32 buffers, in float64.
func (d *Device) SumSquares(xs ...kernels.Buffer) (float64, error) {
	kernels.CheckReduce("SumSquares", xs)
	res, err := d.reduce("SumSquares", xs, 0, func(s *session, out, x cu.DevicePtr, n int) {
		s.launch("sum_squares", singleBlockPlan(), argsOf().ptr(out).ptr(x).i64(n))
	})
	return *(*float64)(unsafe.Pointer(&res[0])), err
}

// AllFinite reports whether no element of the F32 buffers is NaN or ±Inf.
func (d *Device) AllFinite(xs ...kernels.Buffer) (bool, error) {
	kernels.CheckReduce("AllFinite", xs)
	res, err := d.reduce("AllFinite", xs, 1, func(s *session, out, x cu.DevicePtr, n int) {
		s.launch("all_finite", elementwisePlan(n), argsOf().ptr(out).ptr(x).i64(n))
	})
	return err == nil && *(*int32)(unsafe.Pointer(&res[0])) == 1, err
}
