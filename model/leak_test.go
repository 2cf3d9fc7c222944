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

// TestNoBackendMemoryLeaks runs a full cycle through kerneltest.Counting
// with copying imports (so every import is an allocation of its own, as
// on a device) and requires that, once everything is released or closed,
// no allocation the backend made is still live: load, a Batch
// generation (prompt sharing by Fork included), LogProbs, a replaced KV
// pool, LoRA training steps with the KL reference, a saved adapter,
// attaching, merging and detaching adapters, Full training with the bf16
// reference, then Sequence.Release, Batch.Release, Trainable.Close,
// AdamW.Release and Model.Close.
func TestNoBackendMemoryLeaks(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	c := &kerneltest.Counting{Backend: be, CopyImports: true}
	start := c.Live()
	ctx := t.Context()
	m, err := Load(filepath.Join("testdata", "tiny_tied_f32"), c)
	require.NoError(t, err)
	lora, err := LoadAdapter(filepath.Join("testdata", "tiny_tied_f32_lora"), m)
	require.NoError(t, err)

	b := m.NewBatch(BatchOptions{MaxBatch: 2})
	parent := NewSequence(1, 1, 2, 3, 4)
	require.NoError(t, m.Prefill(ctx, []*Sequence{parent}, BatchOptions{}))
	seqs := []*Sequence{parent.Fork(2), NewSequence(3, 5, 6)}
	for _, s := range seqs {
		_, err := b.Add(Request{Seq: s, MaxNewTokens: 3})
		require.NoError(t, err)
	}
	for b.Len() > 0 {
		_, err := b.Step(ctx)
		require.NoError(t, err)
	}
	b.Release()
	_, err = m.LogProbs(ctx, []Scored{{Tokens: []int32{1, 2, 3, 4}, Start: 1}}, LogProbsOptions{Entropy: true})
	require.NoError(t, err)
	require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 16})) // parent's blocks stay with the old pool
	_, err = m.Generate(ctx, []Request{{Seq: NewSequence(4, 7, 8), MaxNewTokens: 2}}, BatchOptions{})
	require.NoError(t, err)

	train := func(opts TrainOptions, beta float32) {
		tr, err := NewTrainable(m, opts)
		require.NoError(t, err)
		opt, err := NewAdamW(c, tr.Params(), DefaultAdamWConfig(1e-2))
		require.NoError(t, err)
		ts := []TrainSeq{{IDs: []int32{1, 2, 3, 4, 5}, Start: 2}}
		for range 2 {
			refLP, err := tr.RefLogProbs(ctx, ts)
			require.NoError(t, err)
			loss := SFTLoss(ts)
			loss.Beta, loss.RefLogP = beta, refLP
			_, err = tr.Accumulate(ctx, ts, loss)
			require.NoError(t, err)
			_, err = opt.Step()
			require.NoError(t, err)
			tr.ZeroGrad()
		}
		tr.Close()
		opt.Release()
	}
	train(TrainOptions{}, 0.1)
	require.NoError(t, SaveAdapter(t.TempDir(), m, lora, ""))
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 4}, 1))
	_, err = m.Logits([]int32{1, 2}, Options{})
	require.NoError(t, err)
	require.NoError(t, MergeLoRA(m))
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 4}, 2))
	_, err = m.Logits([]int32{1, 2}, Options{})
	require.NoError(t, err)
	DetachLoRA(m)
	train(TrainOptions{Full: true, Reference: true, KeepActivations: true}, 0.1)

	for _, s := range append(seqs, parent) {
		s.Release()
	}
	assert.Positive(t, c.Live()-start, "weights and the KV pool are live before Close")
	require.NoError(t, m.Close())
	assert.Equal(t, start, c.Live(), "allocations live after everything was released and closed")
	assert.Empty(t, c.BadFrees, "memory freed twice")
}

// TestTrainableCloseFreesGradients: Trainable.Close gives back the
// gradients, the zeroed buffer and the pass buffers, and a second Close
// frees nothing more; the trained values stay with the Model.
func TestTrainableCloseFreesGradients(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	c := &kerneltest.Counting{Backend: be, CopyImports: true}
	f := &freeCounting{Backend: c} // Live cannot see a second Free of the same memory; this can
	m := trLoadTiny(t, f, true)
	require.NoError(t, m.ImportWeights()) // the adapters' imports are the Model's
	before := c.Live()
	tr, err := NewTrainable(m, TrainOptions{})
	require.NoError(t, err)
	_, err = tr.Accumulate(t.Context(), []TrainSeq{{IDs: []int32{1, 2, 3}, Start: 1}}, SFTLoss([]TrainSeq{{IDs: []int32{1, 2, 3}, Start: 1}}))
	require.NoError(t, err)
	assert.Greater(t, c.Live(), before+len(tr.Params()), "gradients and pass buffers are live")
	tr.Close()
	assert.Equal(t, before, c.Live(), "Close frees what the Trainable allocated")
	f.frees = 0
	tr.Close()
	assert.Zero(t, f.frees, "a second Close frees nothing more")
	assert.Empty(t, c.BadFrees, "memory freed twice")
	assert.Equal(t, before, c.Live())
	for _, p := range tr.Params() {
		assert.Equal(t, kernels.F32, p.Data.DType(), "%s: the value stays", p.Name)
		assert.Positive(t, p.Data.Len())
	}
}
