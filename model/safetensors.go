package model

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/x/kernels"
)

// maxHeaderLen bounds a safetensors JSON header (the Rust reader's limit).
const maxHeaderLen = 100 << 20

// TensorInfo is one tensor entry of a safetensors header.
type TensorInfo struct {
	Name  string
	DType string // as written: "F32", "BF16", "F16", "I64", ...
	Shape []int  // dims, outermost first
	Begin int64  // byte offset in the data buffer
	End   int64  // one past the last byte
	elem  int    // bytes per element
	count int64  // number of elements
}

// Header is a parsed safetensors header.
type Header struct {
	Len      int64             // length of the JSON, bytes; data starts at 8+Len
	Metadata map[string]string // __metadata__
	Tensors  []TensorInfo      // ordered by Begin
}

var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"U16": 2, "I16": 2, "F16": 2, "BF16": 2,
	"U32": 4, "I32": 4, "F32": 4,
	"U64": 8, "I64": 8, "F64": 8,
}

// ParseHeader parses the header of a safetensors file of fileSize bytes
// from its first bytes (at least 8, and 8+header length to succeed). It
// checks that every tensor's byte range matches its dtype and shape and that
// the tensors tile the data buffer exactly, as the reference reader does.
func ParseHeader(prefix []byte, fileSize int64) (Header, error) {
	if len(prefix) < 8 || fileSize < 8 {
		return Header{}, errors.New("safetensors: file shorter than the 8-byte header length")
	}
	n := binary.LittleEndian.Uint64(prefix[:8])
	if n > maxHeaderLen {
		return Header{}, fmt.Errorf("safetensors: header length %d exceeds %d", n, maxHeaderLen)
	}
	if int64(n) > fileSize-8 {
		return Header{}, fmt.Errorf("safetensors: header length %d runs past the end of the %d-byte file", n, fileSize)
	}
	if int64(len(prefix)) < 8+int64(n) {
		return Header{}, fmt.Errorf("safetensors: have %d bytes of a %d-byte header", len(prefix)-8, n)
	}
	raw := prefix[8 : 8+n]
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return Header{}, fmt.Errorf("safetensors: header JSON: %w", err)
	}
	h := Header{Len: int64(n)}
	dataLen := fileSize - 8 - int64(n)
	for name, msg := range entries {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &h.Metadata); err != nil {
				return Header{}, fmt.Errorf("safetensors: __metadata__: %w", err)
			}
			continue
		}
		var e struct {
			DType       string  `json:"dtype"`
			Shape       []int64 `json:"shape"`
			DataOffsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return Header{}, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		size, ok := dtypeSizes[e.DType]
		if !ok {
			return Header{}, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", name, e.DType)
		}
		if e.Shape == nil {
			return Header{}, fmt.Errorf("safetensors: tensor %q: missing shape", name)
		}
		if len(e.DataOffsets) != 2 {
			return Header{}, fmt.Errorf("safetensors: tensor %q: data_offsets must be [begin, end]", name)
		}
		count := int64(1)
		shape := make([]int, len(e.Shape))
		for i, d := range e.Shape {
			if d < 0 || d > math.MaxInt32 {
				return Header{}, fmt.Errorf("safetensors: tensor %q: dimension %d out of range", name, d)
			}
			if d != 0 && count > math.MaxInt64/int64(size)/d {
				return Header{}, fmt.Errorf("safetensors: tensor %q: shape %v overflows", name, e.Shape)
			}
			count *= d
			shape[i] = int(d)
		}
		b, end := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || end < b || end > dataLen {
			return Header{}, fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] outside the %d-byte data buffer", name, b, end, dataLen)
		}
		if end-b != count*int64(size) {
			return Header{}, fmt.Errorf("safetensors: tensor %q: %s%v needs %d bytes, data_offsets give %d", name, e.DType, e.Shape, count*int64(size), end-b)
		}
		h.Tensors = append(h.Tensors, TensorInfo{Name: name, DType: e.DType, Shape: shape, Begin: b, End: end, elem: size, count: count})
	}
	slices.SortFunc(h.Tensors, func(a, b TensorInfo) int {
		if a.Begin != b.Begin {
			return int(min(max(a.Begin-b.Begin, -1), 1))
		}
		if a.End != b.End {
			return int(min(max(a.End-b.End, -1), 1))
		}
		return strings.Compare(a.Name, b.Name)
	})
	var at int64
	for _, t := range h.Tensors {
		if t.Begin != at {
			return Header{}, fmt.Errorf("safetensors: tensor %q starts at %d, want %d (tensors must tile the data buffer)", t.Name, t.Begin, at)
		}
		at = t.End
	}
	if at != dataLen {
		return Header{}, fmt.Errorf("safetensors: tensors cover %d bytes of a %d-byte data buffer", at, dataLen)
	}
	return h, nil
}

// SafetensorsFile is an open safetensors file, memory-mapped where the
// platform allows. Mats it returns view the mapping (when aligned and
// little-endian) and are valid until Close.
type SafetensorsFile struct {
	Path   string
	Header Header
	data   []byte // the whole file
	byName map[string]int
	unmap  func() error
}

// OpenSafetensors opens, maps and validates the header of a safetensors file.
func OpenSafetensors(path string) (*SafetensorsFile, error) {
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: open %s: %w", path, err)
	}
	h, err := ParseHeader(data, int64(len(data)))
	if err != nil {
		_ = unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &SafetensorsFile{Path: path, Header: h, data: data, unmap: unmap, byName: make(map[string]int, len(h.Tensors))}
	for i, t := range h.Tensors {
		f.byName[t.Name] = i
	}
	return f, nil
}

// Close unmaps the file; Mats viewing it must not be used afterwards.
func (f *SafetensorsFile) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.data = nil, nil
	return err
}

// Tensor returns the header entry of the named tensor.
func (f *SafetensorsFile) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Header.Tensors[i], true
}

// bytes returns the raw little-endian data of t.
func (f *SafetensorsFile) bytes(t TensorInfo) []byte {
	off := 8 + f.Header.Len
	return f.data[off+t.Begin : off+t.End]
}

// Mat returns the named 2-D F32, BF16 or F16 tensor of shape [rows, cols]
// in its stored type, viewing the mapping when the data is aligned.
func (f *SafetensorsFile) Mat(name string, rows, cols int) (kernels.Mat, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return kernels.Mat{}, fmt.Errorf("tensor %s: missing from %s", name, f.Path)
	}
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != cols {
		return kernels.Mat{}, fmt.Errorf("tensor %s: shape %v, want [%d %d]", name, t.Shape, rows, cols)
	}
	raw := f.bytes(t)
	switch t.DType {
	case "F32":
		return kernels.MatF32(viewF32(raw), rows, cols), nil
	case "BF16":
		return kernels.MatBF16(viewU16(raw), rows, cols), nil
	case "F16":
		return kernels.MatF16(viewU16(raw), rows, cols), nil
	}
	return kernels.Mat{}, fmt.Errorf("tensor %s: dtype %s is not supported (want F32, BF16 or F16)", name, t.DType)
}

// Float32s returns a float32 copy of the named F32, BF16 or F16 tensor,
// checking that its shape equals shape.
func (f *SafetensorsFile) Float32s(name string, shape ...int) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("tensor %s: missing from %s", name, f.Path)
	}
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("tensor %s: shape %v, want %v", name, t.Shape, shape)
	}
	raw := f.bytes(t)
	out := make([]float32, t.count)
	switch t.DType {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case "BF16":
		for i := range out {
			out[i] = kernels.BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case "F16":
		for i := range out {
			out[i] = kernels.F16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	default:
		return nil, fmt.Errorf("tensor %s: dtype %s is not supported (want F32, BF16 or F16)", name, t.DType)
	}
	return out, nil
}

// littleEndian reports whether the host stores integers little-endian, so
// that file bytes can be viewed as []uint16 / []float32 in place.
func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// viewU16 reinterprets little-endian bytes as []uint16, copying only when
// the bytes are misaligned or the host is big-endian.
func viewU16(raw []byte) []uint16 {
	n := len(raw) / 2
	if n == 0 {
		return []uint16{}
	}
	if littleEndian() && uintptr(unsafe.Pointer(&raw[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), n)
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(raw[2*i:])
	}
	return out
}

// viewF32 reinterprets little-endian bytes as []float32, copying only when
// the bytes are misaligned or the host is big-endian.
func viewF32(raw []byte) []float32 {
	n := len(raw) / 4
	if n == 0 {
		return []float32{}
	}
	if littleEndian() && uintptr(unsafe.Pointer(&raw[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}
