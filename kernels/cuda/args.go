package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
)

// args is a kernel's parameter block as the C ABI lays it out (what the
// driver copies at launch, CU_LAUNCH_PARAM_BUFFER_POINTER): each value at
// an offset aligned to its size, little-endian. sig records each value's
// class, one letter per parameter ('p' pointer, 'i' 32-bit integer, 'l'
// 64-bit integer, 'f' float, 'd' double), so the host twin checks every
// launch against the kernel's C signature before it runs, and
// TestKernelABI reads the chains that build it (argsOf().ptr(...).i32(...))
// against the .cu signatures without running anything.
type args struct {
	b   []byte
	sig []byte
}

// argsOf starts a parameter block.
func argsOf() *args { return &args{b: make([]byte, 0, 64), sig: make([]byte, 0, 8)} }

func (a *args) align(size int) {
	for len(a.b)%size != 0 {
		a.b = append(a.b, 0)
	}
}

// ptr appends a device pointer.
func (a *args) ptr(p devptr) *args {
	a.align(8)
	a.b = binary.LittleEndian.AppendUint64(a.b, uint64(p))
	a.sig = append(a.sig, 'p')
	return a
}

// i32 appends a C int; it panics if v does not fit (a shape no kernel of
// this package takes).
func (a *args) i32(v int) *args {
	if v > math.MaxInt32 || v < math.MinInt32 {
		panic(fmt.Sprintf("kernels/cuda: argument %d does not fit a C int", v))
	}
	a.align(4)
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(int32(v)))
	a.sig = append(a.sig, 'i')
	return a
}

// i64 appends a C long.
func (a *args) i64(v int) *args {
	a.align(8)
	a.b = binary.LittleEndian.AppendUint64(a.b, uint64(int64(v)))
	a.sig = append(a.sig, 'l')
	return a
}

// f32 appends a float.
func (a *args) f32(v float32) *args {
	a.align(4)
	a.b = binary.LittleEndian.AppendUint32(a.b, math.Float32bits(v))
	a.sig = append(a.sig, 'f')
	return a
}

// f64 appends a double.
func (a *args) f64(v float64) *args {
	a.align(8)
	a.b = binary.LittleEndian.AppendUint64(a.b, math.Float64bits(v))
	a.sig = append(a.sig, 'd')
	return a
}
