//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/x/kernels"
)

// The device-memory layer under Device's buffer methods: a Buffer is a
// pooled device block, wrapped by kernels.DeviceBuffer (Buffer implements
// kernels.DeviceMem through Elems). Element offsets address views
// (kernels.Buffer.Slice) into one allocation.

// elemSize is the bytes per element of dt.
func elemSize(dt kernels.DType) (int64, error) {
	switch dt {
	case kernels.F32, kernels.I32:
		return 4, nil
	case kernels.BF16, kernels.F16:
		return 2, nil
	}
	return 0, fmt.Errorf("cuda: unsupported buffer dtype %v", dt)
}

// allocBuffer returns n zeroed elements of dt from the pool.
func (d *Device) allocBuffer(ctx context.Context, dt kernels.DType, n int) (Buffer, error) {
	es, err := elemSize(dt)
	if err != nil {
		return Buffer{}, err
	}
	if n < 0 {
		return Buffer{}, fmt.Errorf("cuda: alloc: negative length %d", n)
	}
	b := Buffer{n: n, dtype: dt}
	err = d.drv.do(ctx, func() error {
		p, err := d.drv.pool.alloc(int64(n) * es)
		if err != nil || n == 0 {
			return err
		}
		if err := cu.MemsetD8Async(p, 0, int64(n)*es, d.drv.stream); err != nil {
			d.drv.pool.put(p)
			return fmt.Errorf("cuda: cuMemsetD8Async %d bytes: %w", int64(n)*es, err)
		}
		b.ptr = p
		return d.drv.sync()
	})
	return b, err
}

// freeBuffer returns b's block to the pool.
func (d *Device) freeBuffer(ctx context.Context, b Buffer) error {
	return d.drv.do(ctx, func() error {
		d.drv.pool.put(b.ptr)
		return nil
	})
}

// span checks that elements [off, off+n) lie in b and returns their
// device address and byte count.
func (b Buffer) span(off, n int) (cu.DevicePtr, int64, error) {
	es, err := elemSize(b.dtype)
	if err != nil {
		return 0, 0, err
	}
	if off < 0 || n < 0 || off+n > b.n {
		return 0, 0, fmt.Errorf("cuda: elements [%d,%d) outside a buffer of %d", off, off+n, b.n)
	}
	return b.ptr + cu.DevicePtr(int64(off)*es), int64(n) * es, nil
}

// uploadBuffer copies src (a host slice of b's element type: []float32
// for F32, []uint16 for BF16/F16) into b at element off, and waits.
func uploadBuffer[T float32 | uint16](ctx context.Context, d *Device, b Buffer, off int, src []T) error {
	if err := checkElem[T](b.dtype); err != nil {
		return err
	}
	p, n, err := b.span(off, len(src))
	if err != nil || n == 0 {
		return err
	}
	return d.drv.do(ctx, func() error {
		if err := cu.MemcpyHtoDAsync(p, unsafe.Pointer(&src[0]), n, d.drv.stream); err != nil {
			return fmt.Errorf("cuda: cuMemcpyHtoDAsync %d bytes: %w", n, err)
		}
		return d.drv.sync()
	})
}

// downloadBuffer copies len(dst) elements of b from element off into dst.
func downloadBuffer[T float32 | uint16](ctx context.Context, d *Device, dst []T, b Buffer, off int) error {
	if err := checkElem[T](b.dtype); err != nil {
		return err
	}
	p, n, err := b.span(off, len(dst))
	if err != nil || n == 0 {
		return err
	}
	return d.drv.do(ctx, func() error {
		if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), p, n, d.drv.stream); err != nil {
			return fmt.Errorf("cuda: cuMemcpyDtoHAsync %d bytes: %w", n, err)
		}
		return d.drv.sync()
	})
}

// copyBuffer copies n elements from src at srcOff to dst at dstOff on the
// device (same dtype; casts need a kernel), ordered on the driver's
// stream after the work already queued.
func (d *Device) copyBuffer(ctx context.Context, dst Buffer, dstOff int, src Buffer, srcOff, n int) error {
	if dst.dtype != src.dtype {
		return fmt.Errorf("cuda: copy %v to %v: a cast, not a copy", src.dtype, dst.dtype)
	}
	pd, bytes, err := dst.span(dstOff, n)
	if err != nil {
		return err
	}
	ps, _, err := src.span(srcOff, n)
	if err != nil || bytes == 0 {
		return err
	}
	return d.drv.do(ctx, func() error {
		if err := cu.MemcpyDtoDAsync(pd, ps, bytes, d.drv.stream); err != nil {
			return fmt.Errorf("cuda: cuMemcpyDtoDAsync %d bytes: %w", bytes, err)
		}
		return nil
	})
}

// checkElem reports whether T is dt's host element type.
func checkElem[T float32 | uint16](dt kernels.DType) error {
	var z T
	switch any(z).(type) {
	case float32:
		if dt == kernels.F32 {
			return nil
		}
	case uint16:
		if dt == kernels.BF16 || dt == kernels.F16 {
			return nil
		}
	}
	return fmt.Errorf("cuda: host %T elements for a %v buffer", z, dt)
}
