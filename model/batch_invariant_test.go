package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// TestBatchInvariantLayouts: with BatchOptions.BatchInvariant a sequence's
// tokens and log-probs are the same bit for bit whatever shares its steps:
// alone, all at once, two slots at a time, or prefilled in chunks of 4
// beside others (TestSamplingReproducibleAcrossBatchLayouts holds the
// default mode only to a tolerance), and also across a second turn whose
// tool tokens are fed while others decode. Every shape case runs, the
// AVX-512 tiled attention (head_dim 16) included.
func TestBatchInvariantLayouts(t *testing.T) {
	for _, tb := range inferBackends(t) {
		for _, sc := range shapeCases() {
			t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
				m := randomModel(t, sc, tb.b)
				rng := rand.New(rand.NewPCG(11, 12))
				lens := []int{3, 9, 1, 6, 13, 2}
				maxNew := []int{8, 3, 10, 1, 6, 9}
				var prompts [][]int32
				for _, n := range lens {
					prompts = append(prompts, randomTokens(rng, n, m.Config.VocabSize))
				}
				p := kernels.SamplingParams{Temperature: 1}
				inv := func(o BatchOptions) BatchOptions { o.BatchInvariant = true; return o }
				alone := make([]Completion, len(prompts))
				for i := range prompts {
					alone[i] = sampledRun(t, m, prompts, maxNew, []int{i}, inv(BatchOptions{PrefillTokens: 4}), p)[i]
				}
				for _, l := range []struct {
					name  string
					order []int
					opts  BatchOptions
				}{
					{"all_at_once", []int{0, 1, 2, 3, 4, 5}, BatchOptions{PrefillTokens: 4}},
					{"reversed_slots2", []int{5, 4, 3, 2, 1, 0}, BatchOptions{MaxBatch: 2, PrefillTokens: 4}},
					{"slots3", []int{2, 0, 4, 1, 5, 3}, BatchOptions{MaxBatch: 3, PrefillTokens: 4}},
				} {
					got := sampledRun(t, m, prompts, maxNew, l.order, inv(l.opts), p)
					for i := range prompts {
						assert.Equal(t, alone[i].Tokens, got[i].Tokens, "%s seq %d tokens", l.name, i)
						assert.Equal(t, alone[i].LogProbs, got[i].LogProbs, "%s seq %d log-probs, bit for bit", l.name, i)
						assert.Equal(t, alone[i].FullLogProbs, got[i].FullLogProbs, "%s seq %d full log-probs", l.name, i)
					}
				}

				// A second turn: tool tokens join while another sequence
				// decodes (and, in one run, prefills its own long prompt).
				turn2 := func(crowd bool) Completion {
					seq := NewSequence(5, prompts[4]...)
					b := m.NewBatch(inv(BatchOptions{PrefillTokens: 4}))
					defer b.Release()
					gen := func(r Request) Completion {
						id, err := b.Add(r)
						require.NoError(t, err)
						for {
							fin, err := b.Step(t.Context())
							require.NoError(t, err)
							for _, f := range fin {
								if f.ID == id {
									return f.Completion
								}
							}
						}
					}
					gen(Request{Seq: seq, MaxNewTokens: 3, Sampling: p})
					seq.Append(randomTokens(rand.New(rand.NewPCG(3, 3)), 7, m.Config.VocabSize)...)
					if crowd {
						other := NewSequence(9, randomTokens(rand.New(rand.NewPCG(4, 4)), 11, m.Config.VocabSize)...)
						_, err := b.Add(Request{Seq: other, MaxNewTokens: 20, Sampling: p})
						require.NoError(t, err)
					}
					return gen(Request{Seq: seq, MaxNewTokens: 5, Sampling: p})
				}
				a, c := turn2(false), turn2(true)
				assert.Equal(t, a.Tokens, c.Tokens)
				assert.Equal(t, a.LogProbs, c.LogProbs, "second turn, bit for bit")
			})
		}
	}
}

// TestChunkLen: normal mode takes what the budget allows (the first
// sequence at least one token); batch-invariant mode cuts only at
// multiples of the chunk, feeding a chunk whole or not at all.
func TestChunkLen(t *testing.T) {
	tests := []struct {
		pos, pending, budget, chunk int
		first, invariant            bool
		want                        int
	}{
		{0, 10, 4, 4, false, false, 4},
		{0, 10, 0, 4, true, false, 1},
		{2, 10, 4, 4, false, true, 2},   // to position 4
		{2, 10, 1, 4, false, true, 0},   // short of it: waits
		{2, 10, 0, 4, true, true, 2},    // the first goes anyway
		{4, 3, 4, 4, false, true, 3},    // the run ends first
		{8, 10, 100, 4, false, true, 4}, // never past a multiple
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, chunkLen(tt.pos, tt.pending, tt.budget, tt.chunk, tt.first, tt.invariant), "%+v", tt)
	}
}

// BenchmarkDecodeBatchInvariant is BenchmarkDecode with and without
// BatchOptions.BatchInvariant: what batch invariance costs a decode step
// (up to mr−1 padded rows per matmul at batches below a whole row group).
func BenchmarkDecodeBatchInvariant(b *testing.B) {
	for _, batch := range []int{1, 8, 64} {
		for _, inv := range []bool{false, true} {
			b.Run(fmt.Sprintf("tiny_BF16_B%d/invariant=%v", batch, inv), func(b *testing.B) {
				benchDecodeBatch(b, BatchOptions{MaxBatch: batch, BatchInvariant: inv})
			})
		}
	}
}
