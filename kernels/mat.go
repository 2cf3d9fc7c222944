package kernels

import (
	"fmt"
	"math"
)

// DType is the storage type of a weight matrix or a Buffer.
type DType uint8

// Storage types, as safetensors names them. Weights are F32, BF16 or F16;
// a Buffer is F32, BF16, F16, I32 or U8.
const (
	F32  DType = iota // IEEE float32
	BF16              // bfloat16: the top 16 bits of a float32
	F16               // IEEE float16
	I32               // int32 (token ids, row indices)
	U8                // uint8 (PolicyLoss's clip flags)
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
	case U8:
		return "U8"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the number of bytes of one element of d.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case U8:
		return 1
	}
	return 2
}

// Mat is a row-major [Rows, Cols] weight matrix in its storage type:
// Data holds Rows·Cols elements of DType (F32, BF16 or F16), in host memory
// (a Go slice, which may view a memory-mapped file and must then not be
// written) or in a backend's memory (see Backend.Import). DType is always
// Data's dtype; the constructors below keep them together.
type Mat struct {
	DType DType
	Rows  int
	Cols  int
	Data  Buffer // [Rows, Cols]
}

// MatF32 wraps data as an F32 Mat of the given shape (no copy).
func MatF32(data []float32, rows, cols int) Mat {
	return Mat{DType: F32, Rows: rows, Cols: cols, Data: HostF32(data)}
}

// MatBF16 wraps raw bfloat16 bits as a BF16 Mat of the given shape (no
// copy).
func MatBF16(data []uint16, rows, cols int) Mat {
	return Mat{DType: BF16, Rows: rows, Cols: cols, Data: HostBF16(data)}
}

// MatF16 wraps raw IEEE half bits as an F16 Mat of the given shape (no
// copy).
func MatF16(data []uint16, rows, cols int) Mat {
	return Mat{DType: F16, Rows: rows, Cols: cols, Data: HostF16(data)}
}

// MatOf makes a Mat of the given shape over data, in data's dtype.
func MatOf(data Buffer, rows, cols int) Mat {
	return Mat{DType: data.DType(), Rows: rows, Cols: cols, Data: data}
}

// NewHostMat returns a zeroed host Mat of dtype dt (F32, BF16 or F16)
// and the given shape. It panics for another dtype or a negative shape.
func NewHostMat(dt DType, rows, cols int) Mat {
	if dt != F32 && dt != BF16 && dt != F16 {
		panic(fmt.Sprintf("kernels: NewHostMat: dtype %v: want F32, BF16 or F16", dt))
	}
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("kernels: NewHostMat: negative shape [%d,%d]", rows, cols))
	}
	b, err := AllocHost(dt, rows*cols)
	if err != nil {
		panic(err)
	}
	return MatOf(b, rows, cols)
}

// Len is Rows·Cols.
func (w Mat) Len() int { return w.Rows * w.Cols }

// F32 is the data of a host F32 Mat (w.Data.F32()); it panics otherwise.
func (w Mat) F32() []float32 { return w.Data.F32() }

// U16 is the raw bits of a host BF16 or F16 Mat (w.Data.U16()); it panics
// otherwise.
func (w Mat) U16() []uint16 { return w.Data.U16() }

// Row decodes row i of a host Mat into dst[Cols] as float32.
func (w Mat) Row(dst []float32, i int) {
	c := w.Cols
	switch w.DType {
	case F32:
		copy(dst[:c], w.F32()[i*c:(i+1)*c])
	case BF16:
		src := w.U16()[i*c : (i+1)*c]
		for j, b := range src {
			dst[j] = BF16ToF32(b)
		}
	case F16:
		src := w.U16()[i*c : (i+1)*c]
		for j, b := range src {
			dst[j] = F16ToF32(b)
		}
	default:
		panic("kernels: Mat.Row: unknown dtype " + w.DType.String())
	}
}

// At returns element (i, j) of a host Mat as float32.
func (w Mat) At(i, j int) float32 {
	k := i*w.Cols + j
	switch w.DType {
	case F32:
		return w.Data.F32()[k]
	case BF16:
		return BF16ToF32(w.Data.U16()[k])
	case F16:
		return F16ToF32(w.Data.U16()[k])
	}
	panic("kernels: Mat.At: unknown dtype " + w.DType.String())
}

// Check panics unless w's Data is a Buffer of its DType (F32, BF16 or
// F16) holding Rows·Cols elements; op names the caller in the message.
func (w Mat) Check(op string) {
	n := w.Rows * w.Cols
	if w.Rows < 0 || w.Cols < 0 {
		panic(fmt.Sprintf("kernels: %s: negative weight shape [%d,%d]", op, w.Rows, w.Cols))
	}
	switch w.DType {
	case F32, BF16, F16:
	default:
		panic(fmt.Sprintf("kernels: %s: weight dtype %v: want F32, BF16 or F16", op, w.DType))
	}
	if w.Data.DType() != w.DType {
		panic(fmt.Sprintf("kernels: %s: %v weight [%d,%d] holds %v data", op, w.DType, w.Rows, w.Cols, w.Data.DType()))
	}
	if w.Data.Len() < n {
		panic(fmt.Sprintf("kernels: %s: %v weight [%d,%d] has %d elements", op, w.DType, w.Rows, w.Cols, w.Data.Len()))
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
