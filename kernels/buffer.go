package kernels

import "fmt"

// Buffer is a typed, one-dimensional array that a Backend owns: F32, BF16
// (raw bfloat16 bits), F16 (raw IEEE half bits, for F16 weights) or I32
// elements. It is a small value (copy it
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
	f32   []float32
	u16   []uint16
	i32   []int32
	u8    []uint8
	dev   DeviceMem // nil for host memory
	off   int       // first element within dev
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
func HostF32(s []float32) Buffer { return Buffer{dtype: F32, n: len(s), f32: s} }

// HostBF16 wraps s (raw bfloat16 bits) as a BF16 Buffer; no copy.
func HostBF16(s []uint16) Buffer { return Buffer{dtype: BF16, n: len(s), u16: s} }

// HostF16 wraps s (raw IEEE half bits) as an F16 Buffer; no copy.
func HostF16(s []uint16) Buffer { return Buffer{dtype: F16, n: len(s), u16: s} }

// HostI32 wraps s as an I32 Buffer; no copy.
func HostI32(s []int32) Buffer { return Buffer{dtype: I32, n: len(s), i32: s} }

// HostU8 wraps s as a U8 Buffer (flags); no copy.
func HostU8(s []uint8) Buffer { return Buffer{dtype: U8, n: len(s), u8: s} }

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
	if b.dev == nil {
		switch b.dtype {
		case F32:
			v.f32 = b.f32[lo:hi:hi]
		case BF16, F16:
			v.u16 = b.u16[lo:hi:hi]
		case I32:
			v.i32 = b.i32[lo:hi:hi]
		case U8:
			v.u8 = b.u8[lo:hi:hi]
		}
	}
	return v
}

// F32 is the memory of a host F32 Buffer, Len elements. It panics (naming
// the dtype or the device) for any other Buffer: only CPU backends and
// tests on host buffers call it.
func (b Buffer) F32() []float32 {
	b.mustHost("F32", F32)
	return b.f32[:b.n]
}

// BF16 is the memory of a host BF16 Buffer (raw bits); see F32.
func (b Buffer) BF16() []uint16 {
	b.mustHost("BF16", BF16)
	return b.u16[:b.n]
}

// U16 is the memory of a host BF16 or F16 Buffer (raw 16-bit patterns,
// for ops that move bits without reading them); see F32.
func (b Buffer) U16() []uint16 {
	if b.dev != nil {
		panic("kernels: Buffer.U16: device memory is not host memory")
	}
	if b.dtype != BF16 && b.dtype != F16 {
		panic(fmt.Sprintf("kernels: Buffer.U16: buffer holds %v", b.dtype))
	}
	return b.u16[:b.n]
}

// I32 is the memory of a host I32 Buffer; see F32.
func (b Buffer) I32() []int32 {
	b.mustHost("I32", I32)
	return b.i32[:b.n]
}

// U8 is the memory of a host U8 Buffer; see F32.
func (b Buffer) U8() []uint8 {
	b.mustHost("U8", U8)
	return b.u8[:b.n]
}

// Device is the allocation and element offset of a device Buffer (nil, 0
// for a host Buffer).
func (b Buffer) Device() (DeviceMem, int) { return b.dev, b.off }

func (b Buffer) mustHost(what string, dt DType) {
	if b.dev != nil {
		panic(fmt.Sprintf("kernels: Buffer.%s: device memory is not host memory", what))
	}
	if b.dtype != dt {
		panic(fmt.Sprintf("kernels: Buffer.%s: buffer holds %v", what, b.dtype))
	}
}

// String is the dtype and length, as in "F32[4096]".
func (b Buffer) String() string { return fmt.Sprintf("%v[%d]", b.dtype, b.n) }
