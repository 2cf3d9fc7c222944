package grpo

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/model"
)

// TestGenerationBatchInvariant decodes one sequence alone, then beside
// others that join and leave at other steps (what tool timing does to a
// multi-turn batch): with Config.BatchInvariantRollouts its tokens and
// sampling log-probs are the same bit for bit; without, the log-probs
// differ (so the check is not vacuous). This is what made sampling/*
// differ between identical runs (issue 23).
func TestGenerationBatchInvariant(t *testing.T) {
	for _, invariant := range []bool{true, false} {
		m, tok := tinyModel(t, 5)
		cfg := testConfig(2, 1)
		cfg.BatchInvariantRollouts = invariant
		tr, err := NewTrainer(m, tok, cfg, WithEnv(counters()), WithReward("one", 1, constant(1)), WithLoRA(model.LoRAConfig{R: 8, Alpha: 16}))
		require.NoError(t, err)
		defer tr.Close()
		prompt := tok.Encode("A prompt to continue for a while")
		other := tok.Encode("Something else entirely, longer, so that it is still decoding")
		stop := []int32{tok.EOS()}
		smp := sampling{Temperature: 1}

		// decode plays the first sequence to 24 tokens; joins[i] is the
		// step at which another sequence joins (and its length).
		decode := func(joins map[int]int) turn {
			dec := tr.pol.newDecoder(smp, stop)
			defer dec.close()
			a := newSeq(7, slices.Clone(prompt))
			defer a.release()
			id, err := dec.add(genRequest{seq: a, maxTokens: 24})
			require.NoError(t, err)
			var extra []seq
			defer func() {
				for _, s := range extra {
					s.release()
				}
			}()
			for step := 0; ; step++ {
				if n, ok := joins[step]; ok {
					s := newSeq(uint64(100+step), slices.Clone(other))
					extra = append(extra, s)
					_, err := dec.add(genRequest{seq: s, maxTokens: n})
					require.NoError(t, err)
				}
				fin, err := dec.step(context.Background())
				require.NoError(t, err)
				if tu, ok := fin[id]; ok {
					require.NoError(t, tu.err)
					return tu
				}
			}
		}
		alone := decode(nil)
		crowded := decode(map[int]int{0: 5, 2: 30, 3: 1, 9: 4})
		require.Len(t, alone.ids, 24)
		if invariant {
			assert.Equal(t, alone.ids, crowded.ids)
			assert.Equal(t, alone.logprobs, crowded.logprobs, "bit for bit, whoever shared the steps")
		} else {
			assert.NotEqual(t, alone.logprobs, crowded.logprobs, "without the mode the batch shows in the last bits")
		}
	}
}
