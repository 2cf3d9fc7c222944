package model

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

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
		p.copyBlock(m.Backend, f.Cache.st.own.ids[i], id)
	}
	f.Cache.Len = s.Cache.Len
	return f
}

// blockSnapshot copies every K/V value of s's blocks.
func blockSnapshot(s *Sequence) [][]float32 {
	var out [][]float32
	st := s.Cache.st
	for _, id := range st.own.ids {
		out = append(out, slices.Clone(st.own.pool.blockMem(id).F32()))
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
			// Each K/V element carries a relative rounding ≤ 2⁻⁸; through two
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

	// Each error names the request it belongs to, also when an earlier
	// request was refused by Add (its id is not reused).
	comps, err = m.Generate(t.Context(), []Request{{Seq: NewSequence(0, -1), MaxNewTokens: 2}, {Seq: NewSequence(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13), MaxNewTokens: 2}}, BatchOptions{})
	require.Error(t, err)
	require.ErrorIs(t, comps[1].Err, ErrContextLength)
	assert.ErrorContains(t, comps[1].Err, "request 1:")
	assert.NotContains(t, comps[1].Err.Error(), "request 0")
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

// TestReleasedCacheTakesNewPool: SetKVOptions says caches keep their pool
// only until they are reset or released; a released sequence's next turn
// takes its blocks from the Model's current pool (its block size, dtype and
// bound), not from the pool it used before.
func TestReleasedCacheTakesNewPool(t *testing.T) {
	m := openTiny(t, inferBackends(t)[1].b)
	s := NewSequence(1, 1, 2, 3)
	_, err := m.Generate(t.Context(), []Request{{Seq: s, MaxNewTokens: 2}}, BatchOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, m.KVStats().InUse)
	s.Release()

	require.NoError(t, m.SetKVOptions(KVOptions{DType: kernels.BF16, BlockSize: 2}))
	_, err = m.Generate(t.Context(), []Request{{Seq: s, MaxNewTokens: 2}}, BatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, 3, s.Cache.Blocks(), "6 positions in blocks of 2")
	assert.Equal(t, 3, m.KVStats().InUse, "the blocks come from the new pool")
	s.Release()
	assert.Zero(t, m.KVStats().InUse)

	require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 2, MaxBytes: 1}))
	out, err := m.Generate(t.Context(), []Request{{Seq: s, MaxNewTokens: 1}}, BatchOptions{})
	require.Error(t, err)
	assert.ErrorIs(t, out[0].Err, ErrKVPoolFull, "the new pool's bound holds")
}

// TestDroppedSequencesReturnBlocks: sequences dropped without Release
// (a root and its forks, after generating) give their blocks back once
// the garbage collector finds them unreachable (the runtime.AddCleanup on
// each cache's block table), each block exactly once.
func TestDroppedSequencesReturnBlocks(t *testing.T) {
	m := openTiny(t, inferBackends(t)[1].b)
	require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 2}))
	func() {
		root := NewSequence(1, 1, 2, 3, 4, 5)
		require.NoError(t, m.Prefill(t.Context(), []*Sequence{root}, BatchOptions{}))
		var reqs []Request
		for g := range 3 {
			reqs = append(reqs, Request{Seq: root.Fork(uint64(g)), MaxNewTokens: 5})
		}
		_, err := m.Generate(t.Context(), reqs, BatchOptions{})
		require.NoError(t, err)
		require.Positive(t, m.KVStats().Shared)
	}()
	waitBlocksReturned(m)
	st := m.KVStats()
	assert.Zero(t, st.InUse, "every block came back")
	// The pool reuses them: a new sequence of the same size does not grow it.
	s := NewSequence(2, 1, 2, 3, 4, 5)
	_, err := m.Generate(t.Context(), []Request{{Seq: s, MaxNewTokens: 5}}, BatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, st.Blocks, m.KVStats().Blocks)
}

// TestCancelQueuedFork: cancelling a request that is still queued returns
// its forked sequence's references (the blocks it shares stay with the
// others) and leaves the running requests' results alone.
func TestCancelQueuedFork(t *testing.T) {
	m := openTiny(t, inferBackends(t)[1].b)
	require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 4}))
	p := kernels.SamplingParams{Temperature: 1}
	root := NewSequence(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	require.NoError(t, m.Prefill(t.Context(), []*Sequence{root}, BatchOptions{}))
	alone := root.Fork(1)
	want, err := m.Generate(t.Context(), []Request{{Seq: alone, MaxNewTokens: 6, Sampling: p}}, BatchOptions{})
	require.NoError(t, err)
	alone.Release()

	b := m.NewBatch(BatchOptions{MaxBatch: 1})
	running, queued := root.Fork(1), root.Fork(2)
	idRun, err := b.Add(Request{Seq: running, MaxNewTokens: 6, Sampling: p})
	require.NoError(t, err)
	idQ, err := b.Add(Request{Seq: queued, MaxNewTokens: 6, Sampling: p})
	require.NoError(t, err)
	_, err = b.Step(t.Context())
	require.NoError(t, err)
	f, ok := b.Cancel(idQ)
	require.True(t, ok)
	assert.ErrorIs(t, f.Err, ErrCanceled)
	assert.Empty(t, f.Tokens)
	assert.Zero(t, queued.Cache.Blocks())
	var got Finished
	for b.Len() > 0 {
		done, err := b.Step(t.Context())
		require.NoError(t, err)
		for _, d := range done {
			got = d
		}
	}
	assert.Equal(t, idRun, got.ID)
	assert.Equal(t, want[0].Tokens, got.Tokens)
	root.Release()
	running.Release()
	assert.Zero(t, m.KVStats().InUse, "each block released as often as it was taken")
}

// waitBlocksReturned runs the garbage collector until m's pool has no
// block in use, or 10 s have passed.
func waitBlocksReturned(m *Model) {
	deadline := time.Now().Add(10 * time.Second)
	for m.KVStats().InUse > 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBatchDoesNotPinDroppedSequences: a Batch kept for more requests holds
// no reference to the sequences of finished or removed requests, so the
// ones the caller drops without Release return their blocks to the pool.
func TestBatchDoesNotPinDroppedSequences(t *testing.T) {
	m := openTiny(t, inferBackends(t)[1].b)
	b := m.NewBatch(BatchOptions{MaxBatch: 2})
	func() {
		for _, s := range []*Sequence{NewSequence(1, 1, 2, 3), NewSequence(2, 4, 5), NewSequence(3, 6)} {
			_, err := b.Add(Request{Seq: s, MaxNewTokens: 2})
			require.NoError(t, err)
		}
		_, err := b.Step(t.Context())
		require.NoError(t, err)
		for _, id := range []int{2, 0} { // queued, then running
			_, ok := b.Remove(id)
			require.True(t, ok)
		}
		for b.Len() > 0 {
			_, err := b.Step(t.Context())
			require.NoError(t, err)
		}
		require.Equal(t, 2, m.KVStats().InUse, "the removed queued request never ran")
	}()
	waitBlocksReturned(m)
	assert.Zero(t, m.KVStats().InUse, "the batch still references a dropped sequence")
	runtime.KeepAlive(b)
}

// TestSetKVOptionsRefusesBadOptions: each bad setting is an error naming
// it, before any block exists (a huge block size used to be accepted and
// then panic, overflowing, at the first forward).
func TestSetKVOptionsRefusesBadOptions(t *testing.T) {
	m := openTiny(t, inferBackends(t)[1].b)
	cases := []struct {
		name string
		o    KVOptions
		want string
	}{
		{"negative_block", KVOptions{BlockSize: -1}, "block size -1"},
		{"huge_block", KVOptions{BlockSize: 1 << 40}, "block size 1099511627776"},
		{"dtype", KVOptions{DType: kernels.F16}, "dtype"},
		{"negative_max_bytes", KVOptions{MaxBytes: -5}, "max bytes -5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.ErrorContains(t, m.SetKVOptions(c.o), c.want)
		})
	}
	require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 1 << 16}))
	_, err := m.Logits([]int32{1, 2}, Options{})
	assert.NoError(t, err)
}

// TestCacheLenPastItsBlocks: a cache whose Len claims positions it has no
// blocks for (Len is exported) ends its request with an error instead of
// panicking on the block table or reading unwritten positions.
func TestCacheLenPastItsBlocks(t *testing.T) {
	m := openTiny(t, inferBackends(t)[1].b)
	require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 2}))
	for _, n := range []int{1, 3} {
		s := NewSequence(0, 1, 2, 3, 4)
		s.Cache.Len = n
		out, err := m.Generate(t.Context(), []Request{{Seq: s, MaxNewTokens: 2}}, BatchOptions{})
		require.Error(t, err, "Len %d", n)
		assert.ErrorContains(t, out[0].Err, "holds blocks for only 0")
		assert.Empty(t, out[0].Tokens)
	}
	assert.Zero(t, m.KVStats().InUse)
}
