package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/x/kernels"
)

// MergeLoRA folds every attached adapter into its base weight,
// W ← W + scaling·B·A (products summed in float64, rounded once to the
// weight's storage type), and detaches the adapters. Merged weights get
// fresh memory, so memory-mapped checkpoints are never written. Trained
// values are first brought back from the backend (Model.DownloadParams);
// if that fails nothing is merged. A Trainable of the adapters must not be
// used afterwards (their backend copies, its parameters, are freed).
func MergeLoRA(m *Model) error {
	if err := m.DownloadParams(); err != nil {
		return fmt.Errorf("merge lora: %w", err)
	}
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			if nl.Linear.LoRA != nil {
				w := mergedWeight(nl.Linear.W, nl.Linear.LoRA)
				m.forgetLinear(nl.Linear, true)
				nl.Linear.W = w
				nl.Linear.LoRA = nil
			}
		}
	}
	return nil
}

// mergedWeight returns w + a.Scaling·a.B·a.A in w's storage type.
func mergedWeight(w kernels.Mat, a *LoRA) kernels.Mat {
	out := kernels.NewHostMat(w.DType, w.Rows, w.Cols)
	row := make([]float32, w.Cols)
	delta := make([]float64, w.Cols)
	s := float64(a.Scaling)
	for i := range w.Rows {
		w.Row(row, i)
		clear(delta)
		for r := range a.R {
			b := float64(a.B[i*a.R+r])
			if b == 0 {
				continue
			}
			ar := a.A[r*w.Cols : (r+1)*w.Cols]
			for j, x := range ar {
				delta[j] += b * float64(x)
			}
		}
		dst := i * w.Cols
		for j := range row {
			v := float32(float64(row[j]) + s*delta[j])
			switch w.DType {
			case kernels.F32:
				out.F32()[dst+j] = v
			case kernels.BF16:
				out.U16()[dst+j] = kernels.F32ToBF16(v)
			default:
				out.U16()[dst+j] = kernels.F32ToF16(v)
			}
		}
	}
	return out
}

// SaveCheckpoint writes m as a Hugging Face checkpoint into dir (created if
// needed): config.json and model.safetensors with the matrices in their
// storage type (the original dtype, or float32 after full fine-tuning) and
// the norm weights in float32, as the loader and transformers both read
// them. Adapters are not saved: call MergeLoRA first, or SaveAdapter.
// Trained weights are first brought back from the backend
// (Model.DownloadParams).
func SaveCheckpoint(dir string, m *Model) error {
	if err := m.DownloadParams(); err != nil { // the masters as training left them
		return fmt.Errorf("save checkpoint: %w", err)
	}
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			if nl.Linear.LoRA != nil {
				return fmt.Errorf("save checkpoint: layer %d %s carries an adapter: merge it (MergeLoRA) or save it (SaveAdapter)", li, nl.Name)
			}
		}
	}
	cfg := m.Config
	cfg.TorchDType = torchDTypeName(m.Embed.DType)
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	ts := []Tensor{
		MatTensor("model.embed_tokens.weight", m.Embed),
		F32Tensor("model.norm.weight", m.Norm, len(m.Norm)),
	}
	if !cfg.TieWordEmbeddings {
		ts = append(ts, MatTensor("lm_head.weight", m.LMHead))
	}
	for li := range m.Layers {
		l := &m.Layers[li]
		p := fmt.Sprintf("model.layers.%d.", li)
		ts = append(ts,
			F32Tensor(p+"input_layernorm.weight", l.AttnNorm, len(l.AttnNorm)),
			F32Tensor(p+"post_attention_layernorm.weight", l.MLPNorm, len(l.MLPNorm)),
			F32Tensor(p+"self_attn.q_norm.weight", l.Attn.QNorm, len(l.Attn.QNorm)),
			F32Tensor(p+"self_attn.k_norm.weight", l.Attn.KNorm, len(l.Attn.KNorm)))
		for _, nl := range l.Linears() {
			ts = append(ts, MatTensor(p+nl.Name+".weight", nl.Linear.W))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := WriteSafetensors(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}
