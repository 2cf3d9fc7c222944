package model

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
)

// TestTransfers counts, through kerneltest.Counting, the host↔backend
// crossings of one decode step of a Batch and of one training step.
// Counting also counts the hidden crossings: a host Buffer passed to a
// compute op that the backend neither allocated nor imported, which a
// device backend would stage per op (Transfers.HostArgs).
//
// The attention layout and the block tables are I32 Buffers on the
// backend (kernels.BatchLayout, kernels.PagedKV): they cross in the one
// Upload that carries a forward's token ids, B+1 sequence offsets and B·W
// block ids more, and a decode step sends them only when they change.
// Before they moved there, each Attention call of a device backend
// uploaded its block tables and a descriptor array itself, three uploads
// per layer per step that Counting could not see; now nothing crosses
// inside an op.
//
// Decode steps, two sequences feeding one token each (asserted exactly):
// one Upload of the sampled rows' parameters and uniforms
// (kernels.SampleArgs: 6 I32 words a row, 12) and the token ids and their
// positions (I32, 2 per token: 4), 16 elements, plus, on the first decode
// step after the prefill (the layout changed: T 3 and 2 became 1 and 1),
// the sequences' offsets (3) and block tables (2 × 1 entry): 21 elements;
// the next step, whose layout and tables are unchanged, uploads the 16
// alone. The
// sampled rows are the forward's rows in order, so no row-index upload;
// no scalar (a row with no finite logit comes back from SampleRows as
// kernels.NoToken instead of the host checking the logits first); two
// Downloads in one DownloadAll (one wait on a device), the sampled ids (2
// I32) and their log-probs under the sampling and the full distribution (4
// F32): 6 elements. Weights were imported at Load and activations, scratch
// and the KV cache are the backend's (Alloc), so HostArgs is 0.
//
// LogProbs, the no-grad forward that scores sequences, over two sequences
// of 5 and 3 tokens scoring 3 and 2 of them with entropies, in one
// forward and one chunk (asserted exactly): one Upload of the 8 ids and
// positions, the 3 offsets and the 2 block-table entries (21 elements)
// and one of the 5 scored rows' indices and targets (10); one Download of
// their 5 log-probs and 5 entropies. No scalars, no host arguments.
//
// Training step over two sequences of 5 and 3 tokens scoring 5 (asserted
// exactly). Forward, Backward, AdamW.Step: one Upload of the 8 ids and
// positions, the 5 scored rows' indices and targets and the attention
// layout (3 offsets, 2 block-table entries of the pass's K/V blocks): 31
// elements; one Download of their log-probs and entropies (10), one
// Upload of Backward's 5 weights d loss / d log-prob, the gradient norm's
// scalar. Accumulate (the loss on the backend, per token), AdamW.Step: the
// same ids Upload, one Upload of the loss's per-token inputs (advantages,
// weights, old log-probs: 15), one Download of the log-probs, entropies
// and loss outputs (8 per token: 40) and one of the clip flags (5 U8),
// the scalar; nothing crosses per logits chunk. Activations, their
// gradients, the logits chunk, the loss tensors, the adapters' Bᵀ,
// lm_head's transposed copy, the parameters' gradients and AdamW's moments
// are the backend's (Alloc), so no compute op gets host memory the
// backend did not make (HostArgs 0). The parameters' values are the
// Model's imports of the trained weights (Param.Data), which AdamW updates
// in place and the forward and backward read, so AdamW gets no host
// argument either. Imports copy here (Counting.CopyImports), as on a
// device, so a host slice passed in place of an import would count.
//
// After the steps, Model.DownloadParams brings the trained values back
// for a host reader with one Download per parameter (nothing moves on a
// CPU backend, whose imports are the host memory: see
// TestDownloadParamsOnCPU).
func TestTransfers(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	c := &kerneltest.Counting{Backend: be, CopyImports: true}
	m := trLoadTiny(t, c, true)
	ctx := t.Context()

	b := m.NewBatch(BatchOptions{MaxBatch: 2})
	for i, prompt := range [][]int32{{1, 2, 3}, {4, 5}} {
		_, err := b.Add(Request{Seq: NewSequence(uint64(i), prompt...), MaxNewTokens: 4})
		require.NoError(t, err)
	}
	_, err := b.Step(ctx) // prefill and the first token
	require.NoError(t, err)
	require.Equal(t, 2, b.Len())
	c.Reset()
	_, err = b.Step(ctx)
	require.NoError(t, err)
	assert.Equal(t, kerneltest.Transfers{Uploads: 1, Downloads: 2, UploadElems: 21, DownloadElems: 6}, c.N,
		"the first decode step (a new layout); host arguments: %v", c.Foreign)
	c.Reset()
	_, err = b.Step(ctx)
	require.NoError(t, err)
	assert.Equal(t, kerneltest.Transfers{Uploads: 1, Downloads: 2, UploadElems: 16, DownloadElems: 6}, c.N,
		"a decode step; host arguments: %v", c.Foreign)

	c.Reset()
	_, err = m.LogProbs(ctx, []Scored{{Tokens: []int32{1, 2, 3, 4, 5}, Start: 2}, {Tokens: []int32{6, 7, 8}}}, LogProbsOptions{Entropy: true})
	require.NoError(t, err)
	assert.Equal(t, kerneltest.Transfers{Uploads: 2, Downloads: 1, UploadElems: 31, DownloadElems: 10}, c.N,
		"LogProbs; host arguments: %v", c.Foreign)
	// LogProbs and Generate give their scratch back (Runner.Release,
	// Batch.Release): repeating them leaves no more live allocations (the
	// KV pool keeps its blocks, so the count is taken after a first call).
	live := c.Live()
	_, err = m.LogProbs(ctx, []Scored{{Tokens: []int32{1, 2, 3, 4, 5}, Start: 2}, {Tokens: []int32{6, 7, 8}}}, LogProbsOptions{Entropy: true})
	require.NoError(t, err)
	assert.Equal(t, live, c.Live(), "allocations live after a second LogProbs")
	gen := func() {
		_, err := m.Generate(ctx, []Request{{Seq: NewSequence(9, 1, 2, 3), MaxNewTokens: 3}}, BatchOptions{})
		require.NoError(t, err)
	}
	gen()
	live = c.Live()
	gen()
	assert.Equal(t, live, c.Live(), "allocations live after a second Generate")

	tr, err := NewTrainable(m, TrainOptions{})
	require.NoError(t, err)
	opt, err := NewAdamW(c, tr.Params(), DefaultAdamWConfig(1e-2))
	require.NoError(t, err)
	seqs := []TrainSeq{{IDs: []int32{1, 2, 3, 4, 5}, Start: 2}, {IDs: []int32{6, 7, 8}, Start: 1}}
	c.Reset()
	lp, _, err := tr.Forward(ctx, seqs)
	require.NoError(t, err)
	dlogp := make([][]float32, len(lp))
	for i := range lp {
		dlogp[i] = make([]float32, len(lp[i]))
		for j := range dlogp[i] {
			dlogp[i][j] = -1
		}
	}
	require.NoError(t, tr.Backward(ctx, dlogp))
	st, err := opt.Step()
	require.NoError(t, err)
	assert.Positive(t, st.GradNorm)
	explicit := c.N
	explicit.HostArgs = 0
	assert.Equal(t, kerneltest.Transfers{Uploads: 2, Downloads: 1, Scalars: 1, UploadElems: 36, DownloadElems: 10}, explicit,
		"one training step's explicit crossings (Forward, Backward, AdamW.Step)")
	assert.Equal(t, 0, c.N.HostArgs, "training step's host Buffer arguments (first: %v)", c.Foreign)

	// The usual step: Accumulate evaluates the loss on the backend.
	loss := Loss{LossParams: kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.2}, SeqAdv: []float32{1, -1}}
	for i := range lp {
		w, old := make([]float32, len(lp[i])), make([]float32, len(lp[i]))
		for j := range w {
			w[j], old[j] = 0.2, lp[i][j]-0.1
		}
		loss.Weight, loss.OldLogP = append(loss.Weight, w), append(loss.OldLogP, old)
	}
	c.Reset()
	res, err := tr.Accumulate(ctx, seqs, loss)
	require.NoError(t, err)
	require.Equal(t, 5, res.Tokens)
	_, err = opt.Step()
	require.NoError(t, err)
	explicit = c.N
	explicit.HostArgs = 0
	assert.Equal(t, kerneltest.Transfers{Uploads: 2, Downloads: 2, Scalars: 1, UploadElems: 46, DownloadElems: 45}, explicit,
		"one training step's explicit crossings (Accumulate, AdamW.Step)")
	assert.Equal(t, 0, c.N.HostArgs, "training step's host Buffer arguments (first: %v)", c.Foreign)

	c.Reset()
	require.NoError(t, m.DownloadParams())
	elems := 0
	for _, p := range tr.Params() {
		elems += p.Data.Len()
	}
	assert.Equal(t, kerneltest.Transfers{Downloads: len(tr.Params()), DownloadElems: elems}, c.N, "DownloadParams: one Download per parameter")

	// A second step reuses the pass buffers; Release gives them back and a
	// later step allocates them again; AdamW.Release frees the moments.
	live = c.Live()
	_, err = tr.Accumulate(ctx, seqs, loss)
	require.NoError(t, err)
	assert.Equal(t, live, c.Live(), "allocations live after a second Accumulate")
	tr.Release()
	released := c.Live()
	assert.Less(t, released, live, "Trainable.Release frees the pass buffers")
	res2, err := tr.Accumulate(ctx, seqs, loss)
	require.NoError(t, err)
	assert.Equal(t, res.Tokens, res2.Tokens)
	assert.Equal(t, live, c.Live(), "a step after Release allocates what it released")
	opt.Release()
	assert.Equal(t, live-2*len(tr.Params()), c.Live(), "AdamW.Release frees two moments per param")
	_, err = opt.Step()
	assert.ErrorIs(t, err, ErrReleased)
	assert.ErrorIs(t, opt.SaveState(filepath.Join(t.TempDir(), "state.safetensors")), ErrReleased)
	assert.Empty(t, c.BadFrees, "memory freed twice")
}

// TestImportTable: Load imports every weight (one Import each; the tied
// lm_head shares the embedding's), an adapter is imported on its first
// forward, and detaching, re-attaching or merging adapters gives the
// replaced weights' imports back (Backend.Free), so the table and the
// backend's copies do not grow with each adapter.
func TestImportTable(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	c := &kerneltest.Counting{Backend: be, CopyImports: true} // each import an allocation of its own, as on a device
	m := trLoadTiny(t, c, false)
	cfg := m.Config
	perLayer := 4 + 7 // four norms, seven projections
	assert.Equal(t, 2+cfg.NumLayers*perLayer, c.N.Imports, "embedding (tied lm_head), final norm, each layer's weights")
	fwd := func() {
		_, err := m.Logits([]int32{1, 2, 3}, Options{})
		require.NoError(t, err)
	}
	fwd() // the KV pool's first block allocation stays with the pool
	base := c.Live()
	fwd()
	assert.Equal(t, base, c.Live(), "a forward without adapters imports nothing new and keeps no scratch")

	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 4}, 1))
	fwd()
	assert.Equal(t, base+2*7*cfg.NumLayers, c.Live(), "A and B of every adapter imported")
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 4}, 2))
	fwd()
	assert.Equal(t, base+2*7*cfg.NumLayers, c.Live(), "re-attaching replaces the imports")
	DetachLoRA(m)
	assert.Equal(t, base, c.Live(), "detaching gives them back")

	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 4}, 3))
	fwd()
	require.NoError(t, MergeLoRA(m))
	fwd()
	assert.Equal(t, base, c.Live(), "merged weights replace the base weights' imports")
	assert.Empty(t, c.BadFrees, "memory freed twice")
}
