package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// TestBatchReservesKVForRecordedSteps: on a backend that records decode
// steps, admitting sequences grows the KV pool once to hold every block
// they can take (prompt and MaxNewTokens), so it never moves during their
// decode steps (a move makes the recordings stale); without recordings
// the pool grows on demand, rung by rung, as before. Blocks of sequences
// that stop go back to the pool either way.
func TestBatchReservesKVForRecordedSteps(t *testing.T) {
	const batch, newTokens, bs = 4, 40, 4
	for _, tc := range []struct {
		name     string
		noGraphs bool
	}{{"recorded", false}, {"op by op", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := hollowModel(t)
			require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: bs}))
			bt := m.NewBatch(BatchOptions{MaxBatch: batch, NoGraphs: tc.noGraphs})
			seqs := make([]*Sequence, batch)
			for i := range seqs {
				seqs[i] = NewSequence(uint64(i), 1, 2, 3)
				_, err := bt.Add(Request{Seq: seqs[i], MaxNewTokens: newTokens, Sampling: kernels.SamplingParams{Temperature: 0.8, TopK: 20}})
				require.NoError(t, err)
			}
			_, err := bt.Step(t.Context())
			require.NoError(t, err)
			first := m.KVStats().Blocks
			sizes := map[int]bool{first: true}
			for bt.Len() > 0 {
				_, err := bt.Step(t.Context())
				require.NoError(t, err)
				sizes[m.KVStats().Blocks] = true
			}
			perSeq := (3 + newTokens + bs - 1) / bs
			if tc.noGraphs {
				assert.Greater(t, len(sizes), 2, "the pool grows on demand while decoding: %v", sizes)
			} else {
				assert.Len(t, sizes, 1, "the pool must not move while decoding: sizes %v", sizes)
				assert.GreaterOrEqual(t, first, batch*perSeq, "reserved at admission")
				assert.LessOrEqual(t, first, batch*perSeq*5/4, "within the ladder's quarter")
			}
			for _, s := range seqs {
				s.Release()
			}
			assert.Zero(t, m.KVStats().InUse)
		})
	}
}
