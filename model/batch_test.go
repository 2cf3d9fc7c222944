package model

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// sampledRun generates for the prompts listed in order (seeded by their
// index) and returns the completions indexed like prompts.
func sampledRun(t *testing.T, m *Model, prompts [][]int32, maxNew []int, order []int, opts BatchOptions, p kernels.SamplingParams) []Completion {
	t.Helper()
	reqs := make([]Request, len(order))
	for k, i := range order {
		reqs[k] = Request{Seq: NewSequence(uint64(100+i), prompts[i]...), MaxNewTokens: maxNew[i], Sampling: p}
	}
	out, err := m.Generate(t.Context(), reqs, opts)
	require.NoError(t, err)
	res := make([]Completion, len(prompts))
	for k, i := range order {
		res[i] = out[k]
	}
	return res
}

func TestSamplingReproducibleAcrossBatchLayouts(t *testing.T) {
	params := []kernels.SamplingParams{
		{Temperature: 1},
		{Temperature: 0.7, TopK: 20, TopP: 0.9},
		{Temperature: 1.3, MinP: 0.05},
	}
	for _, tb := range inferBackends(t) {
		sc := shapeCases()[1]
		t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
			m := randomModel(t, sc, tb.b)
			rng := rand.New(rand.NewPCG(11, 12))
			lens := []int{3, 9, 1, 6, 12, 2}
			maxNew := []int{8, 3, 10, 1, 6, 9}
			var prompts [][]int32
			for _, n := range lens {
				prompts = append(prompts, randomTokens(rng, n, m.Config.VocabSize))
			}
			for _, p := range params {
				// Alone, one at a time: the specification.
				alone := make([]Completion, len(prompts))
				for i := range prompts {
					alone[i] = sampledRun(t, m, prompts, maxNew, []int{i}, BatchOptions{}, p)[i]
				}
				layouts := []struct {
					name  string
					order []int
					opts  BatchOptions
				}{
					{"all_at_once", []int{0, 1, 2, 3, 4, 5}, BatchOptions{}},
					{"reversed_slots2", []int{5, 4, 3, 2, 1, 0}, BatchOptions{MaxBatch: 2}},
					{"slots3_prefill_chunks_of_4", []int{2, 0, 4, 1, 5, 3}, BatchOptions{MaxBatch: 3, PrefillTokens: 4}},
				}
				for _, l := range layouts {
					got := sampledRun(t, m, prompts, maxNew, l.order, l.opts, p)
					for i := range prompts {
						assert.Equal(t, alone[i].Tokens, got[i].Tokens, "%s %+v seq %d tokens", l.name, p, i)
						assertClose32(t, got[i].LogProbs, alone[i].LogProbs, invAtol, invRtol, l.name+" logprobs")
						assert.Len(t, got[i].Tokens, maxNew[i])
					}
				}
			}
		})
	}
}

func TestSampledLogProbsEqualTeacherForced(t *testing.T) {
	for _, tb := range inferBackends(t) {
		sc := shapeCases()[0]
		t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
			m := randomModel(t, sc, tb.b)
			prompt := randomTokens(rand.New(rand.NewPCG(1, 1)), 5, m.Config.VocabSize)
			seq := NewSequence(42, prompt...)
			out, err := m.Generate(t.Context(), []Request{{Seq: seq, MaxNewTokens: 12, Sampling: kernels.SamplingParams{Temperature: 1}}}, BatchOptions{})
			require.NoError(t, err)
			res, err := m.LogProbs(t.Context(), []Scored{{Tokens: seq.Tokens}}, LogProbsOptions{})
			require.NoError(t, err)
			// At temperature 1 without filters the sampling distribution is
			// the model's, so the sampler's log-probs are the teacher-forced ones.
			assertClose32(t, out[0].LogProbs, res[0].LogProbs[len(prompt):], invAtol, invRtol, "sampled vs teacher-forced")
		})
	}
}

func TestMultiTurnAppendEqualsFreshSequence(t *testing.T) {
	for _, tb := range inferBackends(t) {
		sc := shapeCases()[1]
		t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
			m := randomModel(t, sc, tb.b)
			V := m.Config.VocabSize
			rng := rand.New(rand.NewPCG(2, 3))
			seq := NewSequence(9, randomTokens(rng, 6, V)...)
			_, err := m.Generate(t.Context(), []Request{{Seq: seq, MaxNewTokens: 4}}, BatchOptions{})
			require.NoError(t, err)
			cachedBefore := seq.Cache.Len
			require.Equal(t, len(seq.Tokens)-1, cachedBefore, "all but the last sampled token are cached")

			tool := randomTokens(rng, 5, V)
			seq.Append(tool...)
			require.Len(t, seq.Pending(), 6)
			turn2, err := m.Generate(t.Context(), []Request{{Seq: seq, MaxNewTokens: 5}}, BatchOptions{})
			require.NoError(t, err)
			assert.GreaterOrEqual(t, seq.Cache.Len, cachedBefore+6, "the prefix is not recomputed, only extended")

			// The same tokens from scratch give the same greedy continuation.
			n := len(seq.Tokens) - len(turn2[0].Tokens)
			fresh := NewSequence(0, seq.Tokens[:n]...)
			again, err := m.Generate(t.Context(), []Request{{Seq: fresh, MaxNewTokens: 5}}, BatchOptions{})
			require.NoError(t, err)
			assert.Equal(t, again[0].Tokens, turn2[0].Tokens)
		})
	}
}

func TestStopTokensAndContinuousBatching(t *testing.T) {
	for _, tb := range inferBackends(t) {
		sc := shapeCases()[2]
		t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
			m := randomModel(t, sc, tb.b)
			V := m.Config.VocabSize
			rng := rand.New(rand.NewPCG(4, 4))
			p := kernels.SamplingParams{Temperature: 1}
			// Find what each sequence samples unconstrained, then stop on
			// its third token: it must end there, Stopped, token kept.
			var reqs []Request
			var wantLen []int
			for i := range 5 {
				prompt := randomTokens(rng, 2+i, V)
				free, err := m.Generate(t.Context(), []Request{{Seq: NewSequence(uint64(i), prompt...), MaxNewTokens: 8, Sampling: p}}, BatchOptions{})
				require.NoError(t, err)
				toks := free[0].Tokens
				stop := toks[2]
				wantLen = append(wantLen, slices.Index(toks, stop)+1)
				reqs = append(reqs, Request{Seq: NewSequence(uint64(i), prompt...), MaxNewTokens: 8, Sampling: p, Stop: []int32{stop}})
			}
			b := m.NewBatch(BatchOptions{MaxBatch: 2})
			for _, r := range reqs {
				_, err := b.Add(r)
				require.NoError(t, err)
			}
			got := map[int]Completion{}
			steps := 0
			for b.Len() > 0 {
				done, err := b.Step(t.Context())
				require.NoError(t, err)
				assert.LessOrEqual(t, len(b.active), 2, "at most MaxBatch sequences run")
				for _, f := range done {
					got[f.ID] = f.Completion
				}
				steps++
				require.Less(t, steps, 100)
			}
			require.Len(t, got, len(reqs))
			for i, c := range got {
				assert.True(t, c.Stopped, "request %d stopped", i)
				assert.Len(t, c.Tokens, wantLen[i])
				assert.Equal(t, reqs[i].Stop[0], c.Tokens[len(c.Tokens)-1])
			}

			// A new request joins a running batch between steps.
			b2 := m.NewBatch(BatchOptions{MaxBatch: 4})
			first := Request{Seq: NewSequence(1, 1, 2, 3), MaxNewTokens: 6, Sampling: p}
			_, err := b2.Add(first)
			require.NoError(t, err)
			_, err = b2.Step(t.Context())
			require.NoError(t, err)
			late := Request{Seq: NewSequence(2, 4, 5), MaxNewTokens: 3, Sampling: p}
			lateID, err := b2.Add(late)
			require.NoError(t, err)
			var lateDone Completion
			for b2.Len() > 0 {
				done, err := b2.Step(t.Context())
				require.NoError(t, err)
				for _, f := range done {
					if f.ID == lateID {
						lateDone = f.Completion
					}
				}
			}
			alone, err := m.Generate(t.Context(), []Request{{Seq: NewSequence(2, 4, 5), MaxNewTokens: 3, Sampling: p}}, BatchOptions{})
			require.NoError(t, err)
			assert.Equal(t, alone[0].Tokens, lateDone.Tokens)
		})
	}
}

func TestGenerateRejectsBadRequests(t *testing.T) {
	m := openTiny(t, inferBackends(t)[0].b)
	seq := NewSequence(0, 1, 2)
	cases := []struct {
		name string
		reqs []Request
	}{
		{"nil_sequence", []Request{{MaxNewTokens: 1}}},
		{"empty_sequence", []Request{{Seq: NewSequence(0), MaxNewTokens: 1}}},
		{"token_out_of_vocab", []Request{{Seq: NewSequence(0, 1, 512), MaxNewTokens: 1}}},
		{"negative_token", []Request{{Seq: NewSequence(0, -1), MaxNewTokens: 1}}},
		{"stop_out_of_vocab", []Request{{Seq: NewSequence(0, 1), MaxNewTokens: 1, Stop: []int32{9999}}}},
		{"negative_max_new", []Request{{Seq: NewSequence(0, 1), MaxNewTokens: -1}}},
		{"negative_temperature", []Request{{Seq: NewSequence(0, 1), MaxNewTokens: 1, Sampling: kernels.SamplingParams{Temperature: -1}}}},
		{"top_p_above_one", []Request{{Seq: NewSequence(0, 1), MaxNewTokens: 1, Sampling: kernels.SamplingParams{Temperature: 1, TopP: 2}}}},
		{"same_sequence_twice", []Request{{Seq: seq, MaxNewTokens: 1}, {Seq: seq, MaxNewTokens: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := m.Generate(t.Context(), c.reqs, BatchOptions{})
			assert.Error(t, err)
		})
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := m.Generate(ctx, []Request{{Seq: NewSequence(0, 1), MaxNewTokens: 3}}, BatchOptions{})
	assert.ErrorIs(t, err, context.Canceled)

	out, err := m.Generate(t.Context(), []Request{{Seq: NewSequence(0, 1), MaxNewTokens: 0}}, BatchOptions{})
	require.NoError(t, err)
	assert.Empty(t, out[0].Tokens)

	// Non-finite weights give an error, not a sampler panic.
	for i := range m.Norm {
		m.Norm[i] = float32(math.NaN())
	}
	_, err = m.Generate(t.Context(), []Request{{Seq: NewSequence(0, 1), MaxNewTokens: 2, Sampling: kernels.SamplingParams{Temperature: 1}}}, BatchOptions{})
	assert.ErrorContains(t, err, "no finite logit")
}

func TestPrefillAndForkShareAPrompt(t *testing.T) {
	for _, tb := range inferBackends(t) {
		sc := shapeCases()[0]
		t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
			m := randomModel(t, sc, tb.b)
			prompt := randomTokens(rand.New(rand.NewPCG(6, 6)), 9, m.Config.VocabSize)
			p := kernels.SamplingParams{Temperature: 1, TopK: 30}
			root := NewSequence(0, prompt...)
			require.NoError(t, m.Prefill(t.Context(), []*Sequence{root}, BatchOptions{PrefillTokens: 4}))
			require.Equal(t, len(prompt), root.Cache.Len)
			var forked, fresh []Request
			for g := range 4 {
				forked = append(forked, Request{Seq: root.Fork(uint64(g)), MaxNewTokens: 6, Sampling: p})
				fresh = append(fresh, Request{Seq: NewSequence(uint64(g), prompt...), MaxNewTokens: 6, Sampling: p})
			}
			a, err := m.Generate(t.Context(), forked, BatchOptions{})
			require.NoError(t, err)
			b, err := m.Generate(t.Context(), fresh, BatchOptions{})
			require.NoError(t, err)
			for g := range a {
				assert.Equal(t, b[g].Tokens, a[g].Tokens, "fork %d", g)
				assertClose32(t, a[g].LogProbs, b[g].LogProbs, invAtol, invRtol, "fork logprobs")
			}
			assert.Equal(t, prompt, root.Tokens, "forks do not touch the root")
			assert.Equal(t, len(prompt), root.Cache.Len)
			assert.Error(t, m.Prefill(t.Context(), []*Sequence{NewSequence(0, 1, -4)}, BatchOptions{}))
			// The same sequence twice would be fed twice into one cache.
			twice := NewSequence(0, prompt...)
			assert.ErrorContains(t, m.Prefill(t.Context(), []*Sequence{twice, twice}, BatchOptions{}), "same sequence")
			assert.Zero(t, twice.Cache.Len)
		})
	}
}

// TestNonFiniteRowEndsOnlyItsRequest: a sequence whose logits are all NaN
// (here: NaN values in its own KV cache) ends with Completion.Err and no
// tokens, while the requests sampled in the same lm_head chunk, before and
// after its row, generate exactly what they generate alone.
func TestNonFiniteRowEndsOnlyItsRequest(t *testing.T) {
	p := kernels.SamplingParams{Temperature: 1, TopK: 20}
	for _, tb := range inferBackends(t) {
		t.Run(tb.name, func(t *testing.T) {
			m := openTiny(t, tb.b)
			prompts := [][]int32{{5, 6, 7}, {8, 9, 10, 11}, {12, 13}, {14}}
			const bad = 1
			alone := make([]Completion, len(prompts))
			for i, pr := range prompts {
				if i != bad {
					out, err := m.Generate(t.Context(), []Request{{Seq: NewSequence(uint64(i), pr...), MaxNewTokens: 5, Sampling: p}}, BatchOptions{})
					require.NoError(t, err)
					alone[i] = out[0]
				}
			}
			poisoned := NewSequence(bad, prompts[bad]...)
			require.NoError(t, m.Prefill(t.Context(), []*Sequence{poisoned}, BatchOptions{}))
			for _, id := range poisoned.Cache.st.own.ids {
				v := poisoned.Cache.st.own.pool.layerRows(id, 0, true).F32()
				for j := range v {
					v[j] = float32(math.NaN())
				}
			}
			var reqs []Request
			for i, pr := range prompts {
				s := NewSequence(uint64(i), pr...)
				if i == bad {
					s = poisoned
				}
				reqs = append(reqs, Request{Seq: s, MaxNewTokens: 5, Sampling: p})
			}
			out, err := m.Generate(t.Context(), reqs, BatchOptions{})
			require.Error(t, err)
			assert.ErrorContains(t, err, "request 1")
			assert.ErrorContains(t, out[bad].Err, "no finite logit")
			assert.Empty(t, out[bad].Tokens)
			for i := range prompts {
				if i == bad {
					continue
				}
				assert.NoError(t, out[i].Err, "request %d", i)
				assert.Equal(t, alone[i].Tokens, out[i].Tokens, "request %d tokens", i)
				assertClose32(t, out[i].LogProbs, alone[i].LogProbs, invAtol, invRtol, "log-probs")
				assertClose32(t, out[i].FullLogProbs, alone[i].FullLogProbs, invAtol, invRtol, "full log-probs")
			}
		})
	}
}
