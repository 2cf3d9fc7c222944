package model

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/x/kernels"
)

// NamedConfig returns the config of a named Qwen3 shape: "qwen3-0.6b"
// (hidden 1024, 28 layers, 16/8 heads, head_dim 128, MLP 3072, vocab
// 151936, tied), "qwen3-1.7b", or "tiny" (hidden 128, 4 layers, 4/2 heads,
// head_dim 32, MLP 384, vocab 4096, tied). Each shape's EOSTokenIDs is
// <|im_end|> of the tokenizer it is sized for: Qwen3's (151645) and the
// project's tiny tokenizer (4072).
func NamedConfig(name string) (Config, error) {
	base := Config{RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, BOSTokenID: -1, MaxPositions: 40960}
	switch strings.ToLower(name) {
	case "qwen3-0.6b":
		base.VocabSize, base.HiddenSize, base.IntermediateSize = 151936, 1024, 3072
		base.NumLayers, base.NumHeads, base.NumKVHeads, base.HeadDim = 28, 16, 8, 128
		base.EOSTokenIDs = []int32{qwen3FirstAdded + imEndOffset}
	case "qwen3-1.7b":
		base.VocabSize, base.HiddenSize, base.IntermediateSize = 151936, 2048, 6144
		base.NumLayers, base.NumHeads, base.NumKVHeads, base.HeadDim = 28, 16, 8, 128
		base.EOSTokenIDs = []int32{qwen3FirstAdded + imEndOffset}
	case "tiny":
		base.VocabSize, base.HiddenSize, base.IntermediateSize = 4096, 128, 384
		base.NumLayers, base.NumHeads, base.NumKVHeads, base.HeadDim = 4, 4, 2, 32
		base.RopeTheta = 10000
		base.EOSTokenIDs = []int32{tinyFirstAdded + imEndOffset}
	default:
		return Config{}, fmt.Errorf("model: unknown shape %q (want qwen3-0.6b, qwen3-1.7b or tiny)", name)
	}
	return base, nil
}

// torchDTypeName is config.json's torch_dtype for a storage type.
func torchDTypeName(d kernels.DType) string {
	switch d {
	case kernels.BF16:
		return "bfloat16"
	case kernels.F16:
		return "float16"
	}
	return "float32"
}

// WeightNames returns the safetensors name and shape of every weight of a
// checkpoint of cfg, as Hugging Face names them.
func WeightNames(cfg Config) []Tensor {
	c, v, f, qd, kvd, d := cfg.HiddenSize, cfg.VocabSize, cfg.IntermediateSize, cfg.QDim(), cfg.KVDim(), cfg.HeadDim
	ts := []Tensor{
		{Name: "model.embed_tokens.weight", Shape: []int{v, c}},
		{Name: "model.norm.weight", Shape: []int{c}},
	}
	if !cfg.TieWordEmbeddings {
		ts = append(ts, Tensor{Name: "lm_head.weight", Shape: []int{v, c}})
	}
	for i := range cfg.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		ts = append(ts,
			Tensor{Name: p + "input_layernorm.weight", Shape: []int{c}},
			Tensor{Name: p + "post_attention_layernorm.weight", Shape: []int{c}},
			Tensor{Name: p + "self_attn.q_norm.weight", Shape: []int{d}},
			Tensor{Name: p + "self_attn.k_norm.weight", Shape: []int{d}},
			Tensor{Name: p + "self_attn.q_proj.weight", Shape: []int{qd, c}},
			Tensor{Name: p + "self_attn.k_proj.weight", Shape: []int{kvd, c}},
			Tensor{Name: p + "self_attn.v_proj.weight", Shape: []int{kvd, c}},
			Tensor{Name: p + "self_attn.o_proj.weight", Shape: []int{c, qd}},
			Tensor{Name: p + "mlp.gate_proj.weight", Shape: []int{f, c}},
			Tensor{Name: p + "mlp.up_proj.weight", Shape: []int{f, c}},
			Tensor{Name: p + "mlp.down_proj.weight", Shape: []int{c, f}},
		)
	}
	return ts
}

// RandomOptions tune WriteRandom. The zero value gives the defaults.
type RandomOptions struct {
	Std     float64 // std of matrix weights; 0 means 0.02
	NormStd float64 // norm weights are 1 + N(0, NormStd); 0 means exactly 1
}

// WriteRandom writes a Hugging Face-format checkpoint of cfg into dir
// (created if needed): config.json and model.safetensors with matrix
// weights N(0, 0.02) (opts.Std) stored as dtype and norm weights 1
// (1-D tensors stay F32, as HF checkpoints store them in the model dtype;
// here F32 keeps norms exact). The same cfg, dtype and seed give the same
// bytes. Weights are generated tensor by tensor, so a large checkpoint never
// sits in memory whole.
func WriteRandom(dir string, cfg Config, dtype kernels.DType, seed uint64, opts RandomOptions) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if dtype != kernels.F32 && dtype != kernels.BF16 && dtype != kernels.F16 {
		return fmt.Errorf("model: WriteRandom: unsupported dtype %v", dtype)
	}
	std := opts.Std
	if std == 0 {
		std = 0.02
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: WriteRandom: %w", err)
	}
	cfg.TorchDType = torchDTypeName(dtype)
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("model: WriteRandom: config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("model: WriteRandom: %w", err)
	}
	ts := WeightNames(cfg)
	index := map[string]uint64{}
	for i, t := range ts {
		index[t.Name] = uint64(i)
		if len(t.Shape) == 2 {
			ts[i].DType = dtype
		}
	}
	fill := func(t Tensor) Tensor {
		rng := rand.New(rand.NewPCG(seed, index[t.Name]))
		n := t.count()
		if len(t.Shape) == 1 {
			t.F32 = make([]float32, n)
			for i := range t.F32 {
				t.F32[i] = 1 + float32(opts.NormStd*rng.NormFloat64())
			}
			return t
		}
		switch dtype {
		case kernels.F32:
			t.F32 = make([]float32, n)
			for i := range t.F32 {
				t.F32[i] = float32(std * rng.NormFloat64())
			}
		case kernels.BF16:
			t.U16 = make([]uint16, n)
			for i := range t.U16 {
				t.U16[i] = kernels.F32ToBF16(float32(std * rng.NormFloat64()))
			}
		case kernels.F16:
			t.U16 = make([]uint16, n)
			for i := range t.U16 {
				t.U16[i] = kernels.F32ToF16(float32(std * rng.NormFloat64()))
			}
		}
		return t
	}
	if err := writeSafetensors(filepath.Join(dir, "model.safetensors"), ts, nil, fill); err != nil {
		return fmt.Errorf("model: WriteRandom: %w", err)
	}
	return nil
}
