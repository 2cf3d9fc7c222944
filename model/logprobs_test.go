package model

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogProbsChunkingAndBatching(t *testing.T) {
	for _, tb := range inferBackends(t) {
		sc := shapeCases()[0]
		t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
			m := randomModel(t, sc, tb.b)
			V := m.Config.VocabSize
			rng := rand.New(rand.NewPCG(8, 8))
			var seqs []Scored
			for i, n := range []int{9, 1, 17, 4, 0, 12} {
				s := Scored{Tokens: randomTokens(rng, n, V)}
				if i == 2 {
					s.Start = 5
				}
				if i%2 == 0 && n > 0 {
					s.Mask = make([]bool, n-s.first()) // counts from Start
					for j := range s.Mask {
						s.Mask[j] = rng.IntN(2) == 0
					}
				}
				seqs = append(seqs, s)
			}
			want, err := m.LogProbs(t.Context(), seqs, LogProbsOptions{Entropy: true})
			require.NoError(t, err)
			// Each sequence against its own full-logits computation.
			for i, s := range seqs {
				require.Len(t, want[i].LogProbs, len(s.Tokens))
				if len(s.Tokens) == 0 {
					continue
				}
				logits, err := m.Logits(s.Tokens, Options{})
				require.NoError(t, err)
				for p := 1; p < len(s.Tokens); p++ {
					if p < s.first() || (s.Mask != nil && !s.Mask[p-s.first()]) {
						assert.Zero(t, want[i].LogProbs[p])
						assert.Zero(t, want[i].Entropy[p])
						continue
					}
					row := logits[(p-1)*V : p*V]
					lse := logSumExp(row)
					assert.InDelta(t, float64(row[s.Tokens[p]])-lse, want[i].LogProbs[p], 2e-5, "seq %d token %d", i, p)
					assert.InDelta(t, entropy64(row), want[i].Entropy[p], 1e-4, "seq %d entropy %d", i, p)
				}
			}
			// Tiny steps (sequences split across forwards) and tiny lm_head
			// chunks give the same numbers.
			for _, o := range []LogProbsOptions{{StepTokens: 5, ChunkRows: 3}, {StepTokens: 1, ChunkRows: 1}, {StepTokens: 1000, ChunkRows: 1000}} {
				o.Entropy = true
				got, err := m.LogProbs(t.Context(), seqs, o)
				require.NoError(t, err)
				for i := range seqs {
					assertClose32(t, got[i].LogProbs, want[i].LogProbs, invAtol, invRtol, "chunked logprobs")
					assertClose32(t, got[i].Entropy, want[i].Entropy, invAtol, invRtol, "chunked entropy")
				}
			}
			noEnt, err := m.LogProbs(t.Context(), seqs[:1], LogProbsOptions{})
			require.NoError(t, err)
			assert.Nil(t, noEnt[0].Entropy)
		})
	}
}

func logSumExp(row []float32) float64 {
	mx := float64(row[0])
	for _, v := range row {
		mx = max(mx, float64(v))
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s)
}

func TestLogProbsErrors(t *testing.T) {
	m := openTiny(t, inferBackends(t)[0].b)
	_, err := m.LogProbs(t.Context(), []Scored{{Tokens: []int32{1, 600}}}, LogProbsOptions{})
	assert.ErrorContains(t, err, "600")
	_, err = m.LogProbs(t.Context(), []Scored{{Tokens: []int32{1, 2}, Mask: []bool{true, true}}}, LogProbsOptions{})
	assert.ErrorContains(t, err, "mask")
	_, err = m.LogProbs(t.Context(), []Scored{{Tokens: []int32{1, 2}, Start: 3}}, LogProbsOptions{})
	assert.ErrorContains(t, err, "start")
	_, err = m.LogProbs(t.Context(), []Scored{{Tokens: []int32{1, 2}}}, LogProbsOptions{Temperature: -1})
	assert.ErrorContains(t, err, "temperature")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = m.LogProbs(ctx, []Scored{{Tokens: []int32{1, 2}}}, LogProbsOptions{})
	assert.ErrorIs(t, err, context.Canceled)
}

// TestLogProbsPoolFullAndContextLength: with a bounded KV pool, a step that
// needs more blocks than the pool has is an error wrapping ErrKVPoolFull
// (not a panic), the blocks of every sequence being fed go back to the
// pool, and the pool then serves a request that fits; a sequence past
// max_position_embeddings is ErrContextLength.
func TestLogProbsPoolFullAndContextLength(t *testing.T) {
	m := openTiny(t, inferBackends(t)[1].b)
	short := Scored{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8}}
	long := Scored{Tokens: randomTokens(rand.New(rand.NewPCG(8, 9)), 20, m.Config.VocabSize)}
	want, err := m.LogProbs(t.Context(), []Scored{short}, LogProbsOptions{})
	require.NoError(t, err)

	perBlock := int64(4 * 2 * m.Config.NumLayers * m.Config.KVDim() * 4)
	require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 4, MaxBytes: 3 * perBlock}))
	_, err = m.LogProbs(t.Context(), []Scored{short, long}, LogProbsOptions{})
	require.ErrorIs(t, err, ErrKVPoolFull, "short takes 2 blocks, long needs 5 of the 3")
	assert.Zero(t, m.KVStats().InUse, "the blocks of the sequences being fed are returned")
	got, err := m.LogProbs(t.Context(), []Scored{short}, LogProbsOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, got)

	m.Config.MaxPositions = 7
	_, err = m.LogProbs(t.Context(), []Scored{short}, LogProbsOptions{})
	assert.ErrorIs(t, err, ErrContextLength)
	assert.Zero(t, m.KVStats().InUse)
}
