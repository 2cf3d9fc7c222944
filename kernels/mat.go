package kernels

import (
	"fmt"
	"math"
)

// DType is the storage type of a weight matrix or a Buffer.
type DType uint8

// Storage types, as safetensors names them. Weights are F32, BF16 or F16;
// a Buffer is F32, BF16 or I32.
const (
	F32  DType = iota // IEEE float32
	BF16              // bfloat16: the top 16 bits of a float32
	F16               // IEEE float16
	I32               // int32 (token ids, row indices)
)

// String returns the safetensors name of d.
func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case BF16:
		return "BF16"
	case F16:
		return "F16"
	case I32:
		return "I32"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the number of bytes of one element of d.
func (d DType) Size() int {
	if d == F32 || d == I32 {
		return 4
	}
	return 2
}

// Mat is a row-major [Rows, Cols] weight matrix in its storage type: F32
// holds the data when DType is F32, U16 holds the raw bits for BF16 and F16.
// A Mat does not own its memory; it may view a memory-mapped file, and must
// then not be written.
type Mat struct {
	DType DType
	Rows  int
	Cols  int
	F32   []float32 // [Rows, Cols] when DType == F32
	U16   []uint16  // [Rows, Cols] raw bits when DType is BF16 or F16
}

// MatF32 wraps data as an F32 Mat of the given shape.
func MatF32(data []float32, rows, cols int) Mat {
	return Mat{DType: F32, Rows: rows, Cols: cols, F32: data}
}

// Len is Rows·Cols.
func (w Mat) Len() int { return w.Rows * w.Cols }

// Row decodes row i into dst[Cols] as float32.
func (w Mat) Row(dst []float32, i int) {
	c := w.Cols
	switch w.DType {
	case F32:
		copy(dst[:c], w.F32[i*c:(i+1)*c])
	case BF16:
		src := w.U16[i*c : (i+1)*c]
		for j, b := range src {
			dst[j] = BF16ToF32(b)
		}
	case F16:
		src := w.U16[i*c : (i+1)*c]
		for j, b := range src {
			dst[j] = F16ToF32(b)
		}
	default:
		panic("kernels: Mat.Row: unknown dtype " + w.DType.String())
	}
}

// At returns element (i, j) as float32.
func (w Mat) At(i, j int) float32 {
	k := i*w.Cols + j
	switch w.DType {
	case F32:
		return w.F32[k]
	case BF16:
		return BF16ToF32(w.U16[k])
	case F16:
		return F16ToF32(w.U16[k])
	}
	panic("kernels: Mat.At: unknown dtype " + w.DType.String())
}

// Check panics unless w's backing slice holds Rows·Cols elements of its
// dtype; op names the caller in the message.
func (w Mat) Check(op string) {
	n := w.Rows * w.Cols
	if w.Rows < 0 || w.Cols < 0 {
		panic(fmt.Sprintf("kernels: %s: negative weight shape [%d,%d]", op, w.Rows, w.Cols))
	}
	switch w.DType {
	case F32:
		if len(w.F32) < n {
			panic(fmt.Sprintf("kernels: %s: F32 weight [%d,%d] has %d elements", op, w.Rows, w.Cols, len(w.F32)))
		}
	case BF16, F16:
		if len(w.U16) < n {
			panic(fmt.Sprintf("kernels: %s: %s weight [%d,%d] has %d elements", op, w.DType, w.Rows, w.Cols, len(w.U16)))
		}
	default:
		panic(fmt.Sprintf("kernels: %s: unknown dtype %d", op, w.DType))
	}
}

// BF16ToF32 widens bfloat16 bits exactly.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds f to the nearest bfloat16, ties to even; NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it quiet and a NaN
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F16ToF32 widens IEEE half-precision bits exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		man &= 0x3ff
		return math.Float32frombits(sign | e<<23 | man<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// F32ToF16 rounds f to the nearest IEEE half, ties to even, with overflow
// to ±Inf and gradual underflow.
func F32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23) & 0xff
	man := u & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		rest := man & ((1 << shift) - 1)
		v := man >> shift
		if rest > half || (rest == half && v&1 == 1) {
			v++
		}
		return sign | uint16(v)
	}
	v := uint32(e)<<10 | man>>13
	rest := man & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && v&1 == 1) {
		v++ // may carry into the exponent, which is the right rounding
	}
	return sign | uint16(v)
}
