package model

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/x/internal/atomicfile"
	"github.com/x/kernels"
)

// GGUF export: a Qwen3 model written as llama.cpp's convert_hf_to_gguf.py
// writes Qwen3ForCausalLM, so llama.cpp and ollama load what the project
// trained (merge adapters first with MergeLoRA). The file is GGUF version
// 3, little-endian, 32-byte aligned:
//
//   - metadata: general.architecture "qwen3", general.type, general.name,
//     general.file_type, general.quantization_version, the qwen3.* shape
//     keys (block_count, context_length, embedding_length,
//     feed_forward_length, attention.head_count, attention.head_count_kv,
//     rope.freq_base, attention.layer_norm_rms_epsilon,
//     attention.key_length, attention.value_length) and the tokenizer
//     (GGUFVocab);
//   - tensors under gguf-py's qwen3 names (token_embd, blk.N.attn_q, ...,
//     output_norm; output only when the embeddings are untied), with no
//     q/k permutation (Qwen3's RoPE is rotate-half, as in Hugging Face),
//     1-D tensors F32 and matrices in their storage type (F32, BF16 or
//     F16) with the checkpoint's bits.

// GGUF metadata value types (the GGUF specification's gguf_type).
const (
	ggufTypeUint8   uint32 = 0
	ggufTypeInt8    uint32 = 1
	ggufTypeUint16  uint32 = 2
	ggufTypeInt16   uint32 = 3
	ggufTypeUint32  uint32 = 4
	ggufTypeInt32   uint32 = 5
	ggufTypeFloat32 uint32 = 6
	ggufTypeBool    uint32 = 7
	ggufTypeString  uint32 = 8
	ggufTypeArray   uint32 = 9
	ggufTypeUint64  uint32 = 10
	ggufTypeInt64   uint32 = 11
	ggufTypeFloat64 uint32 = 12
)

// ggml tensor types of the tensors a Qwen3 export holds.
const (
	ggmlTypeF32  uint32 = 0
	ggmlTypeF16  uint32 = 1
	ggmlTypeBF16 uint32 = 30
)

// llama.cpp's llama_ftype (general.file_type) of an unquantized export.
const (
	ggufFileTypeAllF32     uint32 = 0
	ggufFileTypeMostlyF16  uint32 = 1
	ggufFileTypeMostlyBF16 uint32 = 32
)

const (
	ggufMagic          = "GGUF"
	ggufVersion        = 3
	ggufAlignment      = 32 // general.alignment's default; not written
	ggufQuantVersion   = 2  // general.quantization_version the converter writes
	ggufDefaultContext = 32768
)

// GGUFOptions describe a GGUF export beyond the model's weights and Config.
type GGUFOptions struct {
	// Name is general.name; empty means "Qwen3".
	Name string
	// ContextLength is qwen3.context_length, the config's
	// max_position_embeddings (see GGUFContextLength); 0 means 32768,
	// transformers' Qwen3Config default.
	ContextLength int
	// Vocab is the tokenizer metadata (see ReadGGUFVocab); llama.cpp cannot
	// load a model without one, so it is required. len(Vocab.Tokens) must
	// be the model's vocabulary size.
	Vocab *GGUFVocab
}

// ggufKV is one metadata entry: a key and a value of type uint32, int32,
// float32, bool, string, []string or []int32.
type ggufKV struct {
	key string
	val any
}

// ggufTensor is one tensor of the export: its name, its dims in ggml
// order (ne[0] is the contiguous one: columns first), and its data.
type ggufTensor struct {
	name string
	dims []uint64
	typ  uint32
	f32  []float32 // for F32
	u16  []uint16  // for BF16 and F16
}

// bytes is the tensor's data size.
func (t *ggufTensor) bytes() uint64 {
	if t.typ == ggmlTypeF32 {
		return 4 * uint64(len(t.f32))
	}
	return 2 * uint64(len(t.u16))
}

// WriteGGUF writes m to path (through a temporary file renamed into place)
// as a GGUF file llama.cpp loads as a qwen3 model. The model must carry no
// adapters: merge them (MergeLoRA) first.
func WriteGGUF(path string, m *Model, opts GGUFOptions) error {
	if err := m.DownloadParams(); err != nil { // trained weights as training left them
		return fmt.Errorf("write gguf %s: %w", path, err)
	}
	kvs, tensors, err := ggufContents(m, opts)
	if err != nil {
		return fmt.Errorf("write gguf %s: %w", path, err)
	}
	tmp, err := atomicfile.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp")
	if err != nil {
		return fmt.Errorf("write gguf: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op error
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := writeGGUF(bw, kvs, tensors); err != nil {
		tmp.Close()
		return fmt.Errorf("write gguf %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("write gguf %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write gguf %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write gguf: %w", err)
	}
	return nil
}

// ggufContents lists the metadata and tensors of m's export.
func ggufContents(m *Model, opts GGUFOptions) ([]ggufKV, []ggufTensor, error) {
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			if nl.Linear.LoRA != nil {
				return nil, nil, fmt.Errorf("layer %d %s carries an adapter: merge it first (MergeLoRA)", li, nl.Name)
			}
		}
	}
	v := opts.Vocab
	if v == nil {
		return nil, nil, fmt.Errorf("no tokenizer vocabulary (GGUFOptions.Vocab): llama.cpp needs one to load the model")
	}
	if err := v.check(cfg.VocabSize); err != nil {
		return nil, nil, err
	}
	ctx := opts.ContextLength
	if ctx == 0 {
		ctx = ggufDefaultContext
	}
	if ctx < 0 || ctx > math.MaxUint32 {
		return nil, nil, fmt.Errorf("context length %d out of range", ctx)
	}
	name := opts.Name
	if name == "" {
		name = "Qwen3"
	}
	fileType, err := ggufFileType(m.Embed.DType)
	if err != nil {
		return nil, nil, fmt.Errorf("token_embd: %w", err)
	}
	kvs := []ggufKV{
		{"general.architecture", "qwen3"},
		{"general.type", "model"},
		{"general.name", name},
		{"qwen3.block_count", uint32(cfg.NumLayers)},
		{"qwen3.context_length", uint32(ctx)},
		{"qwen3.embedding_length", uint32(cfg.HiddenSize)},
		{"qwen3.feed_forward_length", uint32(cfg.IntermediateSize)},
		{"qwen3.attention.head_count", uint32(cfg.NumHeads)},
		{"qwen3.attention.head_count_kv", uint32(cfg.NumKVHeads)},
		{"qwen3.rope.freq_base", float32(cfg.RopeTheta)},
		{"qwen3.attention.layer_norm_rms_epsilon", cfg.RMSNormEps},
		{"qwen3.attention.key_length", uint32(cfg.HeadDim)},
		{"qwen3.attention.value_length", uint32(cfg.HeadDim)},
		{"general.file_type", fileType},
		{"general.quantization_version", uint32(ggufQuantVersion)},
	}
	kvs = append(kvs, v.metadata()...)

	var tensors []ggufTensor
	add := func(name string, w kernels.Mat) error {
		t, err := ggufMatTensor(name, w)
		if err != nil {
			return err
		}
		tensors = append(tensors, t)
		return nil
	}
	vec := func(name string, x []float32) {
		tensors = append(tensors, ggufTensor{name: name, dims: []uint64{uint64(len(x))}, typ: ggmlTypeF32, f32: x})
	}
	if err := add("token_embd.weight", m.Embed); err != nil {
		return nil, nil, err
	}
	for li := range m.Layers {
		l := &m.Layers[li]
		p := fmt.Sprintf("blk.%d.", li)
		vec(p+"attn_norm.weight", l.AttnNorm)
		for _, mt := range []struct {
			name string
			w    kernels.Mat
		}{
			{"attn_q.weight", l.Attn.Q.W}, {"attn_k.weight", l.Attn.K.W}, {"attn_v.weight", l.Attn.V.W},
			{"attn_output.weight", l.Attn.O.W},
		} {
			if err := add(p+mt.name, mt.w); err != nil {
				return nil, nil, err
			}
		}
		vec(p+"attn_q_norm.weight", l.Attn.QNorm)
		vec(p+"attn_k_norm.weight", l.Attn.KNorm)
		vec(p+"ffn_norm.weight", l.MLPNorm)
		for _, mt := range []struct {
			name string
			w    kernels.Mat
		}{{"ffn_gate.weight", l.MLP.Gate.W}, {"ffn_up.weight", l.MLP.Up.W}, {"ffn_down.weight", l.MLP.Down.W}} {
			if err := add(p+mt.name, mt.w); err != nil {
				return nil, nil, err
			}
		}
	}
	vec("output_norm.weight", m.Norm)
	if !cfg.TieWordEmbeddings {
		if err := add("output.weight", m.LMHead); err != nil {
			return nil, nil, err
		}
	}
	return kvs, tensors, nil
}

// ggufFileType is general.file_type for a model whose matrices are d.
func ggufFileType(d kernels.DType) (uint32, error) {
	switch d {
	case kernels.F32:
		return ggufFileTypeAllF32, nil
	case kernels.F16:
		return ggufFileTypeMostlyF16, nil
	case kernels.BF16:
		return ggufFileTypeMostlyBF16, nil
	}
	return 0, fmt.Errorf("no GGUF type for dtype %v", d)
}

// ggufMatTensor is the tensor of a [Rows, Cols] weight: dims (Cols, Rows).
func ggufMatTensor(name string, w kernels.Mat) (ggufTensor, error) {
	t := ggufTensor{name: name, dims: []uint64{uint64(w.Cols), uint64(w.Rows)}}
	n := w.Rows * w.Cols
	switch w.DType {
	case kernels.F32:
		t.typ, t.f32 = ggmlTypeF32, w.F32()
		if len(w.F32()) < n {
			return t, fmt.Errorf("%s: %d float32 values for %d×%d", name, len(w.F32()), w.Rows, w.Cols)
		}
		t.f32 = w.F32()[:n]
	case kernels.BF16, kernels.F16:
		t.typ = ggmlTypeBF16
		if w.DType == kernels.F16 {
			t.typ = ggmlTypeF16
		}
		if len(w.U16()) < n {
			return t, fmt.Errorf("%s: %d 16-bit values for %d×%d", name, len(w.U16()), w.Rows, w.Cols)
		}
		t.u16 = w.U16()[:n]
	default:
		return t, fmt.Errorf("%s: no GGUF type for dtype %v", name, w.DType)
	}
	return t, nil
}

// writeGGUF writes a whole GGUF file: header, metadata, tensor infos,
// padding, and the tensors' data, each aligned.
func writeGGUF(w io.Writer, kvs []ggufKV, tensors []ggufTensor) error {
	var hdr []byte
	hdr = append(hdr, ggufMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, ggufVersion)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(tensors)))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(kvs)))
	for _, kv := range kvs {
		var err error
		if hdr, err = appendGGUFKV(hdr, kv); err != nil {
			return err
		}
	}
	var off uint64
	for _, t := range tensors {
		hdr = appendGGUFString(hdr, t.name)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(t.dims)))
		for _, d := range t.dims {
			hdr = binary.LittleEndian.AppendUint64(hdr, d)
		}
		hdr = binary.LittleEndian.AppendUint32(hdr, t.typ)
		hdr = binary.LittleEndian.AppendUint64(hdr, off)
		off = ggufAlign(off + t.bytes())
	}
	hdr = append(hdr, make([]byte, ggufAlign(uint64(len(hdr)))-uint64(len(hdr)))...)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	buf := make([]byte, 0, 1<<16)
	var pos uint64
	for _, t := range tensors {
		if pad := ggufAlign(pos) - pos; pad > 0 {
			if _, err := w.Write(make([]byte, pad)); err != nil {
				return err
			}
			pos += pad
		}
		// Encode in chunks: a memory-mapped weight is read once, in order.
		for i := 0; i < len(t.f32); i += cap(buf) / 4 {
			buf = buf[:0]
			for _, x := range t.f32[i:min(len(t.f32), i+cap(buf)/4)] {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		for i := 0; i < len(t.u16); i += cap(buf) / 2 {
			buf = buf[:0]
			for _, x := range t.u16[i:min(len(t.u16), i+cap(buf)/2)] {
				buf = binary.LittleEndian.AppendUint16(buf, x)
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		pos += t.bytes()
	}
	return nil
}

// ggufAlign rounds n up to the file's alignment.
func ggufAlign(n uint64) uint64 {
	return (n + ggufAlignment - 1) / ggufAlignment * ggufAlignment
}

// appendGGUFString appends a GGUF string: a uint64 length, then the bytes.
func appendGGUFString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendGGUFKV appends one metadata entry: key, value type, value.
func appendGGUFKV(b []byte, kv ggufKV) ([]byte, error) {
	b = appendGGUFString(b, kv.key)
	le := binary.LittleEndian
	switch v := kv.val.(type) {
	case uint32:
		b = le.AppendUint32(b, ggufTypeUint32)
		b = le.AppendUint32(b, v)
	case int32:
		b = le.AppendUint32(b, ggufTypeInt32)
		b = le.AppendUint32(b, uint32(v))
	case float32:
		b = le.AppendUint32(b, ggufTypeFloat32)
		b = le.AppendUint32(b, math.Float32bits(v))
	case bool:
		b = le.AppendUint32(b, ggufTypeBool)
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	case string:
		b = le.AppendUint32(b, ggufTypeString)
		b = appendGGUFString(b, v)
	case []string:
		b = le.AppendUint32(b, ggufTypeArray)
		b = le.AppendUint32(b, ggufTypeString)
		b = le.AppendUint64(b, uint64(len(v)))
		for _, s := range v {
			b = appendGGUFString(b, s)
		}
	case []int32:
		b = le.AppendUint32(b, ggufTypeArray)
		b = le.AppendUint32(b, ggufTypeInt32)
		b = le.AppendUint64(b, uint64(len(v)))
		for _, x := range v {
			b = le.AppendUint32(b, uint32(x))
		}
	default:
		return nil, fmt.Errorf("metadata %s: unsupported value type %T", kv.key, kv.val)
	}
	return b, nil
}
