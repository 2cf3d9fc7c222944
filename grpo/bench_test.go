package grpo

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// benchShape is the model shape of the benchmarks: "tiny" by default,
// GRPO_BENCH_SHAPE=qwen3-0.6b for the real one (random bf16 weights).
func benchModel(b *testing.B) (*model.Model, *tokenizer.Tokenizer, string) {
	b.Helper()
	return benchModelOf(b, kernels.F32)
}

// benchModelOf is benchModel with the tiny shape's weights stored as
// tinyDType (the real shapes' are bf16).
func benchModelOf(b *testing.B, tinyDType kernels.DType) (*model.Model, *tokenizer.Tokenizer, string) {
	b.Helper()
	shape := os.Getenv("GRPO_BENCH_SHAPE")
	if shape == "" {
		shape = "tiny"
	}
	tok := tokenizer.Tiny()
	cfg, err := model.NamedConfig(shape)
	require.NoError(b, err)
	dtype := kernels.BF16
	if shape == "tiny" {
		dtype = tinyDType
		cfg.VocabSize = tok.VocabSize()
	}
	cfg.EOSTokenIDs = []int32{tok.EOS()}
	dir := b.TempDir()
	require.NoError(b, model.WriteRandom(dir, cfg, dtype, 1, model.RandomOptions{}))
	be := cpu.New(0)
	m, err := model.Load(dir, be)
	require.NoError(b, err)
	b.Cleanup(func() {
		m.Close()
		be.Close()
	})
	return m, tok, shape
}

// BenchmarkRollout compares the trainer's rollout generation (single-turn,
// no environment: the loop's own overhead) with raw model batched
// generation of the same shape (B prompts × T new tokens, EOS disabled so
// both generate exactly T), alternating A/B each iteration.
func BenchmarkRollout(b *testing.B) {
	m, tok, shape := benchModel(b)
	const prompts, g, newTokens = 4, 4, 64
	cfg := benchRolloutConfig(prompts, g, newTokens)
	tr, err := NewTrainer(m, tok, cfg, WithReward("one", 1, constant(1)))
	require.NoError(b, err)
	defer tr.Close()
	tr.eng.stop = nil // never stop early: every rollout generates newTokens
	rows := benchPromptRows(prompts)
	ctx := context.Background()
	var trainerTime, rawTime time.Duration
	var tokens int
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		gen, err := tr.generate(ctx, rows, g, tr.sampling(), uint64(i))
		require.NoError(b, err)
		trainerTime += time.Since(t0)
		n := 0
		for _, r := range gen.rollouts {
			n += len(r.CompletionIDs)
		}
		require.Equal(b, prompts*g*newTokens, n)
		tokens += n
		gen.release()

		reqs := make([]model.Request, 0, prompts*g)
		for _, r := range gen.rollouts {
			reqs = append(reqs, model.Request{Seq: model.NewSequence(uint64(len(reqs)), r.PromptIDs...), MaxNewTokens: newTokens,
				Sampling: kernels.SamplingParams{Temperature: 1}})
		}
		t0 = time.Now()
		_, err = m.Generate(ctx, reqs, model.BatchOptions{MaxBatch: len(reqs)})
		require.NoError(b, err)
		rawTime += time.Since(t0)
	}
	b.ReportMetric(float64(tokens)/trainerTime.Seconds(), "trainer-tok/s")
	b.ReportMetric(float64(tokens)/rawTime.Seconds(), "model-tok/s")
	b.ReportMetric(0, "ns/op")
	b.Logf("shape %s: %d rollouts × %d tokens", shape, prompts*g, newTokens)
}

// BenchmarkStep times whole GRPO steps (one generation, one optimizer
// step) on a two-turn tool env and reports each phase and the trainer's
// own overhead: step time minus generation, tools, scoring, backward and
// optimizer. GRPO_BENCH_PROMPTS (4), GRPO_BENCH_G (4) and
// GRPO_BENCH_COMPLETION (MaxCompletionLength, 128) size the step, so the
// 0.6B shape can run a step that fits a small machine's time.
func BenchmarkStep(b *testing.B) {
	m, tok, shape := benchModel(b)
	prompts, g := benchEnvInt(b, "GRPO_BENCH_PROMPTS", 4), benchEnvInt(b, "GRPO_BENCH_G", 4)
	cfg := DefaultConfig()
	cfg.NumGenerations = g
	cfg.PerDeviceTrainBatchSize = prompts * g
	cfg.MaxCompletionLength = benchEnvInt(b, "GRPO_BENCH_COMPLETION", 128)
	cfg.MaxToolCallingIterations = 1
	cfg.MaxSteps = b.N
	cfg.LRSchedule = model.ScheduleConstant
	cfg.EnableThinking = tokenizer.ThinkingOff
	tr, err := NewTrainer(m, tok, cfg, WithEnv(counters()), WithReward("len", 1, func(_ context.Context, r *Rollout) (float64, error) {
		return float64(r.ModelTokens() % 7), nil
	}), WithLoRA(model.LoRAConfig{R: 8, Alpha: 16}))
	require.NoError(b, err)
	defer tr.Close()
	rows := make([]env.Row, prompts)
	for i := range rows {
		rows[i] = env.Row{"prompt": fmt.Sprintf("Count to %d: ", i)}
	}
	phases := []string{MetricTimeGeneration, MetricTimeTools, MetricTimeScoring, MetricTimeBackward, MetricTimeOptimizer}
	sum := map[string]float64{}
	var stepTime float64
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		rep, err := tr.Step(ctx, rows)
		require.NoError(b, err)
		for _, mt := range rep.Metrics {
			stepTime += mt[MetricStepTime]
			for _, p := range phases {
				sum[p] += mt[p]
			}
		}
	}
	overhead := stepTime
	for _, p := range phases {
		b.ReportMetric(sum[p]/float64(b.N), p+"-s")
		overhead -= sum[p]
	}
	b.ReportMetric(stepTime/float64(b.N), "step-s")
	b.ReportMetric(100*overhead/stepTime, "overhead-%")
	b.Logf("shape %s: %d rollouts (%d prompts × %d), completions ≤ %d tokens, LoRA r=8", shape, prompts*g, prompts, g, cfg.MaxCompletionLength)
}

// BenchmarkRolloutPrecision times the trainer's rollout generation
// (single-turn, no environment, LoRA on bf16 weights) with
// RolloutMatMulPrecision's two settings, alternating exact and bf16 each
// iteration on one trainer, and reports each one's tokens per second and
// bf16's speed-up. GRPO_BENCH_PROMPTS (4), GRPO_BENCH_G (4) and
// GRPO_BENCH_COMPLETION (64 new tokens) size the batch.
func BenchmarkRolloutPrecision(b *testing.B) {
	m, tok, shape := benchModelOf(b, kernels.BF16)
	prompts, g := benchEnvInt(b, "GRPO_BENCH_PROMPTS", 4), benchEnvInt(b, "GRPO_BENCH_G", 4)
	newTokens := benchEnvInt(b, "GRPO_BENCH_COMPLETION", 64)
	cfg := benchRolloutConfig(prompts, g, newTokens)
	cfg.RolloutMatMulPrecision = RolloutBF16
	tr, err := NewTrainer(m, tok, cfg, WithReward("one", 1, constant(1)), WithLoRA(model.LoRAConfig{R: 8, Alpha: 16}))
	require.NoError(b, err)
	defer tr.Close()
	tr.eng.stop = nil // never stop early: every rollout generates newTokens
	rows := benchPromptRows(prompts)
	ctx := context.Background()
	precs := []kernels.MatMulPrecision{kernels.MatMulExact, kernels.MatMulBF16}
	elapsed := make([]time.Duration, len(precs))
	b.ResetTimer()
	for i := range b.N {
		for k, p := range precs {
			tr.pol.rollout = p
			t0 := time.Now()
			gen, err := tr.generate(ctx, rows, g, tr.sampling(), uint64(i))
			require.NoError(b, err)
			elapsed[k] += time.Since(t0)
			gen.release()
		}
	}
	tokens := float64(b.N * prompts * g * newTokens)
	for k, p := range precs {
		b.ReportMetric(tokens/elapsed[k].Seconds(), p.String()+"-tok/s")
	}
	b.ReportMetric(elapsed[0].Seconds()/elapsed[1].Seconds(), "bf16-speedup")
	b.ReportMetric(0, "ns/op")
	b.Logf("shape %s: %d rollouts × %d tokens, %s", shape, prompts*g, newTokens, m.Backend.(*cpu.Backend).SIMD())
}

// benchRolloutConfig is the rollout benchmarks' config: one step of
// prompts × g single-turn rollouts of up to newTokens, thinking off.
func benchRolloutConfig(prompts, g, newTokens int) Config {
	cfg := DefaultConfig()
	cfg.NumGenerations = g
	cfg.PerDeviceTrainBatchSize = prompts * g
	cfg.MaxCompletionLength = newTokens
	cfg.MaxSteps = 1
	cfg.EnableThinking = tokenizer.ThinkingOff
	return cfg
}

// benchPromptRows is n distinct one-line prompts.
func benchPromptRows(n int) []env.Row {
	rows := make([]env.Row, n)
	for i := range rows {
		rows[i] = env.Row{"prompt": fmt.Sprintf("Tell me about the number %d.", i)}
	}
	return rows
}
