//go:build cuda

package cuda_test

// Profiled steps for the gpu-check's ncu stage: `ncu --profile-from-start
// off` collects only the launches between Device.SetProfiling(true) and
// (false), so each benchmark profiles exactly one step of the random
// Qwen3-0.6B shape, its setup (weight uploads, prefill) left out.

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/model"
)

// BenchmarkProfileDecodeStep: one batched decode step of 64 sequences of
// 16 prompt tokens (the step after the prefill), sampled at temperature 1.
func BenchmarkProfileDecodeStep(b *testing.B) {
	dir, cfg, _ := randomCheckpoint(b, "qwen3-0.6b")
	d := newDevice(b)
	m := load(b, dir, d)
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	for range b.N {
		batch := m.NewBatch(model.BatchOptions{MaxBatch: 64, PrefillTokens: 64 * 16}) // every prompt in the first step
		for i := range 64 {
			_, err := batch.Add(model.Request{Seq: model.NewSequence(uint64(i), randomTokens(rng, 16, cfg.VocabSize)...),
				MaxNewTokens: 8, Sampling: kernels.SamplingParams{Temperature: 1}})
			require.NoError(b, err)
		}
		_, err := batch.Step(ctx) // prefill and the first token
		require.NoError(b, err)
		require.NoError(b, d.SetProfiling(true))
		_, err = batch.Step(ctx)
		require.NoError(b, err)
		require.NoError(b, d.SetProfiling(false))
		batch.Release()
	}
}

// BenchmarkProfileTrainStep: one LoRA r16 training step over 4 sequences
// of 512 tokens (forward with checkpointed activations, the loss,
// backward, AdamW).
func BenchmarkProfileTrainStep(b *testing.B) {
	dir, cfg, _ := randomCheckpoint(b, "qwen3-0.6b")
	d := newDevice(b)
	m := load(b, dir, d)
	require.NoError(b, model.AttachLoRA(m, model.LoRAConfig{R: 16, Alpha: 32}, 1))
	tr, err := model.NewTrainable(m, model.TrainOptions{})
	require.NoError(b, err)
	b.Cleanup(tr.Close)
	opt, err := model.NewAdamW(d, tr.Params(), model.DefaultAdamWConfig(1e-5))
	require.NoError(b, err)
	b.Cleanup(opt.Release)
	rng := rand.New(rand.NewPCG(5, 6))
	seqs := make([]model.TrainSeq, 4)
	for i := range seqs {
		seqs[i] = model.TrainSeq{IDs: randomTokens(rng, 512, cfg.VocabSize), Start: 64}
	}
	ctx := context.Background()
	for range b.N {
		tr.ZeroGrad()
		require.NoError(b, d.SetProfiling(true))
		_, err := tr.Accumulate(ctx, seqs, model.SFTLoss(seqs))
		require.NoError(b, err)
		_, err = opt.Step()
		require.NoError(b, err)
		require.NoError(b, d.SetProfiling(false))
	}
}
