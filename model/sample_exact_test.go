package model

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
	"github.com/x/kernels/ref"
)

// TestSampledLogProbsExact compares, token for token, the full log-prob a
// batch-invariant generation recorded (Completion.FullLogProbs: the decode
// step's logits through SampleRows) with the training forward's
// (Trainable.LogProbs with SetBatchInvariant) for the same sequences,
// with LoRA adapters (B read by MatMul, not Bᵀ) at temperatures 1 and 0.7,
// on a model with head_dim 32 (the AVX-512 attention's tiled path) and a
// 4,096-token vocabulary. They must be the same bits wherever every op of
// the forward is batch-invariant: on ref, and on kernels/cpu where its
// attention says so (kernels.AttentionInvariant: off AVX-512). On AVX-512
// its tiled attention is not, and SetBatchInvariant does not apply there;
// the same backend with ref's attention in place of its own must then be
// exact, which shows that the attention is the only cause left. Elsewhere, and
// on kernels/cpu without SetBatchInvariant (its training MatMul packs and
// reads Bᵀ), they differ within the sampler's bound
// (SampleFullLogProb + ModelLogProbs).
func TestSampledLogProbsExact(t *testing.T) {
	c := cpu.New(2)
	t.Cleanup(c.Close)
	cpuExact := c.AttentionBatchInvariant()
	bound := kerneltest.Tolerance("SampleFullLogProb").ATol + kerneltest.Tolerance("ModelLogProbs").ATol
	for _, tb := range []struct {
		name      string
		b         kernels.Backend
		invariant bool // training in batch-invariant mode
		exact     bool
	}{
		{"ref", ref.Backend{}, true, true},
		{"cpu", c, true, cpuExact},
		{"cpu_ref_attention", refAttention{c}, true, true},
		{"cpu_default_training", c, false, false},
	} {
		for _, temp := range []float32{1, 0.7} {
			t.Run(fmt.Sprintf("%s/T%g", tb.name, temp), func(t *testing.T) {
				got, want := sampledAndTrained(t, tb.b, temp, tb.invariant)
				differ, worst := 0, 0.0
				for i := range want {
					require.Len(t, got[i], len(want[i]))
					for j := range want[i] {
						if got[i][j] != want[i][j] {
							differ++
							worst = math.Max(worst, math.Abs(float64(got[i][j])-float64(want[i][j])))
						}
					}
				}
				t.Logf("%s (%s): %d tokens differ, max %.3g", tb.name, c.SIMD(), differ, worst)
				if tb.exact {
					assert.Zero(t, differ, "sampled vs trained log-probs: bit for bit")
				}
				assert.LessOrEqual(t, worst, bound)
			})
		}
	}
}

// refAttention is kernels/cpu with ref's (batch-invariant) attention.
type refAttention struct{ *cpu.Backend }

func (r refAttention) Attention(a kernels.AttentionBatch, heads, kvHeads, headDim int, scale float32) {
	ref.Backend{}.Attention(a, heads, kvHeads, headDim, scale)
}

// AttentionBatchInvariant: ref's attention is.
func (refAttention) AttentionBatchInvariant() bool { return true }

// sampledAndTrained generates from three prompts with BatchInvariant at
// temperature temp on be and returns the recorded full log-probs and the
// training forward's for the same tokens (in batch-invariant mode when
// invariant is set).
func sampledAndTrained(t *testing.T, be kernels.Backend, temp float32, invariant bool) (sampled, trained [][]float32) {
	t.Helper()
	ctx := context.Background()
	cfg := Config{VocabSize: 4096, HiddenSize: 64, IntermediateSize: 160,
		NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 32,
		RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
		BOSTokenID: -1, MaxPositions: 1024, EOSTokenIDs: []int32{1}}
	dir := t.TempDir()
	require.NoError(t, WriteRandom(dir, cfg, kernels.BF16, 13, RandomOptions{Std: 0.08, NormStd: 0.1}))
	m, err := Load(dir, be)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 4, Alpha: 8}, 1))
	rng := rand.New(rand.NewPCG(3, 9))
	var reqs []Request
	var starts []int
	for i, n := range []int{4, 9, 70} {
		p := randomTokens(rng, n, cfg.VocabSize)
		starts = append(starts, n)
		reqs = append(reqs, Request{Seq: NewSequence(uint64(10+i), p...), MaxNewTokens: 12, Sampling: kernels.SamplingParams{Temperature: temp}})
	}
	out, err := m.Generate(ctx, reqs, BatchOptions{BatchInvariant: true})
	require.NoError(t, err)
	tr, err := NewTrainable(m, TrainOptions{Temperature: temp})
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	tr.SetBatchInvariant(invariant)
	seqs := make([]TrainSeq, len(reqs))
	for i, r := range reqs {
		seqs[i] = TrainSeq{IDs: r.Seq.Tokens, Start: starts[i]}
		sampled = append(sampled, out[i].FullLogProbs)
	}
	trained, _, err = tr.LogProbs(ctx, seqs, true)
	require.NoError(t, err)
	return sampled, trained
}
