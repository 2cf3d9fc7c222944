package model

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// ggufTestTokenizer writes a small Qwen3-style tokenizer folder into dir
// for a vocabulary of n rows: base tokens 0..n−31, five added tokens
// (three special, two not), the last 26 ids missing (padding rows, as
// Qwen3's 151936 rows hold 151669 tokens). pairMerges writes merges as
// pairs (the newer tokenizer.json form). withConfig adds a
// tokenizer_config.json naming eos, pad and the chat template.
func ggufTestTokenizer(t *testing.T, dir string, n int, pairMerges, withConfig bool) {
	t.Helper()
	vocab := map[string]int{}
	for i := range n - 31 {
		vocab[fmt.Sprintf("t%d", i)] = i
	}
	vocab["Ġ"] = 0 // a byte-level token (renames t0)
	delete(vocab, "t0")
	added := []map[string]any{
		{"id": n - 31, "content": "<|endoftext|>", "special": true, "normalized": false},
		{"id": n - 30, "content": "<|im_start|>", "special": true, "normalized": false},
		{"id": n - 29, "content": "<|im_end|>", "special": true, "normalized": false},
		{"id": n - 28, "content": "<think>", "special": false, "normalized": false},
		{"id": n - 27, "content": "<|fake|>", "special": false, "normalized": false}, // looks special: control
	}
	var merges any = []string{"t1 t2", "Ġ t3"}
	if pairMerges {
		merges = [][]string{{"t1", "t2"}, {"a b", "t3"}}
	}
	tok := map[string]any{"version": "1.0", "added_tokens": added,
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": merges}}
	js, err := json.Marshal(tok)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), js, 0o644))
	if withConfig {
		tc := map[string]any{"add_bos_token": false, "bos_token": nil, "eos_token": "<|im_end|>",
			"pad_token": map[string]any{"content": "<|endoftext|>"}, "chat_template": "{% for m in messages %}{{m}}{% endfor %}"}
		js, err := json.Marshal(tc)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), js, 0o644))
	}
}

// TestReadGGUFVocab: token texts and types by id (normal, control by flag
// and by shape, user-defined, padding rows), merges in both forms, special
// ids from tokenizer_config.json or else config.json, and bad input.
func TestReadGGUFVocab(t *testing.T) {
	const n = 128
	for _, pairs := range []bool{false, true} {
		t.Run(fmt.Sprintf("pairMerges%v", pairs), func(t *testing.T) {
			dir := t.TempDir()
			ggufTestTokenizer(t, dir, n, pairs, true)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"bos_token_id": 97, "eos_token_id": 5}`), 0o644))
			v, err := ReadGGUFVocab(dir, n)
			require.NoError(t, err)
			assert.Equal(t, "gpt2", v.Model)
			assert.Equal(t, "qwen2", v.Pre)
			require.Len(t, v.Tokens, n)
			assert.Equal(t, "Ġ", v.Tokens[0])
			assert.Equal(t, "t5", v.Tokens[5])
			assert.Equal(t, GGUFTokenNormal, v.Types[5])
			assert.Equal(t, []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "<|fake|>", fmt.Sprintf("[PAD%d]", n-26)}, v.Tokens[n-31:n-25])
			assert.Equal(t, []int32{GGUFTokenControl, GGUFTokenControl, GGUFTokenControl, GGUFTokenUserDefined, GGUFTokenControl, GGUFTokenUnused}, v.Types[n-31:n-25])
			assert.Equal(t, fmt.Sprintf("[PAD%d]", n-1), v.Tokens[n-1])
			if pairs {
				assert.Equal(t, []string{"t1 t2", "aĠb t3"}, v.Merges)
			} else {
				assert.Equal(t, []string{"t1 t2", "Ġ t3"}, v.Merges)
			}
			// eos and pad from tokenizer_config.json (eos there wins over
			// config.json's 5); bos from config.json.
			assert.Equal(t, map[string]uint32{"eos": n - 29, "pad": n - 31, "bos": 97}, v.SpecialIDs)
			assert.Equal(t, map[string]bool{"bos": false}, v.AddSpecial)
			assert.Equal(t, "{% for m in messages %}{{m}}{% endfor %}", v.ChatTemplate)
		})
	}
	t.Run("config_only", func(t *testing.T) {
		dir := t.TempDir()
		ggufTestTokenizer(t, dir, n, false, false)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"bos_token_id": null, "eos_token_id": [5, 6], "pad_token_id": 3}`), 0o644))
		v, err := ReadGGUFVocab(dir, n)
		require.NoError(t, err)
		assert.Equal(t, map[string]uint32{"pad": 3}, v.SpecialIDs, "a list of eos ids is skipped, as the converter skips it")
		assert.Empty(t, v.AddSpecial)
		assert.Empty(t, v.ChatTemplate)
	})
	for _, tc := range []struct {
		name, want string
		setup      func(dir string)
		vocab      int
	}{
		{"no tokenizer.json", "tokenizer.json", func(string) {}, n},
		{"vocabulary too small", "outside the model's vocabulary of 64", func(dir string) { ggufTestTokenizer(t, dir, n, false, false) }, 64},
		{"not BPE", `model type "Unigram"`, func(dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model": {"type": "Unigram"}}`), 0o644))
		}, n},
		{"bad merges", "merges", func(dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "b", "c"]]}}`), 0o644))
		}, n},
		{"config id out of range", "eos_token_id 999", func(dir string) {
			ggufTestTokenizer(t, dir, n, false, false)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"eos_token_id": 999}`), 0o644))
		}, n},
		{"broken json", "parse", func(dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model": `), 0o644))
		}, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(dir)
			_, err := ReadGGUFVocab(dir, tc.vocab)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestReadGGUFVocabQwen3 reads the real Qwen3 tokenizer.json that `make
// setup` fetches (skipped without it): Qwen3-0.6B's 151936 rows hold
// 151669 tokens, the added ones from <|endoftext|> (151643) on.
func TestReadGGUFVocabQwen3(t *testing.T) {
	dir := filepath.Join("..", ".cache", "qwen3-tokenizer")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skipf("no Qwen3 tokenizer.json (run make setup): %v", err)
	}
	v, err := ReadGGUFVocab(dir, 151936)
	require.NoError(t, err)
	assert.Equal(t, "<|endoftext|>", v.Tokens[151643])
	assert.Equal(t, GGUFTokenControl, v.Types[151643])
	assert.Equal(t, "<|im_end|>", v.Tokens[151645])
	assert.Equal(t, "<think>", v.Tokens[151667])
	assert.Equal(t, GGUFTokenUserDefined, v.Types[151667])
	assert.Equal(t, "[PAD151669]", v.Tokens[151669])
	assert.Equal(t, GGUFTokenUnused, v.Types[151669])
	assert.Equal(t, GGUFTokenNormal, v.Types[100])
	assert.Equal(t, "Ġ Ġ", v.Merges[0])
	assert.Len(t, v.Merges, 151387)
}

// ggufExpectedKV is every metadata key an export of cfg with vocabulary v
// must hold, built from the converter's key list (not the writer's).
func ggufExpectedKV(cfg Config, v *GGUFVocab, name string, ctx uint32, fileType uint32) map[string]any {
	want := map[string]any{
		"general.architecture":                   "qwen3",
		"general.type":                           "model",
		"general.name":                           name,
		"general.file_type":                      fileType,
		"general.quantization_version":           uint32(2),
		"qwen3.block_count":                      uint32(cfg.NumLayers),
		"qwen3.context_length":                   ctx,
		"qwen3.embedding_length":                 uint32(cfg.HiddenSize),
		"qwen3.feed_forward_length":              uint32(cfg.IntermediateSize),
		"qwen3.attention.head_count":             uint32(cfg.NumHeads),
		"qwen3.attention.head_count_kv":          uint32(cfg.NumKVHeads),
		"qwen3.rope.freq_base":                   float32(cfg.RopeTheta),
		"qwen3.attention.layer_norm_rms_epsilon": cfg.RMSNormEps,
		"qwen3.attention.key_length":             uint32(cfg.HeadDim),
		"qwen3.attention.value_length":           uint32(cfg.HeadDim),
		"tokenizer.ggml.model":                   "gpt2",
		"tokenizer.ggml.pre":                     "qwen2",
		"tokenizer.ggml.tokens":                  v.Tokens,
		"tokenizer.ggml.token_type":              v.Types,
		"tokenizer.ggml.merges":                  v.Merges,
	}
	names := map[string]string{"bos": "bos", "eos": "eos", "unk": "unknown", "sep": "seperator", "pad": "padding", "cls": "cls", "mask": "mask"}
	for k, id := range v.SpecialIDs {
		want["tokenizer.ggml."+names[k]+"_token_id"] = id
	}
	for k, add := range v.AddSpecial {
		want["tokenizer.ggml.add_"+k+"_token"] = add
	}
	if v.ChatTemplate != "" {
		want["tokenizer.chat_template"] = v.ChatTemplate
	}
	return want
}

// ggufWantTensor is a tensor an export must hold: shape in ggml order,
// type, and its bytes from the model's weights.
type ggufWantTensor struct {
	dims []uint64
	typ  uint32
	data []byte
}

func ggufMatBytes(w kernels.Mat) ([]uint64, uint32, []byte) {
	dims := []uint64{uint64(w.Cols), uint64(w.Rows)}
	var b []byte
	switch w.DType {
	case kernels.F32:
		for _, x := range w.F32()[:w.Rows*w.Cols] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return dims, 0, b
	case kernels.BF16:
		for _, x := range w.U16()[:w.Rows*w.Cols] {
			b = binary.LittleEndian.AppendUint16(b, x)
		}
		return dims, 30, b
	default:
		for _, x := range w.U16()[:w.Rows*w.Cols] {
			b = binary.LittleEndian.AppendUint16(b, x)
		}
		return dims, 1, b
	}
}

func ggufVecBytes(x []float32) ggufWantTensor {
	var b []byte
	for _, v := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return ggufWantTensor{dims: []uint64{uint64(len(x))}, typ: 0, data: b}
}

// ggufExpectedTensors lists, by gguf-py's qwen3 names, every tensor an
// export of m must hold.
func ggufExpectedTensors(m *Model) map[string]ggufWantTensor {
	want := map[string]ggufWantTensor{}
	mat := func(name string, w kernels.Mat) {
		d, typ, b := ggufMatBytes(w)
		want[name] = ggufWantTensor{d, typ, b}
	}
	mat("token_embd.weight", m.Embed)
	want["output_norm.weight"] = ggufVecBytes(m.Norm)
	if !m.Config.TieWordEmbeddings {
		mat("output.weight", m.LMHead)
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		want[p+"attn_norm.weight"] = ggufVecBytes(l.AttnNorm)
		want[p+"ffn_norm.weight"] = ggufVecBytes(l.MLPNorm)
		want[p+"attn_q_norm.weight"] = ggufVecBytes(l.Attn.QNorm)
		want[p+"attn_k_norm.weight"] = ggufVecBytes(l.Attn.KNorm)
		mat(p+"attn_q.weight", l.Attn.Q.W)
		mat(p+"attn_k.weight", l.Attn.K.W)
		mat(p+"attn_v.weight", l.Attn.V.W)
		mat(p+"attn_output.weight", l.Attn.O.W)
		mat(p+"ffn_gate.weight", l.MLP.Gate.W)
		mat(p+"ffn_up.weight", l.MLP.Up.W)
		mat(p+"ffn_down.weight", l.MLP.Down.W)
	}
	return want
}

// checkGGUF reads path back and checks it against m and the expected
// metadata: version, every key and value (no more, no fewer), every tensor
// (name, dims, type, bytes bit for bit), alignment and the file's end.
func checkGGUF(t *testing.T, path string, m *Model, wantKV map[string]any) {
	t.Helper()
	f, err := readGGUFFile(path)
	require.NoError(t, err)
	assert.EqualValues(t, 3, f.version)
	assert.Equal(t, "general.architecture", f.keys[0], "llama.cpp reads the architecture first")
	assert.Equal(t, len(wantKV), len(f.kv), "metadata key count")
	for k, v := range wantKV {
		got, ok := f.kv[k]
		if assert.True(t, ok, "metadata key %s missing", k) {
			assert.Equal(t, v, got, "metadata %s", k)
		}
	}
	for k := range f.kv {
		_, ok := wantKV[k]
		assert.True(t, ok, "unexpected metadata key %s", k)
	}
	want := ggufExpectedTensors(m)
	assert.Equal(t, len(want), len(f.tensors), "tensor count")
	assert.Zero(t, f.dataOff%32, "data section alignment")
	end := f.dataOff
	seen := map[string]bool{}
	for _, ti := range f.tensors {
		assert.False(t, seen[ti.name], "tensor %s twice", ti.name)
		seen[ti.name] = true
		assert.Zero(t, ti.offset%32, "tensor %s offset %d unaligned", ti.name, ti.offset)
		w, ok := want[ti.name]
		if !assert.True(t, ok, "unexpected tensor %s", ti.name) {
			continue
		}
		assert.Equal(t, w.dims, ti.dims, "tensor %s dims", ti.name)
		assert.Equal(t, w.typ, ti.typ, "tensor %s type", ti.name)
		got, err := f.data(ti)
		if assert.NoError(t, err) {
			assert.True(t, string(w.data) == string(got), "tensor %s bytes differ", ti.name)
		}
		end = max(end, f.dataOff+ti.offset+uint64(len(w.data)))
	}
	assert.Equal(t, end, f.fileSize, "the file ends with the last tensor")
}

// ggufTestModel writes a random checkpoint of cfg in dtype with a test
// tokenizer beside it and loads it on the reference backend.
func ggufTestModel(t *testing.T, cfg Config, dtype kernels.DType) (*Model, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, WriteRandom(dir, cfg, dtype, 5, RandomOptions{Std: 0.3, NormStd: 0.1}))
	ggufTestTokenizer(t, dir, cfg.VocabSize, false, true)
	m, err := Load(dir, ref.Backend{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m, dir
}

// TestWriteGGUF writes tiny random checkpoints (bf16, f16, f32; tied and
// untied embeddings) and reads each back, checking every metadata key and
// every tensor bit for bit.
func TestWriteGGUF(t *testing.T) {
	base, err := NamedConfig("tiny")
	require.NoError(t, err)
	for _, tc := range []struct {
		dtype    kernels.DType
		tied     bool
		fileType uint32
	}{{kernels.BF16, true, 32}, {kernels.BF16, false, 32}, {kernels.F16, true, 1}, {kernels.F32, false, 0}} {
		t.Run(fmt.Sprintf("%v_tied%v", tc.dtype, tc.tied), func(t *testing.T) {
			cfg := base
			cfg.TieWordEmbeddings = tc.tied
			m, dir := ggufTestModel(t, cfg, tc.dtype)
			v, err := ReadGGUFVocab(dir, cfg.VocabSize)
			require.NoError(t, err)
			ctx, err := GGUFContextLength(dir)
			require.NoError(t, err)
			assert.Equal(t, 40960, ctx, "WriteRandom's config.json")
			path := filepath.Join(t.TempDir(), "m.gguf")
			require.NoError(t, WriteGGUF(path, m, GGUFOptions{Name: "tiny test", ContextLength: ctx, Vocab: v}))
			checkGGUF(t, path, m, ggufExpectedKV(cfg, v, "tiny test", uint32(ctx), tc.fileType))
		})
	}
}

// TestWriteGGUFMergedLoRA: a model with adapters is refused; after
// MergeLoRA the export holds the merged weights, bit for bit, and the
// defaults (name "Qwen3", context 32768) apply.
func TestWriteGGUFMergedLoRA(t *testing.T) {
	cfg, err := NamedConfig("tiny")
	require.NoError(t, err)
	m, dir := ggufTestModel(t, cfg, kernels.BF16)
	v, err := ReadGGUFVocab(dir, cfg.VocabSize)
	require.NoError(t, err)
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 4, Alpha: 8}, 3))
	rng := rand.New(rand.NewPCG(9, 9))
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			for i := range nl.Linear.LoRA.B {
				nl.Linear.LoRA.B[i] = float32(0.5 * rng.NormFloat64())
			}
		}
	}
	before := append([]uint16(nil), m.Layers[1].MLP.Down.W.U16()...)
	path := filepath.Join(t.TempDir(), "merged.gguf")
	err = WriteGGUF(path, m, GGUFOptions{Vocab: v})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MergeLoRA")
	_, statErr := os.Stat(path)
	assert.True(t, os.IsNotExist(statErr), "no file after a refused export")

	require.NoError(t, MergeLoRA(m))
	assert.NotEqual(t, before, m.Layers[1].MLP.Down.W.U16(), "the merge changed the weights")
	require.NoError(t, WriteGGUF(path, m, GGUFOptions{Vocab: v}))
	checkGGUF(t, path, m, ggufExpectedKV(cfg, v, "Qwen3", 32768, 32))
}

// TestWriteGGUFErrors: missing or mismatched vocabularies are refused
// with a message naming the problem.
func TestWriteGGUFErrors(t *testing.T) {
	cfg, err := NamedConfig("tiny")
	require.NoError(t, err)
	m, dir := ggufTestModel(t, cfg, kernels.BF16)
	v, err := ReadGGUFVocab(dir, cfg.VocabSize)
	require.NoError(t, err)
	short := *v
	short.Tokens = v.Tokens[:10]
	badID := *v
	badID.SpecialIDs = map[string]uint32{"eos": 99999}
	for _, tc := range []struct {
		name, want string
		opts       GGUFOptions
	}{
		{"no vocab", "no tokenizer vocabulary", GGUFOptions{}},
		{"short vocab", "10 tokens for a model of 4096", GGUFOptions{Vocab: &short}},
		{"bad special id", "eos token id 99999", GGUFOptions{Vocab: &badID}},
		{"negative context", "context length -1", GGUFOptions{Vocab: v, ContextLength: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteGGUF(filepath.Join(t.TempDir(), "x.gguf"), m, tc.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	err = WriteGGUF(filepath.Join(t.TempDir(), "no", "such", "dir.gguf"), m, GGUFOptions{Vocab: v})
	require.Error(t, err, "an unwritable path")
}
