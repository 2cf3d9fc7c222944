package kernels

import (
	"fmt"
	"unsafe"
)

// Buffer is a typed, one-dimensional array that a Backend owns: F32, BF16
// (raw bfloat16 bits), F16 (raw IEEE half bits, for F16 weights), I32 or
// U8 (flags) elements. It is a small value (copy it
// freely); Slice makes views without copying. A Buffer does not say where
// its memory lives beyond Host: the CPU backends keep it in a Go slice
// (HostF32, HostBF16, HostI32 wrap one with no copy), a device backend
// keeps a DeviceMem handle and an element offset into it. Data crosses
// between the program and a backend only through the backend's Upload,
// Download and Import, and through the scalars that sync-point ops return,
// so a wrapper backend can count every crossing.
type Buffer struct {
	dtype DType
	n     int
	p     unsafe.Pointer // first element of host memory (nil when empty or on a device)
	dev   DeviceMem      // nil for host memory
	off   int            // first element within dev
}

// DeviceMem is one allocation of a device backend (for example a CUDA
// device pointer and its size). Package kernels never looks inside it; the
// backend that made it recovers it with Buffer.Device.
type DeviceMem interface {
	// Elems is the number of elements the allocation holds.
	Elems() int
}

// HostF32 wraps s as an F32 Buffer of len(s) elements; the Buffer and s
// share memory.
func HostF32(s []float32) Buffer { return host(F32, s) }

// HostBF16 wraps s (raw bfloat16 bits) as a BF16 Buffer; no copy.
func HostBF16(s []uint16) Buffer { return host(BF16, s) }

// HostF16 wraps s (raw IEEE half bits) as an F16 Buffer; no copy.
func HostF16(s []uint16) Buffer { return host(F16, s) }

// HostI32 wraps s as an I32 Buffer; no copy.
func HostI32(s []int32) Buffer { return host(I32, s) }

// HostRounded returns a new host Buffer of dtype dt (F32 or BF16) holding
// the values of x: a copy for F32, rounded to nearest even for BF16 (as
// Copy casts): what a bf16 KV pool or weight holds for float32 values.
func HostRounded(dt DType, x []float32) Buffer {
	if dt == BF16 {
		u := make([]uint16, len(x))
		for i, v := range x {
			u[i] = F32ToBF16(v)
		}
		return HostBF16(u)
	}
	return HostF32(append([]float32(nil), x...))
}

// HostU8 wraps s as a U8 Buffer (flags); no copy.
func HostU8(s []uint8) Buffer { return host(U8, s) }

// host wraps a Go slice. A Buffer keeps the address of its first element
// (which keeps the array alive for the garbage collector) rather than the
// slice, so that it stays small to pass and its accessors inline: the CPU
// kernels call them in their inner blocks.
func host[T any](dt DType, s []T) Buffer {
	if len(s) == 0 {
		return Buffer{dtype: dt}
	}
	return Buffer{dtype: dt, n: len(s), p: unsafe.Pointer(unsafe.SliceData(s))}
}

// DeviceBuffer is how a device backend makes a Buffer of n elements of dt
// starting at element off of mem. It panics if the range does not fit mem.
func DeviceBuffer(mem DeviceMem, dt DType, off, n int) Buffer {
	if mem == nil || off < 0 || n < 0 || off+n > mem.Elems() {
		panic(fmt.Sprintf("kernels: DeviceBuffer: [%d, %d) outside an allocation", off, off+n))
	}
	checkBufferDType("DeviceBuffer", dt)
	return Buffer{dtype: dt, n: n, dev: mem, off: off}
}

// checkBufferDType panics unless dt is a Buffer element type.
func checkBufferDType(op string, dt DType) {
	if dt > U8 {
		panic(fmt.Sprintf("kernels: %s: dtype %v: a Buffer holds F32, BF16, F16, I32 or U8", op, dt))
	}
}

// AllocHost returns a zeroed host Buffer of n elements of dt: what the CPU
// backends' Alloc returns.
func AllocHost(dt DType, n int) (Buffer, error) {
	if n < 0 {
		return Buffer{}, fmt.Errorf("kernels: Alloc: negative length %d", n)
	}
	switch dt {
	case F32:
		return HostF32(make([]float32, n)), nil
	case BF16:
		return HostBF16(make([]uint16, n)), nil
	case F16:
		return HostF16(make([]uint16, n)), nil
	case I32:
		return HostI32(make([]int32, n)), nil
	case U8:
		return HostU8(make([]uint8, n)), nil
	}
	return Buffer{}, fmt.Errorf("kernels: Alloc: dtype %v: a Buffer holds F32, BF16, F16, I32 or U8", dt)
}

// DType is the element type.
func (b Buffer) DType() DType { return b.dtype }

// Len is the number of elements.
func (b Buffer) Len() int { return b.n }

// Host reports whether b's memory is a Go slice (F32, BF16 and I32 return
// it).
func (b Buffer) Host() bool { return b.dev == nil }

// Slice is the view of elements [lo, hi) of b: it shares b's memory. It
// panics if the range is outside b.
func (b Buffer) Slice(lo, hi int) Buffer {
	if lo < 0 || hi < lo || hi > b.n {
		panic(fmt.Sprintf("kernels: Buffer.Slice: [%d, %d) of %d elements", lo, hi, b.n))
	}
	v := Buffer{dtype: b.dtype, n: hi - lo, dev: b.dev, off: b.off + lo}
	if b.dev == nil && hi > lo {
		v.p = unsafe.Add(b.p, lo*b.dtype.Size())
	}
	return v
}

// F32 is the memory of a host F32 Buffer, Len elements. It panics (naming
// the dtype or the device) for any other Buffer: only CPU backends and
// tests on host buffers call it.
func (b Buffer) F32() []float32 {
	if b.dev != nil || b.dtype != F32 {
		b.notHost("F32", F32)
	}
	return unsafe.Slice((*float32)(b.p), b.n)
}

// BF16 is the memory of a host BF16 Buffer (raw bits); see F32.
func (b Buffer) BF16() []uint16 {
	if b.dev != nil || b.dtype != BF16 {
		b.notHost("BF16", BF16)
	}
	return unsafe.Slice((*uint16)(b.p), b.n)
}

// U16 is the memory of a host BF16 or F16 Buffer (raw 16-bit patterns,
// for ops that move bits without reading them); see F32.
func (b Buffer) U16() []uint16 {
	if b.dev != nil || b.dtype-BF16 > F16-BF16 { // BF16 or F16 (unsigned)
		b.notHost("U16", BF16)
	}
	return unsafe.Slice((*uint16)(b.p), b.n)
}

// I32 is the memory of a host I32 Buffer; see F32.
func (b Buffer) I32() []int32 {
	if b.dev != nil || b.dtype != I32 {
		b.notHost("I32", I32)
	}
	return unsafe.Slice((*int32)(b.p), b.n)
}

// U8 is the memory of a host U8 Buffer; see F32.
func (b Buffer) U8() []uint8 {
	if b.dev != nil || b.dtype != U8 {
		b.notHost("U8", U8)
	}
	return unsafe.Slice((*uint8)(b.p), b.n)
}

// HostPtr is the address of a host Buffer's first element (nil for an
// empty or device Buffer), unchecked: for CPU kernels in assembly or C,
// after the op's Check has verified the Buffer's dtype and length.
func (b Buffer) HostPtr() unsafe.Pointer { return b.p }

// Device is the allocation and element offset of a device Buffer (nil, 0
// for a host Buffer).
func (b Buffer) Device() (DeviceMem, int) { return b.dev, b.off }

// notHost panics for an accessor (what, of dtype dt) called on the wrong
// Buffer: device memory or another dtype.
func (b Buffer) notHost(what string, dt DType) {
	if b.dev != nil {
		panic(fmt.Sprintf("kernels: Buffer.%s: device memory is not host memory", what))
	}
	panic(fmt.Sprintf("kernels: Buffer.%s: buffer holds %v, not %v", what, b.dtype, dt))
}

// String is the dtype and length, as in "F32[4096]".
func (b Buffer) String() string { return fmt.Sprintf("%v[%d]", b.dtype, b.n) }
