package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
)

// BenchmarkTrainStep times forward+backward (Accumulate) on the tiny shape
// (hidden 128, 4 layers, vocab 4096) with the CPU backend: LoRA r=16 on
// every projection and full fine-tuning, 4 sequences of 256 tokens. The
// 0.6B figures come from cmd/trainbench ("Training throughput" in BENCHMARKS.md).
func BenchmarkTrainStep(b *testing.B) {
	cfg, err := NamedConfig("tiny")
	require.NoError(b, err)
	dir := b.TempDir()
	require.NoError(b, WriteRandom(dir, cfg, kernels.F32, 1, RandomOptions{}))
	be := cpu.New(0)
	defer be.Close()
	for _, tc := range []struct {
		name             string
		full, checkpoint bool
	}{{"lora16", false, false}, {"lora16-checkpoint", false, true}, {"full", true, false}} {
		b.Run(tc.name, func(b *testing.B) {
			m, err := Load(dir, be)
			require.NoError(b, err)
			defer m.Close()
			if !tc.full {
				require.NoError(b, AttachLoRA(m, LoRAConfig{R: 16, Alpha: 32}, 1))
			}
			tr, err := NewTrainable(m, TrainOptions{Full: tc.full, KeepActivations: !tc.checkpoint})
			require.NoError(b, err)
			seqs := trRandomSeqs(rand.New(rand.NewPCG(1, 1)), cfg.VocabSize, 256, 256, 256, 256)
			w := trGradLoss(trRandomWeights(rand.New(rand.NewPCG(2, 2)), seqs))
			ctx := context.Background()
			_, err = tr.Accumulate(ctx, seqs, w)
			require.NoError(b, err)
			b.ResetTimer()
			for b.Loop() {
				_, err = tr.Accumulate(ctx, seqs, w)
				require.NoError(b, err)
			}
			b.ReportMetric(float64(4*256*b.N)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64(tr.ActivationBytes())/(1<<20), "act-MiB")
		})
	}
}

// ExampleLoRATargets lists the projections LoRA can adapt.
func ExampleLoRATargets() {
	fmt.Println(LoRATargets())
	// Output: [q_proj k_proj v_proj o_proj gate_proj up_proj down_proj]
}

// BenchmarkTrainStepInvariant measures what Trainable.SetBatchInvariant
// costs a LoRA r16 step on kernels/cpu (BenchmarkTrainStep's shape and
// batch, activations kept, and with checkpointing): the two modes
// alternate step by step on one Trainable, so a loaded machine's drift
// falls on both alike; it reports each mode's ms per step and their ratio.
// The mode applies only where the attention is batch-invariant: on an
// AVX-512 machine run it with GODEBUG=cpu.avx512f=off.
func BenchmarkTrainStepInvariant(b *testing.B) {
	cfg, err := NamedConfig("tiny")
	require.NoError(b, err)
	dir := b.TempDir()
	require.NoError(b, WriteRandom(dir, cfg, kernels.F32, 1, RandomOptions{}))
	be := cpu.New(0)
	defer be.Close()
	if !be.AttentionBatchInvariant() {
		b.Skipf("SetBatchInvariant does not apply on %s (its attention is not batch-invariant)", be.SIMD())
	}
	for _, checkpoint := range []bool{false, true} {
		b.Run(fmt.Sprintf("checkpoint=%v", checkpoint), func(b *testing.B) {
			m, err := Load(dir, be)
			require.NoError(b, err)
			defer m.Close()
			require.NoError(b, AttachLoRA(m, LoRAConfig{R: 16, Alpha: 32}, 1))
			tr, err := NewTrainable(m, TrainOptions{KeepActivations: !checkpoint})
			require.NoError(b, err)
			seqs := trRandomSeqs(rand.New(rand.NewPCG(1, 1)), cfg.VocabSize, 256, 256, 256, 256)
			w := trGradLoss(trRandomWeights(rand.New(rand.NewPCG(2, 2)), seqs))
			ctx := context.Background()
			var spent [2]time.Duration
			step := func(invariant bool) {
				tr.SetBatchInvariant(invariant)
				t0 := time.Now()
				_, err := tr.Accumulate(ctx, seqs, w)
				require.NoError(b, err)
				spent[b2i(invariant)] += time.Since(t0)
			}
			step(false)
			step(true)
			spent = [2]time.Duration{}
			for i := 0; b.Loop(); i++ { // which mode goes first alternates too
				step(i%2 == 0)
				step(i%2 != 0)
			}
			ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N) }
			b.ReportMetric(ms(spent[0]), "ms/default")
			b.ReportMetric(ms(spent[1]), "ms/invariant")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "invariant/default")
		})
	}
}

// b2i is 1 for true.
func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}
