// Package model is Qwen3 (Qwen3ForCausalLM) composed from kernels.Backend
// ops: Hugging Face config and safetensors loading (memory-mapped, bf16
// kept as bf16), a batched forward over a paged KV cache (fixed-size blocks
// from one pool per Model, copy-on-write prefix sharing by Fork), continuous
// batched generation with seeded per-sequence sampling, and teacher-forced
// per-token log-probs. LoRA adapters (PEFT layout) sit on every projection.
//
// Inference runs on the Backend's memory: the weights are imported once
// (Backend.Import; see ImportWeights), the KV cache and every activation
// and scratch buffer come from Backend.Alloc, and a decode step moves only
// the token ids and positions up and the sampled ids, their log-probs and
// one scalar down. Training (Trainable, AdamW) runs on Backend Buffers
// too: activations, gradients, the trained parameters' values and AdamW's
// moments. During training the backend's copy is authoritative; the host
// fields (LoRA.A and B, the masters, the norm slices) are a mirror that
// DownloadParams refreshes, which every host reader (SaveAdapter,
// SaveCheckpoint, MergeLoRA, ...) calls first.
//
// Shapes use B (batch), T (tokens), C (hidden), F (MLP width), H (query
// heads), KVH (kv heads), D (head dim), V (vocabulary), L (layers).
package model

import (
	"io"

	"github.com/x/kernels"
)

// Model is a loaded Qwen3 checkpoint and the Backend it runs on. Inference
// only reads the weights, but it runs on Backend, which (like every
// kernels.Backend unless documented otherwise) serves one goroutine at a
// time: run one Generate, LogProbs or Runner.Forward of a Model at a time.
// Attaching or training adapters must not overlap with inference.
type Model struct {
	Config  Config
	Backend kernels.Backend
	Embed   kernels.Mat // [V, C] model.embed_tokens.weight
	Layers  []Layer     // [L]
	Norm    []float32   // [C] model.norm.weight
	LMHead  kernels.Mat // [V, C]; equal to Embed when Config.TieWordEmbeddings
	DType   kernels.DType

	closer io.Closer // the mapped files; nil for models built in memory

	kv *kvPool // the KV cache pool; nil until first used (see SetKVOptions)
	// retiredKV are pools SetKVOptions replaced while caches still held
	// blocks of them; Close frees those blocks too.
	retiredKV []*kvPool

	imported map[devKey]devWeight // host weights → their Import (see devBuf)
	adapters *AdapterSnapshot     // the adapters forwards read; nil: the live ones (UseAdapters)
}

// Layer is one Qwen3DecoderLayer.
type Layer struct {
	AttnNorm []float32 // [C] input_layernorm.weight
	Attn     Attention
	MLPNorm  []float32 // [C] post_attention_layernorm.weight
	MLP      MLP
}

// Attention is Qwen3Attention: q/k/v/o projections and the per-head q/k
// RMSNorms applied before RoPE.
type Attention struct {
	Q     Linear    // [H·D, C]
	K     Linear    // [KVH·D, C]
	V     Linear    // [KVH·D, C]
	O     Linear    // [C, H·D]
	QNorm []float32 // [D]
	KNorm []float32 // [D]
}

// MLP is Qwen3MLP: down(silu(gate(x)) · up(x)).
type MLP struct {
	Gate Linear // [F, C]
	Up   Linear // [F, C]
	Down Linear // [C, F]
}

// Linear is one projection y = x·Wᵀ, plus scaling·(x·Aᵀ)·Bᵀ when a LoRA
// adapter is attached and adapters are enabled for the call.
type Linear struct {
	W    kernels.Mat // [Out, In]
	LoRA *LoRA       // nil: none
}

// LoRA is a low-rank adapter on one Linear (PEFT layout). The ops read A
// and B through the Model's imports; while a Trainable trains them the
// backend's copy is authoritative and A and B are brought up to date by
// Model.DownloadParams (a no-op on a CPU backend, where they are the same
// memory; saving and merging call it).
type LoRA struct {
	A       []float32 // [R, In]  (lora_A.weight)
	B       []float32 // [Out, R] (lora_B.weight)
	R       int
	Scaling float32 // lora_alpha/r, or lora_alpha/sqrt(r) with rsLoRA
}

// In is the width of the input, W.Cols.
func (l *Linear) In() int { return l.W.Cols }

// Out is the width of the output, W.Rows.
func (l *Linear) Out() int { return l.W.Rows }

// Linears returns pointers to the layer's seven projections in PEFT
// target-module order (q, k, v, o, gate, up, down), with their module names.
func (l *Layer) Linears() []NamedLinear {
	return []NamedLinear{
		{"self_attn.q_proj", &l.Attn.Q},
		{"self_attn.k_proj", &l.Attn.K},
		{"self_attn.v_proj", &l.Attn.V},
		{"self_attn.o_proj", &l.Attn.O},
		{"mlp.gate_proj", &l.MLP.Gate},
		{"mlp.up_proj", &l.MLP.Up},
		{"mlp.down_proj", &l.MLP.Down},
	}
}

// NamedLinear is a projection with its module path inside a decoder layer
// ("self_attn.q_proj", "mlp.down_proj", ...).
type NamedLinear struct {
	Name   string
	Linear *Linear
}

// Close gives the Model's backend memory back (Backend.Free: every
// weight's import and the KV pool's blocks) and releases the memory-mapped
// weight files. The Model, its caches and a Trainable of it must not be
// used afterwards.
func (m *Model) Close() error {
	if m.Backend != nil {
		m.releaseImports()
		for _, p := range append(m.retiredKV, m.kv) {
			if p != nil {
				p.releaseAll(m.Backend)
			}
		}
		m.retiredKV = nil
	}
	if m.closer == nil {
		return nil
	}
	err := m.closer.Close()
	m.closer = nil
	return err
}
