package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// A GGUF reader for the tests: it parses a whole file independently of the
// writer's code paths (its own decoding of every value type), so a test
// can check every metadata key and tensor of an export.

// ggufFile is a parsed GGUF file.
type ggufFile struct {
	version  uint32
	keys     []string       // metadata keys in file order
	kv       map[string]any // uint8 … float64, bool, string, []string, []int32, or []any for other arrays
	tensors  []ggufTensorInfo
	dataOff  uint64 // start of the data section (aligned)
	fileSize uint64
	raw      []byte
}

// ggufTensorInfo is one tensor-info entry.
type ggufTensorInfo struct {
	name   string
	dims   []uint64
	typ    uint32
	offset uint64 // from dataOff
}

// data returns the bytes of tensor t.
func (f *ggufFile) data(t ggufTensorInfo) ([]byte, error) {
	n := uint64(1)
	for _, d := range t.dims {
		n *= d
	}
	switch t.typ {
	case ggmlTypeF32:
		n *= 4
	case ggmlTypeF16, ggmlTypeBF16:
		n *= 2
	default:
		return nil, fmt.Errorf("tensor %s: unexpected type %d", t.name, t.typ)
	}
	start := f.dataOff + t.offset
	if start+n > uint64(len(f.raw)) {
		return nil, fmt.Errorf("tensor %s: [%d, %d) past the end of the file (%d bytes)", t.name, start, start+n, len(f.raw))
	}
	return f.raw[start : start+n], nil
}

// ggufReader decodes little-endian values from a byte slice.
type ggufReader struct {
	r   *bytes.Reader
	err error
}

func (r *ggufReader) read(n int) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.err = err
	}
	return b
}

func (r *ggufReader) u8() uint8   { return r.read(1)[0] }
func (r *ggufReader) u16() uint16 { return binary.LittleEndian.Uint16(r.read(2)) }
func (r *ggufReader) u32() uint32 { return binary.LittleEndian.Uint32(r.read(4)) }
func (r *ggufReader) u64() uint64 { return binary.LittleEndian.Uint64(r.read(8)) }

func (r *ggufReader) str() string {
	n := r.u64()
	if n > uint64(r.r.Len()) {
		r.err = fmt.Errorf("string of %d bytes with %d left", n, r.r.Len())
		return ""
	}
	return string(r.read(int(n)))
}

// value decodes one value of GGUF type typ.
func (r *ggufReader) value(typ uint32) any {
	switch typ {
	case ggufTypeUint8:
		return r.u8()
	case ggufTypeInt8:
		return int8(r.u8())
	case ggufTypeUint16:
		return r.u16()
	case ggufTypeInt16:
		return int16(r.u16())
	case ggufTypeUint32:
		return r.u32()
	case ggufTypeInt32:
		return int32(r.u32())
	case ggufTypeFloat32:
		return math.Float32frombits(r.u32())
	case ggufTypeBool:
		switch b := r.u8(); b {
		case 0, 1:
			return b == 1
		default:
			r.err = fmt.Errorf("bool byte %d", b)
			return false
		}
	case ggufTypeString:
		return r.str()
	case ggufTypeUint64:
		return r.u64()
	case ggufTypeInt64:
		return int64(r.u64())
	case ggufTypeFloat64:
		return math.Float64frombits(r.u64())
	case ggufTypeArray:
		et, n := r.u32(), r.u64()
		if n > uint64(r.r.Len()) {
			r.err = fmt.Errorf("array of %d elements with %d bytes left", n, r.r.Len())
			return nil
		}
		switch et {
		case ggufTypeString:
			out := make([]string, n)
			for i := range out {
				out[i] = r.str()
			}
			return out
		case ggufTypeInt32:
			out := make([]int32, n)
			for i := range out {
				out[i] = int32(r.u32())
			}
			return out
		default:
			out := make([]any, n)
			for i := range out {
				out[i] = r.value(et)
			}
			return out
		}
	}
	r.err = fmt.Errorf("unknown value type %d", typ)
	return nil
}

// readGGUFFile parses the GGUF file at path.
func readGGUFFile(path string) (*ggufFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &ggufReader{r: bytes.NewReader(raw)}
	if magic := string(r.read(4)); magic != "GGUF" {
		return nil, fmt.Errorf("magic %q", magic)
	}
	f := &ggufFile{version: r.u32(), kv: map[string]any{}, raw: raw, fileSize: uint64(len(raw))}
	nt, nkv := r.u64(), r.u64()
	for range nkv {
		k := r.str()
		typ := r.u32()
		v := r.value(typ)
		if r.err != nil {
			return nil, fmt.Errorf("metadata %q: %w", k, r.err)
		}
		if _, dup := f.kv[k]; dup {
			return nil, fmt.Errorf("metadata key %q twice", k)
		}
		f.keys = append(f.keys, k)
		f.kv[k] = v
	}
	for range nt {
		t := ggufTensorInfo{name: r.str()}
		nd := r.u32()
		for range nd {
			t.dims = append(t.dims, r.u64())
		}
		t.typ, t.offset = r.u32(), r.u64()
		if r.err != nil {
			return nil, fmt.Errorf("tensor info %q: %w", t.name, r.err)
		}
		f.tensors = append(f.tensors, t)
	}
	pos := uint64(len(raw) - r.r.Len())
	f.dataOff = (pos + 31) / 32 * 32
	return f, nil
}
