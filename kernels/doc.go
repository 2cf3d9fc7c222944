// Package kernels is the contract for every numeric op of the Qwen3 model:
// the Backend interface, the backend-owned Buffer and its views, the weight
// matrix type Mat and its storage types, the shape checks every backend
// shares (Check*), and bf16/f16 conversions. Attention takes a batch
// described by Buffers only (AttentionBatch: the token layout, and K/V
// contiguous or in a paged pool read through I32 block tables, PagedKV),
// written by WriteKV; fused ops (AddRMSNormer, RoPEKVWriter) are optional
// methods a backend may add, used through AddRMSNorm and WriteKVRoPE.
//
// Implementations live in subpackages: kernels/ref is the plain,
// obviously-correct reference (float64 accumulation) and the specification;
// kernels/cpu is the fast CPU version (goroutines over both cores, SIMD in Go
// assembly with a portable fallback); kernels/kerneltest is the conformance
// suite that takes a Backend and checks it against ref at awkward shapes,
// with one table of justified tolerances.
//
// Layouts are row-major; dimensions are named B (batch), T (tokens), H
// (query heads), KVH (kv heads), D (head dim), C (hidden), F (MLP width), V
// (vocabulary). Activation gradients are written, parameter gradients are
// accumulated.
package kernels
