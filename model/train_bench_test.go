package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

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
