package model

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// TestTrimKVReturnsFreeBlocks: TrimKV drops the memory of free blocks only
// (a live cache keeps its blocks and its logits), the pool grows again on
// demand, and the limit still counts every block.
func TestTrimKVReturnsFreeBlocks(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			m := openTiny(t, inferBackends(t)[1].b)
			require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 4, DType: dt}))
			assert.Zero(t, m.TrimKV(), "an empty pool has nothing to give back")

			generate := func() {
				reqs := make([]Request, 4)
				for i := range reqs {
					reqs[i] = Request{Seq: NewSequence(uint64(i), 1, 2, 3, 4, 5), MaxNewTokens: 11}
				}
				_, err := m.Generate(t.Context(), reqs, BatchOptions{})
				require.NoError(t, err)
				for _, r := range reqs {
					r.Seq.Release()
				}
			}
			generate()
			st := m.KVStats()
			require.Zero(t, st.InUse)
			require.Positive(t, st.Blocks, "generation took blocks")
			perBlock := int64(st.BlockSize * st.BytesPerToken)
			require.Equal(t, int64(st.Blocks)*perBlock, st.Bytes)

			// A live cache's blocks survive the trim, bit for bit.
			kept := NewSequence(9, randomTokens(rand.New(rand.NewPCG(5, 6)), 10, m.Config.VocabSize)...)
			out, err := m.Generate(t.Context(), []Request{{Seq: kept, MaxNewTokens: 1}}, BatchOptions{})
			require.NoError(t, err)
			require.NoError(t, out[0].Err)
			live := m.KVStats().InUse
			require.Positive(t, live)
			before := m.KVStats()
			freed := m.TrimKV()
			after := m.KVStats()
			assert.Equal(t, int64(before.Blocks-live)*perBlock, freed, "every free block's memory is dropped")
			assert.Equal(t, live, after.Blocks, "only the live cache's blocks keep memory")
			assert.Equal(t, int64(live)*perBlock, after.Bytes)
			assert.Equal(t, live, after.InUse)
			assert.Zero(t, m.TrimKV(), "a second trim has nothing left to drop")

			// Greedy continuation from the trimmed pool's live cache equals
			// that of a fresh sequence prefilled after the trim.
			fresh := NewSequence(9, kept.Tokens...)
			outs, err := m.Generate(t.Context(), []Request{{Seq: kept, MaxNewTokens: 6}, {Seq: fresh, MaxNewTokens: 6}}, BatchOptions{})
			require.NoError(t, err)
			assert.Equal(t, outs[1].Tokens, outs[0].Tokens, "the trim left the live cache intact")
			kept.Release()
			fresh.Release()

			// The pool grows again from the trimmed ids.
			generate()
			assert.Equal(t, before.Blocks, m.KVStats().Blocks, "the same generation takes the same blocks again")
			assert.Zero(t, m.KVStats().InUse)
		})
	}
}

// TestTrimKVKeepsLimit: a trimmed pool at its MaxBytes limit still refuses
// past it once its blocks are taken again.
func TestTrimKVKeepsLimit(t *testing.T) {
	m := openTiny(t, inferBackends(t)[1].b)
	perBlock := int64(4 * 2 * m.Config.NumLayers * m.Config.KVDim() * 4)
	require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 4, MaxBytes: 3 * perBlock}))
	generate := func() {
		s := NewSequence(1, 1, 2, 3)
		_, err := m.Generate(t.Context(), []Request{{Seq: s, MaxNewTokens: 9}}, BatchOptions{})
		require.NoError(t, err, "the pool's blocks serve the request")
		s.Release()
	}
	generate()
	require.Equal(t, 3, m.KVStats().Blocks)
	assert.Equal(t, 3*perBlock, m.TrimKV())
	assert.Zero(t, m.KVStats().Bytes)
	generate() // the trimmed blocks serve the same request again
	out, err := m.Generate(t.Context(), []Request{{Seq: NewSequence(2, 1, 2, 3), MaxNewTokens: 20}}, BatchOptions{})
	require.Error(t, err)
	assert.ErrorIs(t, out[0].Err, ErrKVPoolFull)
	assert.Equal(t, 3, m.KVStats().Blocks, "the limit still holds after a trim")
}
