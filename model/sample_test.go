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

// TestSampledLogProbsAgreeWithTraining is the log-prob agreement check:
// sampling at temperature T reports, per token, the log-prob under the
// distribution it drew from (LogProbs) and under the temperature-scaled
// full distribution (FullLogProbs).
//
//   - Without filters (top-k 0, top-p 1, min-p 0) both equal Trainable's
//     log-probs at the same temperature. Tolerance: invAtol/invRtol (2e-5 +
//     1e-4·|x|), the float32 op-order difference between the KV-cache
//     decode forward and the batched training forward that
//     TestCacheDecodeEqualsFullForward allows, plus SampleFullLogProb's 2e-5
//     (a backend may take the full log-prob in float32 as training does).
//   - With top-k/top-p on, FullLogProbs still equals Trainable's, and
//     FullLogProbs − LogProbs = log(kept mass) with the kept mass computed
//     here in float64 from the full forward's logits: 1e-4 (the probability
//     sums of two forwards that differ by ~1e-5 per logit).
func TestSampledLogProbsAgreeWithTraining(t *testing.T) {
	const temp = 0.7
	for _, tb := range inferBackends(t) {
		for _, sp := range []kernels.SamplingParams{
			{Temperature: temp},
			{Temperature: temp, TopK: 12},
			{Temperature: temp, TopP: 0.8},
		} {
			t.Run(tb.name, func(t *testing.T) {
				ctx := context.Background()
				m := trLoadTiny(t, tb.b, true)
				V := m.Config.VocabSize
				rng := rand.New(rand.NewPCG(3, 9))
				var reqs []Request
				var prompts [][]int32
				for i, n := range []int{4, 9, 6} {
					p := randomTokens(rng, n, V)
					prompts = append(prompts, p)
					reqs = append(reqs, Request{Seq: NewSequence(uint64(10+i), p...), MaxNewTokens: 12, Sampling: sp})
				}
				out, err := m.Generate(ctx, reqs, BatchOptions{})
				require.NoError(t, err)

				tr, err := NewTrainable(m, TrainOptions{Temperature: temp})
				require.NoError(t, err)
				seqs := make([]TrainSeq, len(reqs))
				for i, r := range reqs {
					seqs[i] = TrainSeq{IDs: r.Seq.Tokens, Start: len(prompts[i])}
				}
				train, _, err := tr.LogProbs(ctx, seqs, true)
				require.NoError(t, err)
				filtered := sp.TopK > 0 || (sp.TopP > 0 && sp.TopP < 1)
				minLogKept := 0.0
				for i, c := range out {
					require.Len(t, c.FullLogProbs, len(c.Tokens))
					require.Len(t, train[i], len(c.Tokens))
					assertClose32(t, c.FullLogProbs, train[i], invAtol+2e-5, invRtol, "full vs Trainable")
					if !filtered {
						assertClose32(t, c.LogProbs, train[i], invAtol+2e-5, invRtol, "sampled vs Trainable")
						continue
					}
					logits, err := m.Logits(seqs[i].IDs, Options{})
					require.NoError(t, err)
					for j := range c.Tokens {
						pos := seqs[i].Start + j - 1 // the row that predicts token Start+j
						kept := keptMass(logits[pos*V:(pos+1)*V], sp)
						minLogKept = min(minLogKept, math.Log(kept))
						assert.InDelta(t, math.Log(kept), float64(c.FullLogProbs[j]-c.LogProbs[j]), 1e-4, "seq %d token %d", i, j)
						assert.LessOrEqual(t, c.FullLogProbs[j], c.LogProbs[j], "filtering raises the drawn token's log-prob")
					}
				}
				if filtered {
					assert.Less(t, minLogKept, -0.05, "the filters removed some mass (the check is not vacuous)")
				}
			})
		}
	}
}

// keptMass is the probability mass, under softmax(row/T), of the tokens
// that top-k then top-p keep (Hugging Face's order; ties resolved by index
// as the samplers do), in float64.
func keptMass(row []float32, sp kernels.SamplingParams) float64 {
	z := make([]float64, len(row))
	mx := math.Inf(-1)
	for i, l := range row {
		z[i] = float64(l) / float64(sp.Temperature)
		mx = math.Max(mx, z[i])
	}
	idx := make([]int, len(row))
	var s float64
	for i := range z {
		idx[i] = i
		s += math.Exp(z[i] - mx)
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case z[a] > z[b]:
			return -1
		case z[a] < z[b]:
			return 1
		}
		return 0
	})
	keep := idx
	if sp.TopK > 0 && sp.TopK < len(keep) {
		kth := z[keep[sp.TopK-1]]
		n := sp.TopK
		for n < len(keep) && z[keep[n]] == kth {
			n++
		}
		keep = keep[:n]
	}
	var ks float64
	for _, i := range keep {
		ks += math.Exp(z[i] - mx)
	}
	if sp.TopP > 0 && sp.TopP < 1 {
		var cum, mass float64
		for _, i := range keep {
			if cum >= float64(sp.TopP) {
				break
			}
			p := math.Exp(z[i]-mx) / ks
			cum += p
			mass += math.Exp(z[i] - mx)
		}
		ks = mass
	}
	return ks / s
}

// TestGreedyFullLogProbs: greedy sampling reports log-prob 0 and
// the full log-prob at temperature 1 (what Trainable with Temperature 0
// computes).
func TestGreedyFullLogProbs(t *testing.T) {
	ctx := context.Background()
	for _, tb := range inferBackends(t) {
		t.Run(tb.name, func(t *testing.T) {
			m := trLoadTiny(t, tb.b, true)
			prompt := randomTokens(rand.New(rand.NewPCG(5, 5)), 6, m.Config.VocabSize)
			seq := NewSequence(1, prompt...)
			out, err := m.Generate(ctx, []Request{{Seq: seq, MaxNewTokens: 8}}, BatchOptions{})
			require.NoError(t, err)
			tr, err := NewTrainable(m, TrainOptions{})
			require.NoError(t, err)
			train, _, err := tr.LogProbs(ctx, []TrainSeq{{IDs: seq.Tokens, Start: len(prompt)}}, true)
			require.NoError(t, err)
			assert.Equal(t, make([]float32, len(out[0].Tokens)), out[0].LogProbs)
			assertClose32(t, out[0].FullLogProbs, train[0], invAtol+2e-5, invRtol, "greedy full vs Trainable")
		})
	}
}
