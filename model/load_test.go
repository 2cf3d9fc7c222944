package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// tinyTensors reads every tensor of the tiny checkpoint as F32.
func tinyTensors(t *testing.T) []Tensor {
	t.Helper()
	f, err := OpenSafetensors(filepath.Join(tinyDir, "model.safetensors"))
	require.NoError(t, err)
	defer f.Close()
	var out []Tensor
	for _, ti := range f.Header.Tensors {
		data, err := f.Float32s(ti.Name, ti.Shape...)
		require.NoError(t, err)
		out = append(out, F32Tensor(ti.Name, data, ti.Shape...))
	}
	return out
}

// writeCheckpoint writes config.json (from the tiny one, edited by patch)
// and model.safetensors holding tensors into a new folder.
func writeCheckpoint(t *testing.T, tensors []Tensor, patch func(map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(data, &cfg))
	if patch != nil {
		patch(cfg)
	}
	data, err = json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644))
	if tensors != nil {
		require.NoError(t, WriteSafetensors(filepath.Join(dir, "model.safetensors"), tensors, nil))
	}
	return dir
}

func tinyLogits(t *testing.T, dir string) []float32 {
	t.Helper()
	m, err := Load(dir, ref.Backend{})
	require.NoError(t, err)
	defer m.Close()
	got, err := m.Logits([]int32{1, 5, 9, 300, 511}, Options{})
	require.NoError(t, err)
	return got
}

func TestLoadShardedEqualsSingleFile(t *testing.T) {
	ts := tinyTensors(t)
	dir := writeCheckpoint(t, nil, nil)
	weightMap := map[string]string{}
	half := len(ts) / 2
	for i, part := range [][]Tensor{ts[:half], ts[half:]} {
		name := fmt.Sprintf("model-%05d-of-00002.safetensors", i+1)
		require.NoError(t, WriteSafetensors(filepath.Join(dir, name), part, nil))
		for _, tt := range part {
			weightMap[tt.Name] = name
		}
	}
	idx, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1}, "weight_map": weightMap})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644))
	assert.Equal(t, tinyLogits(t, tinyDir), tinyLogits(t, dir))

	// An index naming a shard that lacks the tensor is an error naming it.
	weightMap["model.norm.weight"] = "model-00001-of-00002.safetensors"
	if _, inFirst := func() (int, bool) {
		for _, tt := range ts[:half] {
			if tt.Name == "model.norm.weight" {
				return 0, true
			}
		}
		return 0, false
	}(); inFirst {
		weightMap["model.norm.weight"] = "model-00002-of-00002.safetensors"
	}
	idx, _ = json.Marshal(map[string]any{"weight_map": weightMap})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644))
	_, err = Load(dir, ref.Backend{})
	assert.ErrorContains(t, err, "model.norm.weight")
}

func TestLoadTiedIgnoresStoredLMHead(t *testing.T) {
	ts := tinyTensors(t)
	junk := make([]float32, 512*64)
	for i := range junk {
		junk[i] = 3
	}
	dir := writeCheckpoint(t, append(ts, F32Tensor("lm_head.weight", junk, 512, 64)), nil)
	assert.Equal(t, tinyLogits(t, tinyDir), tinyLogits(t, dir), "HF re-ties lm_head to embed_tokens")

	// Untied: the stored lm_head is used (here the embedding itself, so
	// the logits are unchanged), and its absence is an error.
	var embed Tensor
	for _, tt := range ts {
		if tt.Name == "model.embed_tokens.weight" {
			embed = tt
		}
	}
	untie := func(c map[string]any) { c["tie_word_embeddings"] = false }
	dir = writeCheckpoint(t, append(ts, F32Tensor("lm_head.weight", embed.F32, 512, 64)), untie)
	assert.Equal(t, tinyLogits(t, tinyDir), tinyLogits(t, dir))
	dir = writeCheckpoint(t, ts, untie)
	_, err := Load(dir, ref.Backend{})
	assert.ErrorContains(t, err, "lm_head.weight")
}

func TestLoadBF16KeepsBF16(t *testing.T) {
	ts := tinyTensors(t)
	for i, tt := range ts {
		if len(tt.Shape) == 2 {
			u := make([]uint16, len(tt.F32))
			for j, v := range tt.F32 {
				u[j] = kernels.F32ToBF16(v)
			}
			ts[i] = Tensor{Name: tt.Name, Shape: tt.Shape, DType: kernels.BF16, U16: u}
		}
	}
	dir := writeCheckpoint(t, ts, func(c map[string]any) { c["torch_dtype"] = "bfloat16" })
	m, err := Load(dir, ref.Backend{})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, kernels.BF16, m.DType)
	assert.Equal(t, kernels.BF16, m.Layers[1].MLP.Down.W.DType)
	assert.Equal(t, kernels.BF16, m.Layers[1].MLP.Down.W.Data.DType(), "no float32 copy of bf16 weights")
	assert.Same(t, &m.Embed.U16()[0], &m.LMHead.U16()[0])
}

func TestLoadErrors(t *testing.T) {
	ts := tinyTensors(t)
	without := func(name string) []Tensor {
		var out []Tensor
		for _, tt := range ts {
			if tt.Name != name {
				out = append(out, tt)
			}
		}
		return out
	}
	reshaped := func(name string, shape ...int) []Tensor {
		out := without(name)
		n := 1
		for _, d := range shape {
			n *= d
		}
		return append(out, F32Tensor(name, make([]float32, n), shape...))
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) string
		want  string
	}{
		{"missing_folder", func(t *testing.T) string { return filepath.Join(t.TempDir(), "qwen3-0.6b") }, "qwen3-0.6b does not exist (want a Hugging Face Qwen3 folder"},
		{"a_file", func(t *testing.T) string { return filepath.Join(writeCheckpoint(t, nil, nil), "config.json") }, "is a file, not a folder"},
		{"empty_folder", func(t *testing.T) string { return t.TempDir() }, "has neither config.json nor *.safetensors"},
		{"no_config", func(t *testing.T) string {
			dir := writeCheckpoint(t, ts, nil)
			require.NoError(t, os.Remove(filepath.Join(dir, "config.json")))
			return dir
		}, "has no config.json"},
		{"no_weights", func(t *testing.T) string { return writeCheckpoint(t, nil, nil) }, "has no *.safetensors"},
		{"missing_tensor", func(t *testing.T) string {
			return writeCheckpoint(t, without("model.layers.1.self_attn.k_norm.weight"), nil)
		}, "model.layers.1.self_attn.k_norm.weight"},
		{"wrong_shape", func(t *testing.T) string {
			return writeCheckpoint(t, reshaped("model.layers.0.mlp.up_proj.weight", 64, 192), nil)
		}, "model.layers.0.mlp.up_proj.weight"},
		{"config_mismatch", func(t *testing.T) string {
			return writeCheckpoint(t, ts, func(c map[string]any) { c["head_dim"] = 32 })
		}, "q_proj.weight"},
		{"unsupported_dtype", func(t *testing.T) string {
			dir := writeCheckpoint(t, without("model.norm.weight"), nil)
			// Store model.norm.weight as I16 by editing the header in place.
			ts2 := append(without("model.norm.weight"), Tensor{Name: "model.norm.weight", Shape: []int{64}, DType: kernels.BF16, U16: make([]uint16, 64)})
			require.NoError(t, WriteSafetensors(filepath.Join(dir, "model.safetensors"), ts2, nil))
			raw, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
			require.NoError(t, err)
			from := []byte(`"model.norm.weight":{"dtype":"BF16","shape":[64]`)
			require.True(t, bytes.Contains(raw, from))
			raw = bytes.Replace(raw, from, []byte(`"model.norm.weight":{"dtype":"I16","shape":[64] `), 1)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), raw, 0o644))
			return dir
		}, "I16"},
		{"truncated", func(t *testing.T) string {
			dir := writeCheckpoint(t, nil, nil)
			raw, err := os.ReadFile(filepath.Join(tinyDir, "model.safetensors"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), raw[:len(raw)-100], 0o644))
			return dir
		}, "model.safetensors"},
		{"garbage", func(t *testing.T) string {
			dir := writeCheckpoint(t, nil, nil)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("not a safetensors file at all"), 0o644))
			return dir
		}, "header"},
		{"bad_index", func(t *testing.T) string {
			dir := writeCheckpoint(t, nil, nil)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map":{"a":"../x"}}`), 0o644))
			return dir
		}, "shard"},
		{"fewer_layers_in_config", func(t *testing.T) string {
			// The tiny checkpoint has 2 layers; a config saying 1 would
			// run a truncated model if layer 1 were silently left out.
			return writeCheckpoint(t, ts, func(c map[string]any) { c["num_hidden_layers"] = 1 })
		}, "the weights hold 11 tensor(s) that config.json (num_hidden_layers 1) does not account for: " +
			"model.layers.1.input_layernorm.weight, model.layers.1.mlp.down_proj.weight"},
		{"stray_tensor", func(t *testing.T) string {
			return writeCheckpoint(t, append(ts, F32Tensor("model.layers.0.mlp.bias", make([]float32, 4), 4)), nil)
		}, "does not account for: model.layers.0.mlp.bias;"},
		{"tied_lm_head_of_another_shape", func(t *testing.T) string {
			return writeCheckpoint(t, append(ts, F32Tensor("lm_head.weight", make([]float32, 4), 2, 2)), nil)
		}, "lm_head.weight"},
		{"sliding_window", func(t *testing.T) string {
			return writeCheckpoint(t, ts, func(c map[string]any) { c["use_sliding_window"] = true })
		}, "use_sliding_window"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.setup(t), ref.Backend{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestWriteRandomIsDeterministicAndLoads(t *testing.T) {
	cfg, err := NamedConfig("tiny")
	require.NoError(t, err)
	cfg.NumLayers = 1
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		require.NoError(t, WriteRandom(dir, cfg, kernels.BF16, 5, RandomOptions{}))
	}
	fa, err := os.ReadFile(filepath.Join(a, "model.safetensors"))
	require.NoError(t, err)
	fb, err := os.ReadFile(filepath.Join(b, "model.safetensors"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(fa, fb), "same seed, same bytes")

	m, err := Load(a, ref.Backend{})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, kernels.BF16, m.Embed.DType)
	assert.Equal(t, "bfloat16", m.Config.TorchDType)
	assert.Equal(t, float32(1), m.Norm[0])
	// Weights look like N(0, 0.02).
	var s, s2 float64
	w := m.Layers[0].MLP.Up.W
	for i := range w.Rows {
		for j := range w.Cols {
			v := float64(w.At(i, j))
			s += v
			s2 += v * v
		}
	}
	n := float64(w.Len())
	assert.InDelta(t, 0, s/n, 1e-3)
	assert.InDelta(t, 0.02, sqrt(s2/n), 1e-3)

	assert.Error(t, WriteRandom(t.TempDir(), Config{}, kernels.F32, 1, RandomOptions{}))
}

func sqrt(x float64) float64 {
	z := x
	for range 50 {
		z = (z + x/z) / 2
	}
	return z
}

// TestLoadNeedsBackend: a nil backend is ErrNoBackend, naming the folder
// and how to get one, before any file is read.
func TestLoadNeedsBackend(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing"), nil)
	require.ErrorIs(t, err, ErrNoBackend)
	assert.Contains(t, err.Error(), "missing")
	assert.Contains(t, err.Error(), "cpu.New(0)")
	assert.Contains(t, err.Error(), `device.Open("cpu")`)
}

// headDimLimited is the reference backend with a bound on the attention
// head dim, as kernels/cuda has (256).
type headDimLimited struct {
	ref.Backend
	max int
}

func (h headDimLimited) MaxAttentionHeadDim() int { return h.max }

// TestLoadRefusesHeadDimBeyondTheBackend: a config whose head_dim the
// backend's attention cannot take is refused at Load, naming both, instead
// of panicking in the first forward; within the bound it loads.
func TestLoadRefusesHeadDimBeyondTheBackend(t *testing.T) {
	dir := writeCheckpoint(t, tinyTensors(t), nil)
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	_, err = Load(dir, headDimLimited{max: cfg.HeadDim - 2})
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("config head_dim = %d: this backend's attention takes head dims up to %d", cfg.HeadDim, cfg.HeadDim-2))
	m, err := Load(dir, headDimLimited{max: cfg.HeadDim})
	require.NoError(t, err)
	require.NoError(t, m.Close())
}
