package model

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/x/internal/atomicfile"
	"github.com/x/kernels"
)

// Tensor is one named tensor to write: F32 data when DType is F32, raw
// bf16/f16 bits in U16 otherwise.
type Tensor struct {
	Name  string
	Shape []int
	DType kernels.DType
	F32   []float32
	U16   []uint16
}

// F32Tensor is a float32 Tensor named name with the given shape.
func F32Tensor(name string, data []float32, shape ...int) Tensor {
	return Tensor{Name: name, Shape: shape, DType: kernels.F32, F32: data}
}

// MatTensor is a Tensor holding w as stored (F32, BF16 or F16).
func MatTensor(name string, w kernels.Mat) Tensor {
	t := Tensor{Name: name, Shape: []int{w.Rows, w.Cols}, DType: w.DType}
	if w.DType == kernels.F32 {
		t.F32 = w.F32()
	} else {
		t.U16 = w.U16()
	}
	return t
}

func (t Tensor) count() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// WriteSafetensors writes tensors to path in the layout Hugging Face's
// writer uses: tensors in name order without gaps, __metadata__ (the given
// metadata, or {"format": "pt"} when nil) first in the header, and the
// header padded with spaces to a multiple of 8 bytes. The file is written
// to a temporary name and renamed into place.
func WriteSafetensors(path string, tensors []Tensor, metadata map[string]string) error {
	return writeSafetensors(path, tensors, metadata, nil)
}

// writeSafetensors is WriteSafetensors; when fill is not nil, each tensor's
// data is left nil in tensors and fill produces it just before it is
// written, so a large checkpoint never sits in memory whole.
func writeSafetensors(path string, tensors []Tensor, metadata map[string]string, fill func(Tensor) Tensor) (err error) {
	ts := slices.Clone(tensors)
	slices.SortFunc(ts, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	for i, t := range ts {
		if t.Name == "" || t.Name == "__metadata__" {
			return fmt.Errorf("safetensors: write %s: bad tensor name %q", path, t.Name)
		}
		if i > 0 && ts[i-1].Name == t.Name {
			return fmt.Errorf("safetensors: write %s: duplicate tensor %s", path, t.Name)
		}
		if fill != nil {
			continue
		}
		n := t.count()
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("safetensors: write %s: tensor %s has negative shape %v", path, t.Name, t.Shape)
			}
		}
		switch t.DType {
		case kernels.F32:
			if len(t.F32) < n {
				return fmt.Errorf("safetensors: write %s: tensor %s %v has %d float32s", path, t.Name, t.Shape, len(t.F32))
			}
		case kernels.BF16, kernels.F16:
			if len(t.U16) < n {
				return fmt.Errorf("safetensors: write %s: tensor %s %v has %d uint16s", path, t.Name, t.Shape, len(t.U16))
			}
		default:
			return fmt.Errorf("safetensors: write %s: tensor %s: unknown dtype %v", path, t.Name, t.DType)
		}
	}
	if metadata == nil {
		metadata = map[string]string{"format": "pt"}
	}
	var hdr bytes.Buffer
	meta, err := json.Marshal(metadata)
	if err != nil {
		return fmt.Errorf("safetensors: write %s: metadata: %w", path, err)
	}
	hdr.WriteString(`{"__metadata__":`)
	hdr.Write(meta)
	var off int64
	for _, t := range ts {
		name, _ := json.Marshal(t.Name)
		shape, _ := json.Marshal(append([]int{}, t.Shape...))
		size := int64(t.count()) * int64(t.DType.Size())
		fmt.Fprintf(&hdr, `,%s:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}`, name, t.DType, shape, off, off+size)
		off += size
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}

	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := atomicfile.CreateTemp(dir, "."+base+".tmp")
	if err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(hdr.Len()))
	w.Write(lenBuf[:])
	w.Write(hdr.Bytes())
	var buf [4]byte
	for _, t := range ts {
		n := t.count()
		if fill != nil {
			t = fill(t)
		}
		if t.DType == kernels.F32 {
			for _, v := range t.F32[:n] {
				binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
				w.Write(buf[:4])
			}
			continue
		}
		for _, v := range t.U16[:n] {
			binary.LittleEndian.PutUint16(buf[:], v)
			w.Write(buf[:2])
		}
	}
	if err = w.Flush(); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	return nil
}
