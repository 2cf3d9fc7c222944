package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// deepFork is Fork without sharing: the child gets fresh blocks holding a
// copy of the parent's, as the contiguous cache used to.
func deepFork(t *testing.T, m *Model, s *Sequence, seed uint64) *Sequence {
	t.Helper()
	f := NewSequence(seed, s.Tokens...)
	p := s.Cache.st.own.pool
	require.NoError(t, f.Cache.reserve(m.Backend, p, s.Cache.Len))
	for i, id := range s.Cache.st.own.ids {
		p.copyRows(m.Backend, f.Cache.st.own.ids[i], id, p.bs)
	}
	f.Cache.Len = s.Cache.Len
	return f
}

// blockSnapshot copies every K/V value of s's blocks.
func blockSnapshot(s *Sequence) [][]float32 {
	var out [][]float32
	st := s.Cache.st
	for l := range st.kPages {
		for b := range st.kPages[l] {
			out = append(out, slices.Clone(st.kPages[l][b]), slices.Clone(st.vPages[l][b]))
		}
	}
	return out
}

func TestForkSharesPromptBlocksCopyOnWrite(t *testing.T) {
	for _, tb := range inferBackends(t) {
		for _, bs := range []int{4, 64} {
			sc := shapeCases()[0]
			t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
				m := randomModel(t, sc, tb.b)
				require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: bs}))
				prompt := randomTokens(rand.New(rand.NewPCG(6, 7)), 10, m.Config.VocabSize)
				p := kernels.SamplingParams{Temperature: 1, TopK: 20}
				root := NewSequence(0, prompt...)
				require.NoError(t, m.Prefill(t.Context(), []*Sequence{root}, BatchOptions{}))
				promptBlocks := (len(prompt) + bs - 1) / bs
				require.Equal(t, promptBlocks, root.Cache.Blocks())
				before := blockSnapshot(root)

				const G = 4
				var shared, copied []Request
				for g := range G {
					shared = append(shared, Request{Seq: root.Fork(uint64(g)), MaxNewTokens: 7, Sampling: p})
					copied = append(copied, Request{Seq: deepFork(t, m, root, uint64(g)), MaxNewTokens: 7, Sampling: p})
				}
				st := m.KVStats()
				assert.Equal(t, promptBlocks, st.Shared, "every prompt block is shared by the root and its forks")

				a, err := m.Generate(t.Context(), shared, BatchOptions{})
				require.NoError(t, err)
				b, err := m.Generate(t.Context(), copied, BatchOptions{})
				require.NoError(t, err)
				for g := range G {
					assert.Equal(t, b[g].Tokens, a[g].Tokens, "fork %d tokens", g)
					assert.Equal(t, b[g].LogProbs, a[g].LogProbs, "fork %d log-probs: sharing is bit-exact", g)
				}
				assert.Equal(t, before, blockSnapshot(root), "forks never write the root's blocks")
				assert.Equal(t, prompt, root.Tokens)
				// Full prompt blocks stay shared; the partly filled last one
				// was copied by each fork that wrote into it.
				full := (len(prompt) - 1) / bs
				assert.Equal(t, full, m.KVStats().Shared)

				// A tool response appended to one fork writes only that fork.
				other := blockSnapshot(shared[1].Seq)
				shared[0].Seq.Append(prompt[:5]...)
				copied[0].Seq.Append(prompt[:5]...)
				a, err = m.Generate(t.Context(), shared[:1], BatchOptions{})
				require.NoError(t, err)
				b, err = m.Generate(t.Context(), copied[:1], BatchOptions{})
				require.NoError(t, err)
				assert.Equal(t, b[0].LogProbs, a[0].LogProbs)
				assert.Equal(t, other, blockSnapshot(shared[1].Seq), "an append to fork 0 leaves fork 1's blocks alone")
				assert.Equal(t, before, blockSnapshot(root))

				// Releasing everything returns every block.
				root.Release()
				for g := range G {
					shared[g].Seq.Release()
					copied[g].Seq.Release()
				}
				st = m.KVStats()
				assert.Zero(t, st.InUse)
				assert.Positive(t, st.Blocks)
			})
		}
	}
}

func TestBlockGeometryDoesNotChangeLogits(t *testing.T) {
	for _, tb := range inferBackends(t) {
		for _, sc := range shapeCases() {
			t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
				m := randomModel(t, sc, tb.b)
				toks := randomTokens(rand.New(rand.NewPCG(1, 2)), 70, m.Config.VocabSize)
				want, err := m.Logits(toks, Options{})
				require.NoError(t, err)
				for _, bs := range []int{1, 3, 16, 128} {
					require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: bs}))
					got, err := m.Logits(toks, Options{})
					require.NoError(t, err)
					assert.Equal(t, want, got, "block size %d: paged attention is bit-exact", bs)
					assert.Zero(t, m.KVStats().InUse, "Logits returns its blocks")
				}
			})
		}
	}
}

func TestBF16KVCloseToF32(t *testing.T) {
	for _, tb := range inferBackends(t) {
		sc := shapeCases()[0]
		t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
			m := randomModel(t, sc, tb.b)
			toks := randomTokens(rand.New(rand.NewPCG(3, 4)), 40, m.Config.VocabSize)
			f32, err := m.Logits(toks, Options{})
			require.NoError(t, err)
			require.NoError(t, m.SetKVOptions(KVOptions{DType: kernels.BF16, BlockSize: 16}))
			assert.Equal(t, 2*m.Config.NumLayers*m.Config.KVDim()*2, m.KVStats().BytesPerToken)
			bf, err := m.Logits(toks, Options{})
			require.NoError(t, err)
			var num, den, maxAbs float64
			for i := range f32 {
				d := float64(bf[i] - f32[i])
				num += d * d
				den += float64(f32[i]) * float64(f32[i])
				maxAbs = math.Max(maxAbs, math.Abs(d))
			}
			// Each K/V element carries a relative rounding ≤ 2⁻⁹; through two
			// layers the logits move by about that much relative to their
			// scale (measured NMSE 7.7e-6, max abs 8.5e-3 on logits of O(1)), far below a real bug (~1).
			assert.Less(t, num/den, 1e-4, "NMSE of logits, bf16 vs f32 KV (max abs %g)", maxAbs)
			assert.NotEqual(t, f32, bf, "bf16 storage is really used")
		})
	}
}

func TestBatchPerRequestErrorsAndCancel(t *testing.T) {
	m := openTiny(t, inferBackends(t)[1].b)
	m.Config.MaxPositions = 12
	good := func() *Sequence { return NewSequence(5, 1, 2, 3) }
	alone, err := m.Generate(t.Context(), []Request{{Seq: good(), MaxNewTokens: 4}}, BatchOptions{})
	require.NoError(t, err)

	bad := NewSequence(0, 1, 2)
	long := NewSequence(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)
	grows := NewSequence(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	reqs := []Request{
		{Seq: good(), MaxNewTokens: 4},
		{Seq: bad, MaxNewTokens: 4},
		{Seq: long, MaxNewTokens: 4},
		{Seq: grows, MaxNewTokens: 4},
	}
	b := m.NewBatch(BatchOptions{})
	ids := make([]int, len(reqs))
	for i, r := range reqs {
		ids[i], err = b.Add(r)
		require.NoError(t, err)
	}
	bad.Append(int32(m.Config.VocabSize)) // a bad id after Add: caught at the step
	out := map[int]Finished{}
	for b.Len() > 0 {
		done, err := b.Step(t.Context())
		require.NoError(t, err, "one request's error does not fail the step")
		for _, f := range done {
			out[f.ID] = f
		}
	}
	assert.NoError(t, out[ids[0]].Err)
	assert.Equal(t, alone[0].Tokens, out[ids[0]].Tokens, "the good request is unaffected")
	assert.ErrorContains(t, out[ids[1]].Err, "outside the vocabulary")
	assert.ErrorIs(t, out[ids[2]].Err, ErrContextLength)
	assert.Empty(t, out[ids[2]].Tokens)
	assert.ErrorIs(t, out[ids[3]].Err, ErrContextLength, "a sequence reaching the context length ends with an error")
	assert.Len(t, out[ids[3]].Tokens, 2, "keeping the tokens generated before it (10 + 2 = 12 positions)")

	// Generate reports the failed requests and still returns the others.
	comps, err := m.Generate(t.Context(), []Request{{Seq: good(), MaxNewTokens: 4}, {Seq: NewSequence(0, -1), MaxNewTokens: 2}}, BatchOptions{})
	require.Error(t, err)
	assert.ErrorContains(t, err, "request 1")
	assert.Equal(t, alone[0].Tokens, comps[0].Tokens)
	assert.Error(t, comps[1].Err)
}

func TestCancelReturnsBlocksForReuse(t *testing.T) {
	m := openTiny(t, inferBackends(t)[1].b)
	perBlock := int64(16 * 2 * m.Config.NumLayers * m.Config.KVDim() * 4)
	require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 16, MaxBytes: 2 * perBlock}))
	b := m.NewBatch(BatchOptions{})
	first := NewSequence(1, 1, 2, 3)
	id, err := b.Add(Request{Seq: first, MaxNewTokens: 100})
	require.NoError(t, err)
	for range 3 {
		_, err := b.Step(t.Context())
		require.NoError(t, err)
	}
	require.Equal(t, 1, m.KVStats().InUse)
	f, ok := b.Cancel(id)
	require.True(t, ok)
	assert.ErrorIs(t, f.Err, ErrCanceled)
	assert.Len(t, f.Tokens, 3)
	assert.Zero(t, m.KVStats().InUse, "Cancel returns the request's blocks")
	_, ok = b.Cancel(id)
	assert.False(t, ok, "a request is cancelled once")

	// The freed block serves the next request: the pool does not grow.
	blocks := m.KVStats().Blocks
	out, err := m.Generate(t.Context(), []Request{{Seq: NewSequence(2, 1, 2, 3), MaxNewTokens: 5}}, BatchOptions{})
	require.NoError(t, err)
	assert.Len(t, out[0].Tokens, 5)
	assert.Equal(t, blocks, m.KVStats().Blocks)

	// A request needing more than the limit ends with ErrKVPoolFull; the
	// other goes on.
	out, err = m.Generate(t.Context(), []Request{
		{Seq: NewSequence(2, 1, 2, 3), MaxNewTokens: 5},
		{Seq: NewSequence(3, randomTokens(rand.New(rand.NewPCG(1, 1)), 40, 500)...), MaxNewTokens: 2},
	}, BatchOptions{})
	require.Error(t, err)
	assert.NoError(t, out[0].Err)
	assert.Len(t, out[0].Tokens, 5)
	assert.ErrorIs(t, out[1].Err, ErrKVPoolFull)
	assert.Equal(t, 2, m.KVStats().Blocks, "the pool stops at its limit")

	// Remove keeps the sequence's cache.
	require.NoError(t, m.SetKVOptions(KVOptions{}))
	b = m.NewBatch(BatchOptions{})
	kept := NewSequence(4, 1, 2, 3)
	id, err = b.Add(Request{Seq: kept, MaxNewTokens: 10})
	require.NoError(t, err)
	_, err = b.Step(t.Context())
	require.NoError(t, err)
	_, ok = b.Remove(id)
	require.True(t, ok)
	assert.Equal(t, 3, kept.Cache.Len)
	assert.Zero(t, b.Len())
}
