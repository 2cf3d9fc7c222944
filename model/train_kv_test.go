package model

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels/cpu"
)

// TestTrainKVBlocks: a training pass holds its sequences' K/V in blocks of
// one layer (⌈T/64⌉ per sequence, whatever the model's depth) while it
// runs and returns them to the pool when it is done, for a step (forward
// and backward, with and without checkpointing) and for a no-grad
// LogProbs pass; Release gives the pool's memory back.
func TestTrainKVBlocks(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	m := trLoadTiny(t, be, true)
	c := m.Config
	seqs := trRandomSeqs(rand.New(rand.NewPCG(3, 3)), c.VocabSize, 100, 64, 1)
	w := trRandomWeights(rand.New(rand.NewPCG(4, 4)), seqs)
	const blocks = 2 + 1 + 1
	blockBytes := int64(2*trainKVBlock*c.KVDim()) * 4 // K and V, one layer, f32
	ctx := context.Background()
	for _, checkpoint := range []bool{false, true} {
		tr, err := NewTrainable(m, TrainOptions{KeepActivations: !checkpoint})
		require.NoError(t, err)
		_, _, err = tr.Forward(ctx, seqs)
		require.NoError(t, err)
		st := tr.st.kv.pool.stats()
		assert.Equal(t, blocks, st.InUse, "checkpoint=%v: blocks held between Forward and Backward", checkpoint)
		assert.Equal(t, blocks*blockBytes, st.Bytes, "checkpoint=%v: one layer's K/V", checkpoint)
		require.NoError(t, tr.Backward(ctx, w))
		assert.Zero(t, tr.st.kv.pool.stats().InUse, "checkpoint=%v: blocks released after Backward", checkpoint)
		_, err = tr.Accumulate(ctx, seqs, trGradLoss(w))
		require.NoError(t, err)
		assert.Zero(t, tr.st.kv.pool.stats().InUse, "checkpoint=%v: blocks released after Accumulate", checkpoint)
		_, _, err = tr.LogProbs(ctx, seqs, true)
		require.NoError(t, err)
		assert.Zero(t, tr.inf.kv.pool.stats().InUse, "checkpoint=%v: blocks released after LogProbs", checkpoint)
		assert.GreaterOrEqual(t, tr.ActivationBytes(), blocks*blockBytes, "ActivationBytes counts the K/V blocks")
		tr.Release()
		assert.Zero(t, tr.st.kv.pool.stats().Bytes, "checkpoint=%v: Release gives the blocks' memory back", checkpoint)
	}
}
