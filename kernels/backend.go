package kernels

// Backend is one implementation of every numeric op the model needs. The
// reference (kernels/ref) is the specification; kernels/cpu is the fast CPU
// twin; a CUDA backend will be a third. kernels/kerneltest holds the one
// conformance suite every Backend must pass.
//
// Conventions, for every method:
//   - Arrays are Buffers (see Buffer), row-major, the shape of each given
//     next to it as [dims]; activations and gradients are F32, token ids,
//     row indices, positions and block tables I32, weights a Mat over an
//     F32, BF16 or F16 Buffer.
//     Buffers may be longer than needed; only the leading elements named
//     by the shape are read or written. An optional Buffer is absent when
//     empty (Buffer{}). Op settings stay Go values; per-row ones
//     (SampleRows's parameters and uniforms) are Buffers too (SampleArgs),
//     so a recorded step reads them from fixed addresses.
//   - "out =" overwrites, "+=" accumulates. Activation gradients are written
//     (=), parameter gradients are accumulated (+=), as in llm.c.
//   - Shapes that do not fit their slices are programmer errors and panic
//     with a message naming the op and the argument; data from outside the
//     program is validated before it reaches a kernel.
//   - Implementations may use several goroutines inside one call, but a call
//     returns only when all of its work is done. A Backend value is safe for
//     use by one goroutine at a time unless its documentation says more.
//
// Buffers and errors. Every op takes Buffers, which the backend owns (see
// Buffer): the memory and data-movement ops (Alloc to AllFinite) and the
// compute ops after them, so a device backend runs them on its own memory
// without copies; data crosses between host and backend only through
// Upload, Download, Import and the scalars that SumSquares, AllFinite and
// Argmax return. A CPU backend's Buffers are host slices, read in place.
// A device backend may also accept host Buffers (it then stages them, a
// copy each way per op; kerneltest.Counting counts such arguments, so a
// test can assert that a step passes none). The ops that can fail on a device
// at the moment they are called (allocation, transfers, and the ops that
// return a scalar to the host, which must wait for the device) return a Go
// error naming the op. The other ops return nothing: a device queues them
// and learns of a failure only later, so a backend records its first
// failure and Err returns it (sticky, as bufio.Scanner's), and every
// later error-returning call returns it too. A CPU backend never fails
// after a successful Alloc, so its Err is always nil. Shapes that do not
// fit stay programmer errors and panic (the rules are the Check functions
// of checks.go, bufferops.go, sample.go and loss.go, shared by every
// backend; index values in host Buffers are range-checked there, a device
// backend checks device-resident ones itself or leaves them to its
// kernels' guards).
type Backend interface {
	// Alloc returns a zeroed Buffer of n elements of dt (F32, BF16, F16,
	// I32 or U8) in the backend's memory.
	Alloc(dt DType, n int) (Buffer, error)
	// Free releases a Buffer from Alloc or Import (not a view of one). The
	// CPU backends leave the memory to the garbage collector.
	Free(b Buffer)
	// Import makes the host Buffer src available to the backend: the CPU
	// backends return src itself (no copy), a device backend allocates and
	// uploads. It is how weights read from a file reach the backend.
	Import(src Buffer) (Buffer, error)
	// Upload copies the host Buffer src into dst (same dtype and length).
	Upload(dst, src Buffer) error
	// Download copies src into the host Buffer dst (same dtype and length).
	Download(dst, src Buffer) error
	// Err is the first failure of an op that returns no error (nil if
	// none).
	Err() error

	// Copy: dst[N] = src[N], in one dtype or casting between F32 and BF16
	// (F32 → BF16 rounds to nearest even, BF16 → F32 is exact). It is the KV cache's
	// copy on write (block to block) and growth, and the cast between f32
	// and bf16.
	Copy(dst, src Buffer)
	// GatherRows: dst[i, :] = src[idx[i], :] for i < idx.Len(), rows of
	// cols elements (the hidden rows chosen for sampling, packing a micro
	// batch). Indices must be in [0, src.Len()/cols).
	GatherRows(dst, src, idx Buffer, cols int)
	// ScatterRows: dst[idx[i], :] = src[i, :], GatherRows's inverse. Indices
	// must be distinct and in [0, dst.Len()/cols).
	ScatterRows(dst, src, idx Buffer, cols int)
	// Transpose: dst[cols, rows] = src[rows, cols]ᵀ in any one dtype
	// (lm_head's transposed copy, an adapter's Bᵀ).
	Transpose(dst, src Buffer, rows, cols int)
	// SumSquares returns Σ x² over every element of the F32 buffers xs,
	// accumulated in float64 (the squared global gradient norm): one
	// scalar to the host.
	SumSquares(xs ...Buffer) (float64, error)
	// AllFinite reports whether every element of the F32 buffers xs is
	// finite (no NaN or ±Inf): one scalar to the host.
	AllFinite(xs ...Buffer) (bool, error)

	// MatMul: out[M,N] (=, or += if accumulate) x[M,K] · wᵀ, w is [N,K]
	// (torch nn.Linear layout), N = w.Rows, K = w.Cols.
	MatMul(out, x Buffer, w Mat, m int, accumulate bool)
	// MatMulNN: out[M,K] (=, or += if accumulate) dy[M,N] · w[N,K].
	// It is MatMul's input gradient.
	MatMulNN(out, dy Buffer, w Mat, m int, accumulate bool)
	// MatMulTN: dw[N,K] += dy[M,N]ᵀ · x[M,K]. It is MatMul's weight
	// gradient; dw is always float32.
	MatMulTN(dw, dy, x Buffer, m, n, k int)

	// Embedding: out[T,C] = table[ids[t], :], C = table.Cols. Ids must be in
	// [0, table.Rows).
	Embedding(out Buffer, table Mat, ids Buffer)
	// EmbeddingBackward: dtable[V,C] row ids[t] += dout[t, :].
	EmbeddingBackward(dtable, dout, ids Buffer, c int)

	// RMSNorm: out[R,C] = w[C] * x / sqrt(mean(x², row) + eps), per row.
	// out may alias x. Per-head q/k norm is RMSNorm with R = T·H, C = D.
	RMSNorm(out, x, w Buffer, rows, cols int, eps float32)
	// RMSNormBackward: dx[R,C] = ∂/∂x, dw[C] += ∂/∂w, given dout[R,C] and
	// the forward's input x and weight w.
	RMSNormBackward(dx, dw, dout, x, w Buffer, rows, cols int, eps float32)

	// RoPE rotates x[T,H,D] in place, rotate-half (NeoX / Hugging Face)
	// convention: for i < D/2, angle = pos[t] / theta^(2i/D), and the pair
	// (x[i], x[i+D/2]) becomes (x[i]·cos − x[i+D/2]·sin, x[i+D/2]·cos + x[i]·sin).
	RoPE(x, pos Buffer, heads, headDim int, theta float64)
	// RoPEBackward maps dy[T,H,D] to dx in place (the inverse rotation).
	RoPEBackward(dx, pos Buffer, heads, headDim int, theta float64)

	// Attention computes causal grouped-query attention for a batch of
	// sequences of different lengths (see AttentionBatch), reading K and V
	// contiguous or through the block tables of a paged KV cache; query
	// head h uses kv head h / (heads/kvHeads). Scores are q·k·scale. A
	// backend that implements AttentionInvariant says whether a row's
	// output and LSE depend only on that row's query and keys, not on the
	// rest of the batch (see DESIGN.md, batch invariance).
	Attention(a AttentionBatch, heads, kvHeads, headDim int, scale float32)
	// AttentionBackward: the gradients of Attention for a batch of
	// sequences; see AttentionGradBatch.
	AttentionBackward(g AttentionGradBatch, heads, kvHeads, headDim int, scale float32)
	// WriteKV stores a batch's new keys and values in a paged KV cache:
	// row i of k and v ([N, KVH·D]), of sequence s and position p =
	// Layout.Pos[i], goes to row p mod BlockSize of block
	// kv.Tables[s·TableStride + p/BlockSize] (at kv.KOff and kv.VOff),
	// rounded to bf16 for a BF16 pool (as Copy casts). It is one op per
	// layer for the whole batch.
	WriteKV(kv PagedKV, l BatchLayout, k, v Buffer, kvHeads, headDim int)

	// SwiGLU: out[N] = silu(gate[N]) * up[N], silu(z) = z·sigmoid(z). out may
	// alias gate or up.
	SwiGLU(out, gate, up Buffer)
	// SwiGLUBackward: dgate[N], dup[N] = gradients given dout[N] and the
	// forward's gate and up.
	SwiGLUBackward(dgate, dup, dout, gate, up Buffer)

	// Add: dst[N] += src[N].
	Add(dst, src Buffer)
	// Scale: x[N] *= s.
	Scale(x Buffer, s float32)

	// LogSoftmaxGather: for each row r of logits[R,V], logp[r] =
	// log_softmax(logits[r])[targets[r]]; if entropy is not empty,
	// entropy[r] = −Σ p·log p of that row. The model calls it on chunks of
	// rows so that a [T,V] buffer for the whole batch never exists.
	LogSoftmaxGather(logp, entropy, logits, targets Buffer, rows, v int)
	// LogSoftmaxGatherBackward: the gradient of LogSoftmaxGather's outputs,
	// dlogits[R,V] = dlogp[r]·(onehot(targets[r]) − p) + dentropy[r]·dH/dlogits
	// with p = softmax(logits[r]) and dH/dlogits[i] = −p[i]·(log p[i] + H[r])
	// (H the row's entropy). dentropy may be empty (no entropy term).
	// dlogits may alias logits.
	LogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy Buffer, rows, v int)

	// Softmax: x[R,V] replaced by softmax per row (in place).
	Softmax(x Buffer, rows, v int)
	// Argmax returns the first index of the largest value in x (ties go to
	// the lower index, as torch.argmax): one scalar to the host.
	Argmax(x Buffer) (int32, error)
	// SampleRows draws one token for each row r of logits[R,V] under
	// row r's SamplingParams in args, with its uniform u[r] ∈ [0,1) there
	// as its only randomness (so a caller that
	// owns one seeded stream per sequence gets the same token whatever the
	// batch layout). It writes ids[r]; logp[r], the token's log-probability
	// under the distribution it was drawn from (temperature, then top-k,
	// top-p, min-p; 0 under greedy); and fullLogp[r] =
	// log_softmax(logits[r]/T)[ids[r]], the log-probability under the
	// temperature-scaled unfiltered distribution, which is what training
	// computes (T = the row's Temperature, or 1 under greedy, as
	// TrainOptions.Temperature 0 means 1), computed as training computes
	// it: bit for bit what this backend's Scale(row, 1/T) (1/T a float32;
	// skipped at T = 1) then LogSoftmaxGather give for ids[r]
	// (kerneltest.SampleFullLogProbExact), so sampled and trained log-probs
	// of the same logits are equal. fullLogp − logp is the log of the
	// probability mass the filters kept (0 without filters). Greedy
	// (Temperature 0) rows take Argmax. A row with no finite logit (every
	// one NaN or ±Inf) has no distribution: it gets ids[r] = −1 and NaN
	// log-probabilities, and the other rows are drawn as if it were not
	// there, so a device backend reports it without the host reading the
	// logits first (the caller ends that row's request).
	SampleRows(ids, logp, fullLogp, logits Buffer, args SampleArgs, rows, v int)

	// PolicyLoss evaluates the per-token policy-gradient loss of GRPO and
	// its relatives (see LossParams, LossInput, LossOutput) over N tokens
	// and writes each token's loss contribution and d loss / d logp (and
	// d loss / d entropy) without a host round trip.
	PolicyLoss(out LossOutput, in LossInput, p LossParams, n int)

	// AdamW updates param[N] in place from grad[N] with first and second
	// moments m[N], v[N] (decoupled weight decay, bias correction by step,
	// which counts from 1).
	AdamW(param, grad, m, v Buffer, p AdamWParams, step int)
}

// SamplingParams selects the distribution SampleRows draws from. Filters apply
// in the order Hugging Face's generate applies them: temperature, top-k,
// top-p, min-p. A zero field disables its filter.
type SamplingParams struct {
	Temperature float32 // 0 = greedy
	TopK        int     // keep the K most likely tokens; 0 = all
	TopP        float32 // keep the smallest set with cumulative probability ≥ TopP; 0 or 1 = all
	MinP        float32 // drop tokens with p < MinP · p_max; 0 = none
}

// AdamWParams are AdamW's hyperparameters for one update.
type AdamWParams struct {
	LR          float32
	Beta1       float32
	Beta2       float32
	Eps         float32
	WeightDecay float32
}
