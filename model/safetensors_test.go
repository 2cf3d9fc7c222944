package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// rawSafetensors builds a file from a header JSON and a data buffer.
func rawSafetensors(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	out = append(out, header...)
	return append(out, data...)
}

func TestWriteSafetensorsLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.safetensors")
	bf := []uint16{kernels.F32ToBF16(1.5), kernels.F32ToBF16(-2), kernels.F32ToBF16(0.25), 0, 1, 2}
	tensors := []Tensor{
		F32Tensor("z.weight", []float32{1, 2, 3}, 3),
		{Name: "a.weight", Shape: []int{2, 3}, DType: kernels.BF16, U16: bf},
		F32Tensor("m.scalar", []float32{7}),
	}
	require.NoError(t, WriteSafetensors(path, tensors, nil))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(raw)
	assert.Zero(t, n%8, "header padded to 8")
	hdr := string(raw[8 : 8+n])
	assert.Regexp(t, `^\{"__metadata__":\{"format":"pt"\},"a\.weight":.*"m\.scalar":.*"z\.weight":.*\} *$`, hdr, "metadata first, names in order, space padding")
	var parsed map[string]any
	require.NoError(t, json.Unmarshal([]byte(hdr), &parsed))

	f, err := OpenSafetensors(path)
	require.NoError(t, err)
	defer f.Close()
	ti, ok := f.Tensor("a.weight")
	require.True(t, ok)
	assert.Equal(t, TensorInfo{Name: "a.weight", DType: "BF16", Shape: []int{2, 3}, Begin: 0, End: 12, elem: 2, count: 6}, ti)
	w, err := f.Mat("a.weight", 2, 3)
	require.NoError(t, err)
	assert.Equal(t, kernels.BF16, w.DType)
	assert.Equal(t, bf, w.U16())
	assert.Equal(t, float32(-2), w.At(0, 1))
	z, err := f.Float32s("z.weight", 3)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, z)
	s, err := f.Float32s("m.scalar")
	require.NoError(t, err)
	assert.Equal(t, []float32{7}, s)
	ab, err := f.Float32s("a.weight", 2, 3)
	require.NoError(t, err)
	assert.Equal(t, float32(1.5), ab[0])

	_, err = f.Mat("a.weight", 3, 2)
	assert.ErrorContains(t, err, "a.weight")
	_, err = f.Mat("nope", 1, 1)
	assert.ErrorContains(t, err, "nope")

	assert.Error(t, WriteSafetensors(path, []Tensor{F32Tensor("x", []float32{1}, 2)}, nil), "short data")
	assert.Error(t, WriteSafetensors(path, []Tensor{F32Tensor("x", nil), F32Tensor("x", nil)}, nil), "duplicate")
}

func TestMisalignedDataIsCopied(t *testing.T) {
	// A header of odd length puts the data at an odd offset: views must
	// fall back to copies and still decode right.
	hdr := `{"w":{"dtype":"F16","shape":[1,2],"data_offsets":[0,4]},"f":{"dtype":"F32","shape":[1,1],"data_offsets":[4,8]}}`
	if len(hdr)%2 == 0 {
		hdr += " "
	}
	data := binary.LittleEndian.AppendUint16(nil, kernels.F32ToF16(0.5))
	data = binary.LittleEndian.AppendUint16(data, kernels.F32ToF16(-3))
	data = binary.LittleEndian.AppendUint32(data, 0x3fc00000) // 1.5
	path := filepath.Join(t.TempDir(), "odd.safetensors")
	require.NoError(t, os.WriteFile(path, rawSafetensors(hdr, data), 0o644))
	f, err := OpenSafetensors(path)
	require.NoError(t, err)
	defer f.Close()
	w, err := f.Mat("w", 1, 2)
	require.NoError(t, err)
	assert.Equal(t, []float32{0.5, -3}, []float32{w.At(0, 0), w.At(0, 1)})
	g, err := f.Mat("f", 1, 1)
	require.NoError(t, err)
	assert.Equal(t, float32(1.5), g.At(0, 0))
}

func TestParseHeaderErrors(t *testing.T) {
	f32x2 := make([]byte, 8)
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "shorter"},
		{"header_past_end", rawSafetensors(`{}`, nil)[:9], "past the end"},
		{"huge_header", binary.LittleEndian.AppendUint64(nil, 1<<40), "exceeds"},
		{"bad_json", rawSafetensors(`{"a":`, nil), "header JSON"},
		{"unknown_dtype", rawSafetensors(`{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}}`, f32x2), "unknown dtype"},
		{"size_mismatch", rawSafetensors(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, f32x2), "needs 12 bytes"},
		{"outside", rawSafetensors(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, f32x2), "outside"},
		{"gap", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32x2), "tile"},
		{"overlap", rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32x2), "tile"},
		{"trailing", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32x2), "cover 4 bytes"},
		{"negative_dim", rawSafetensors(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, f32x2), "dimension"},
		{"overflow", rawSafetensors(`{"a":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,8]}}`, f32x2), "overflows"},
		{"no_offsets", rawSafetensors(`{"a":{"dtype":"F32","shape":[2]}}`, f32x2), "data_offsets"},
		{"no_shape", rawSafetensors(`{"a":{"dtype":"F32","data_offsets":[0,8]}}`, f32x2), "shape"},
		{"bad_metadata", rawSafetensors(`{"__metadata__":{"format":1}}`, nil), "__metadata__"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHeader(c.file, int64(len(c.file)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(rawSafetensors(`{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(rawSafetensors(`{"a":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]},"b":{"dtype":"F16","shape":[],"data_offsets":[4,6]}}`, make([]byte, 6)))
	f.Add(rawSafetensors(`{}`, nil))
	f.Fuzz(func(t *testing.T, file []byte) {
		h, err := ParseHeader(file, int64(len(file)))
		if err != nil {
			return
		}
		// A header that parses describes byte ranges inside the file
		// that tile the data buffer.
		at := int64(0)
		for _, ti := range h.Tensors {
			require.Equal(t, at, ti.Begin)
			require.LessOrEqual(t, ti.Begin, ti.End)
			at = ti.End
		}
		require.Equal(t, int64(len(file))-8-h.Len, at)
		// Reading every tensor through a file over these bytes never
		// panics: supported ones decode, others are errors.
		f := &SafetensorsFile{Path: "fuzz", Header: h, data: file, byName: map[string]int{}}
		for i, ti := range h.Tensors {
			f.byName[ti.Name] = i
		}
		for _, ti := range h.Tensors {
			v, err := f.Float32s(ti.Name, ti.Shape...)
			if err == nil {
				require.Len(t, v, int(ti.count))
			}
			if len(ti.Shape) == 2 {
				if w, err := f.Mat(ti.Name, ti.Shape[0], ti.Shape[1]); err == nil {
					w.Check("fuzz")
				}
			}
		}
	})
}

func TestWriteSafetensorsMatchesReferenceWriter(t *testing.T) {
	// Rewriting the tiny checkpoint's tensors reproduces the file the
	// reference generator (Hugging Face layout) wrote, byte for byte.
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, WriteSafetensors(path, tinyTensors(t), nil))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join(tinyDir, "model.safetensors"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "rewritten file differs from the reference (%d vs %d bytes)", len(got), len(want))
}
