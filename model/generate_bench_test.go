package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
)

// benchModel writes and loads a random checkpoint of a named shape on the
// CPU backend.
func benchModel(b *testing.B, shape string, dtype kernels.DType) *Model {
	b.Helper()
	cfg, err := NamedConfig(shape)
	require.NoError(b, err)
	dir := b.TempDir()
	require.NoError(b, WriteRandom(dir, cfg, dtype, 1, RandomOptions{}))
	be := cpu.New(0)
	b.Cleanup(be.Close)
	m, err := Load(dir, be)
	require.NoError(b, err)
	b.Cleanup(func() { m.Close() })
	return m
}

// BenchmarkPrefill feeds 128 tokens to an empty cache (tiny shape; the
// 0.6B figures come from cmd/bench, see benchmarks/model.md).
func BenchmarkPrefill(b *testing.B) {
	for _, dt := range []kernels.DType{kernels.BF16, kernels.F32} {
		b.Run("tiny_"+dt.String()+"_p128", func(b *testing.B) {
			m := benchModel(b, "tiny", dt)
			r := m.NewRunner()
			toks := make([]int32, 128)
			rng := rand.New(rand.NewPCG(1, 1))
			for i := range toks {
				toks[i] = int32(rng.IntN(m.Config.VocabSize))
			}
			var c KVCache
			b.ResetTimer()
			for range b.N {
				c.Reset()
				h := r.Forward([]*KVCache{&c}, [][]int32{toks})
				r.Logits(h[127*m.Config.HiddenSize:], 1)
			}
			b.ReportMetric(float64(b.N*len(toks))/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkDecode runs greedy batched decode steps (one token per sequence
// per step, sampling included) on the tiny shape, at depths 1..64 like
// llama-bench's tg64: every 64 steps the sequences restart (untimed).
func BenchmarkDecode(b *testing.B) {
	for _, batch := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("tiny_BF16_B%d", batch), func(b *testing.B) {
			benchDecodeBatch(b, BatchOptions{MaxBatch: batch})
		})
	}
}

// benchDecodeBatch times decode steps of opts.MaxBatch sequences on the
// tiny bf16 model, sampling included, at depths 1..64: every 64 steps the
// sequences restart (untimed).
func benchDecodeBatch(b *testing.B, opts BatchOptions) {
	batch := opts.MaxBatch
	m := benchModel(b, "tiny", kernels.BF16)
	bt := m.NewBatch(opts)
	start := func() {
		for i := range batch {
			_, err := bt.Add(Request{Seq: NewSequence(uint64(i), int32(i+1)), MaxNewTokens: 65})
			require.NoError(b, err)
		}
		_, err := bt.Step(b.Context())
		require.NoError(b, err)
	}
	start()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if bt.Len() == 0 {
			b.StopTimer()
			start()
			b.StartTimer()
		}
		if _, err := bt.Step(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tok/s")
}
