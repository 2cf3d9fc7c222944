package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
)

// TestTransfers counts, through kerneltest.Counting, the host↔backend
// crossings of the Buffer API: one decode step of a Batch makes none, one
// training step (Forward, Backward, AdamW.Step) makes one, the gradient
// norm's scalar. Every op, compute ops included, now takes Buffers, and the
// KV cache's blocks come from the backend (Alloc), but model still keeps
// its activations and scratch in host memory and passes them as host
// Buffers (kernels.HostF32 and friends), which a
// CPU backend reads in place and a device backend would stage per op;
// those are not Upload/Download calls and do not show here. When the
// activations move to backend memory (backend.Alloc), the expected counts
// gain the token ids uploaded and the sampled ids downloaded per step.
func TestTransfers(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	c := &kerneltest.Counting{Backend: be}
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
	assert.Equal(t, kerneltest.Transfers{}, c.N, "one decode step")

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
	assert.Equal(t, kerneltest.Transfers{Scalars: 1}, c.N, "one training step")
}
