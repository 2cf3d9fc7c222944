//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/x/kernels"
)

// Buffer is device memory owned by a Device: n elements of dtype, from
// the Device's pool. It is the kernels.DeviceMem inside the
// kernels.Buffers the Device hands out, so data stays on the device
// between ops.
type Buffer struct {
	ptr   cu.DevicePtr
	n     int
	dtype kernels.DType
}

// Device is a kernels.Backend that runs this package's kernels on a CUDA
// GPU with plan.go's launch configurations: the same kernels, arguments
// and grids as the host build (Host), so the conformance suite checks the
// same code on both.
//
// Buffers (Alloc, Upload, Copy, GatherRows, ...) live in device memory,
// and every op, compute ops included, reads and writes device Buffers in
// place. It also accepts host Buffers (what the model passes while
// training's activations are host slices): those it stages, copying inputs into
// pooled device memory before the launch and outputs back after it (one
// driver round trip per op; timing dominated by PCIe for small ops).
// CacheWeights keeps frozen host weights on the device between calls.
//
// Driver errors are returned by NewDevice and Close; a Backend method
// without an error result records a driver or launch failure, naming the
// op, as the sticky error (Err), returned again by every later
// error-returning call; shape errors panic, as on every backend. A Device is safe for use by
// one goroutine at a time; the driver goroutine serialises everything.
type Device struct {
	drv     *driver
	weights map[weightKey]Buffer // CacheWeights
	cache   bool
	err     error // the first failure of an op without an error result (Err)
	prec    gemmPrecision
}

type weightKey struct {
	addr uintptr
	n    int
	dt   kernels.DType
}

// NewDevice opens GPU ordinal (0 for the first), loads the embedded
// kernels and returns a Device. It fails with an error naming the driver
// call when there is no usable device.
func NewDevice(ordinal int) (*Device, error) {
	drv, err := openDriver(ordinal)
	if err != nil {
		return nil, err
	}
	return &Device{drv: drv, weights: map[weightKey]Buffer{}}, nil
}

// Close frees the Device's memory and releases its context.
func (d *Device) Close() error {
	if d.drv == nil {
		return nil
	}
	d.drv.close()
	d.drv = nil
	return nil
}

// Name is the device's name and compute capability, and for each kernel
// family whether its cubin or its PTX was loaded.
func (d *Device) Name() string {
	return fmt.Sprintf("%s (sm_%d%d) modules %v", d.drv.name, d.drv.cc[0], d.drv.cc[1], d.drv.source)
}

// CacheWeights makes MatMul, MatMulNN and Embedding keep each bf16 or
// f16 weight matrix on the device after its first upload, keyed by the
// address and length of its storage (f32 matrices, which training
// updates, are always copied). Only valid while those bf16/f16 weights do
// not change (inference, LoRA over a frozen base); staging-only, it goes
// away with the buffer-based Backend.
func (d *Device) CacheWeights(on bool) {
	d.cache = on
	if !on {
		_ = d.drv.do(context.Background(), func() error {
			for _, b := range d.weights {
				d.drv.pool.put(b.ptr)
			}
			return nil
		})
		clear(d.weights)
	}
}

// MemInfo returns the device's free and total memory in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.drv.do(context.Background(), func() error {
		var e error
		free, total, e = cu.MemInfo()
		if e != nil {
			return fmt.Errorf("cuda: cuMemGetInfo: %w", e)
		}
		return nil
	})
	return free, total, err
}

// session is one Backend call on the driver goroutine: device buffers
// for its inputs and outputs, the outputs to copy back after the launches,
// and the first error.
type session struct {
	d     *Device
	err   error
	temps []cu.DevicePtr
	downs []func() error
}

// run executes body on the driver goroutine as op, then waits for the
// stream, copies the outputs back and returns the temporaries to the
// pool; an error panics naming op (Backend methods return no error).
func (d *Device) run(op string, body func(s *session)) {
	if err := d.exec(op, body); err != nil {
		panic(fmt.Sprintf("kernels/cuda: %s: %v", op, err))
	}
}

// exec is run returning the error instead of panicking.
func (d *Device) exec(op string, body func(s *session)) error {
	if d.drv == nil {
		panic("kernels/cuda: " + op + ": Device used after Close")
	}
	return d.drv.do(context.Background(), func() error {
		s := &session{d: d}
		body(s)
		if s.err == nil {
			s.err = d.drv.sync()
		}
		for _, f := range s.downs {
			if s.err != nil {
				break
			}
			s.err = f()
		}
		if s.err == nil && len(s.downs) > 0 {
			s.err = d.drv.sync()
		}
		for _, p := range s.temps {
			d.drv.pool.put(p)
		}
		return s.err
	})
}

// buf returns the device address of b's first element: b's own memory
// for a device Buffer, or (staging, for the host Buffers the model still
// passes) a temporary copy, copied back at the end when out is true.
func (s *session) buf(op string, b kernels.Buffer, out bool) cu.DevicePtr {
	if b.Len() == 0 || s.err != nil {
		return 0
	}
	if !b.Host() {
		_, p := devBuf(op, b)
		return p
	}
	switch b.DType() {
	case kernels.F32:
		if out {
			return output(s, b.F32(), true)
		}
		return upload(s, b.F32())
	case kernels.I32:
		if out {
			return output(s, b.I32(), true)
		}
		return upload(s, b.I32())
	case kernels.U8:
		if out {
			return output(s, b.U8(), true)
		}
		return upload(s, b.U8())
	default:
		if out {
			return output(s, b.U16(), true)
		}
		return upload(s, b.U16())
	}
}

// alloc returns a temporary device block of n bytes.
func (s *session) alloc(n int64) cu.DevicePtr {
	if s.err != nil || n <= 0 {
		return 0
	}
	p, err := s.d.drv.pool.alloc(n)
	if err != nil {
		s.err = err
		return 0
	}
	s.temps = append(s.temps, p)
	return p
}

// upload copies the bytes of a host slice into a temporary block.
func upload[T any](s *session, x []T) cu.DevicePtr {
	if len(x) == 0 || s.err != nil {
		return 0
	}
	n := int64(len(x)) * int64(unsafe.Sizeof(x[0]))
	p := s.alloc(n)
	if s.err != nil {
		return 0
	}
	// On the driver's stream, so that the launches after it wait for it
	// (a plain cuMemcpyHtoD runs on the legacy stream, which the
	// non-blocking stream does not wait for). From pageable memory it
	// returns once x is staged, so x may change afterwards.
	if err := cu.MemcpyHtoDAsync(p, unsafe.Pointer(&x[0]), n, s.d.drv.stream); err != nil {
		s.err = fmt.Errorf("cuda: cuMemcpyHtoDAsync %d bytes: %w", n, err)
	}
	return p
}

// output allocates a device block for x (copied in first when in is true:
// accumulated or in-place outputs) and copies it back into x at the end.
func output[T any](s *session, x []T, in bool) cu.DevicePtr {
	if len(x) == 0 || s.err != nil {
		return 0
	}
	var p cu.DevicePtr
	if in {
		p = upload(s, x)
	} else {
		p = s.alloc(int64(len(x)) * int64(unsafe.Sizeof(x[0])))
	}
	if s.err != nil {
		return 0
	}
	n := int64(len(x)) * int64(unsafe.Sizeof(x[0]))
	s.downs = append(s.downs, func() error {
		// Into pageable memory the copy is complete when the call returns.
		if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&x[0]), p, n, s.d.drv.stream); err != nil {
			return fmt.Errorf("cuda: cuMemcpyDtoHAsync %d bytes: %w", n, err)
		}
		return nil
	})
	return p
}

// out returns the device address of the output Buffer b: b's own memory
// for a device Buffer, or a temporary copied back at the end (copied in
// first only when in is true: a kernel that writes every element needs
// no copy in).
func (s *session) out(op string, b kernels.Buffer, in bool) cu.DevicePtr {
	if b.Len() == 0 || s.err != nil {
		return 0
	}
	if !b.Host() {
		_, p := devBuf(op, b)
		return p
	}
	if in {
		return s.buf(op, b, true)
	}
	switch b.DType() {
	case kernels.F32:
		return output(s, b.F32(), false)
	case kernels.I32:
		return output(s, b.I32(), false)
	case kernels.U8:
		return output(s, b.U8(), false)
	default:
		return output(s, b.U16(), false)
	}
}

// mat returns w's storage on the device: its own memory when w.Data is a
// device Buffer; for host data a copy, cached with CacheWeights.
func (s *session) mat(op string, w kernels.Mat) cu.DevicePtr {
	n := w.Rows * w.Cols
	if n == 0 || s.err != nil {
		return 0
	}
	if !w.Data.Host() {
		_, p := devBuf(op, w.Data)
		return p
	}
	var addr uintptr
	if w.DType == kernels.F32 {
		addr = uintptr(unsafe.Pointer(&w.F32()[0]))
	} else {
		addr = uintptr(unsafe.Pointer(&w.U16()[0]))
	}
	key := weightKey{addr, n, w.DType}
	if b, ok := s.d.weights[key]; ok && s.cacheable(w) {
		return b.ptr
	}
	var p cu.DevicePtr
	if w.DType == kernels.F32 {
		p = upload(s, w.F32()[:n])
	} else {
		p = upload(s, w.U16()[:n])
	}
	if s.cacheable(w) && s.err == nil {
		// Keep it: take it out of the session's temporaries.
		s.temps = s.temps[:len(s.temps)-1]
		s.d.weights[key] = Buffer{ptr: p, n: n, dtype: w.DType}
	}
	return p
}

// launch launches kernel with plan dm and arguments a.
func (s *session) launch(kernel string, dm dims, a *args) {
	if s.err != nil {
		return
	}
	s.err = s.d.drv.launch(kernel, dm, int(dm.smem), a)
}

func argsOf() *args { return &args{} }

// cacheable reports whether w may stay on the device under CacheWeights:
// bf16/f16 matrices only, the frozen storage of a checkpoint; f32
// matrices (LoRA adapters, master copies) are what training updates.
func (s *session) cacheable(w kernels.Mat) bool { return s.d.cache && w.DType != kernels.F32 }

// Elems is the number of elements b holds (kernels.DeviceMem).
func (b Buffer) Elems() int { return b.n }
