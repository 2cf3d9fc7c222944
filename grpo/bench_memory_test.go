package grpo

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// BenchmarkPhaseMemory measures the peak resident memory (Linux VmHWM,
// reset after loading the model) of one phase of a GRPO step, so a step
// too long to run whole can be sized from its phases:
//
//   - GRPO_BENCH_PHASE=generate: the trainer's generation of
//     GRPO_BENCH_ROLLOUTS rollouts (default 64, G = 8) of
//     GRPO_BENCH_NEW_TOKENS new tokens (default 8) with a bfloat16 KV cache;
//     a ballast of the KV bytes the rollouts would hold at
//     GRPO_BENCH_CONTEXT tokens each (default 1,024) beyond what they hold,
//     written to and kept live, stands for the rest of the cache, so the
//     Go heap goal is that of the full-length step.
//   - GRPO_BENCH_PHASE=learn: one training micro-step (forward, loss,
//     backward of LoRA r = 8, checkpointed) over GRPO_BENCH_SEQS (default
//     1) sequences of GRPO_BENCH_CONTEXT tokens, with MicroBatchTokens the
//     same, i.e. one group: what a step's every micro-batch repeats.
//
// The shape is GRPO_BENCH_SHAPE (benchModel). Peak and baseline are in
// GiB; the baseline is the RSS after loading, before the phase.
func BenchmarkPhaseMemory(b *testing.B) {
	phase := benchEnvDefault("GRPO_BENCH_PHASE", "generate")
	ctxLen := benchEnvInt(b, "GRPO_BENCH_CONTEXT", 1024)
	m, tok, shape := benchModel(b)
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.NumGenerations = 8
	cfg.EnableThinking = tokenizer.ThinkingOff
	cfg.KVCacheDType = KVBFloat16
	cfg.MaxSteps = 1
	switch phase {
	case "generate":
		rollouts := benchEnvInt(b, "GRPO_BENCH_ROLLOUTS", 64)
		newTokens := benchEnvInt(b, "GRPO_BENCH_NEW_TOKENS", 8)
		cfg.PerDeviceTrainBatchSize = rollouts
		cfg.MaxCompletionLength = newTokens
		tr, err := NewTrainer(m, tok, cfg, WithReward("one", 1, constant(1)), WithLoRA(model.LoRAConfig{R: 8, Alpha: 16}))
		require.NoError(b, err)
		defer tr.Close()
		tr.eng.stop = nil // every rollout generates newTokens
		rows := make([]env.Row, rollouts/cfg.NumGenerations)
		for i := range rows {
			rows[i] = env.Row{"prompt": fmt.Sprintf("Tell me about the number %d.", i)}
		}
		base := resetPeak(b)
		b.ResetTimer()
		for i := range b.N {
			gen, err := tr.generate(ctx, rows, cfg.NumGenerations, tr.sampling(), uint64(i))
			require.NoError(b, err)
			st := m.KVStats()
			tokens := 0
			for _, r := range gen.rollouts {
				tokens += len(r.PromptIDs) + len(r.CompletionIDs)
			}
			// The rest of the full-length cache, live while the rollouts'
			// caches are (here, after the decode: the heap goal it sets
			// then would have applied during the decode).
			full := int64(rollouts) * int64(ctxLen) * int64(st.BytesPerToken)
			ballast := make([]byte, max(full-st.Bytes, 0))
			for j := range ballast {
				ballast[j] = byte(j)
			}
			// A second generation under the full-size live heap.
			gen2, err := tr.generate(ctx, rows, cfg.NumGenerations, tr.sampling(), uint64(i)+1000)
			require.NoError(b, err)
			peakKV := m.KVStats().Bytes
			runtime.KeepAlive(ballast)
			gen.release()
			gen2.release()
			b.ReportMetric(float64(st.Bytes)/(1<<30), "kv-measured-GiB")
			b.ReportMetric(float64(peakKV)/(1<<30), "kv-pool-peak-GiB")
			b.ReportMetric(float64(len(ballast))/(1<<30), "ballast-GiB")
			b.ReportMetric(float64(full)/(1<<30), "kv-full-GiB")
			b.Logf("shape %s: %d rollouts, %d KV tokens measured, %d B/token, full cache %d tokens each", shape, rollouts, tokens, st.BytesPerToken, ctxLen)
		}
		b.ReportMetric(base, "base-GiB")
		b.ReportMetric(peakGiB(b), "peak-GiB")
		freed := m.TrimKV()
		b.ReportMetric(float64(freed)/(1<<30), "trimmed-GiB")
	case "learn":
		seqs := benchEnvInt(b, "GRPO_BENCH_SEQS", 1)
		cfg.PerDeviceTrainBatchSize = 8
		cfg.MicroBatchTokens = seqs * ctxLen
		tr, err := NewTrainer(m, tok, cfg, WithReward("one", 1, constant(1)), WithLoRA(model.LoRAConfig{R: 8, Alpha: 16}))
		require.NoError(b, err)
		defer tr.Close()
		rng := rand.New(rand.NewPCG(1, 2))
		lb := &learnBatch{}
		const prompt = 64
		mb := make([]int, seqs)
		for j := range seqs {
			ids := make([]int32, ctxLen)
			for k := range ids {
				ids[k] = int32(rng.IntN(tok.VocabSize()))
			}
			mask := make([]bool, ctxLen-prompt)
			for k := range mask {
				mask[k] = true
			}
			lb.seqs = append(lb.seqs, trainSeq{ids: ids, start: prompt, mask: mask})
			lb.adv = append(lb.adv, float64(j%3)-1)
			lb.policy = append(lb.policy, make([]float32, len(mask)))
			lb.sampler = lb.policy
			lb.width = max(lb.width, len(mask))
			lb.tokens += len(mask)
			mb[j] = j
		}
		params := cfg.LossParams()
		norm := cfg.LossNorm(lb.tokens, lb.width)
		base := resetPeak(b)
		b.ResetTimer()
		for range b.N {
			acc := newStepAccumulator(params)
			require.NoError(b, tr.microStep(ctx, lb, mb, params, norm, acc, nil))
			tr.pol.zeroGrad()
		}
		b.ReportMetric(base, "base-GiB")
		b.ReportMetric(peakGiB(b), "peak-GiB")
		b.Logf("shape %s: %d sequences × %d tokens, MicroBatchTokens %d", shape, seqs, ctxLen, cfg.MicroBatchTokens)
	default:
		b.Fatalf("GRPO_BENCH_PHASE %q: want generate or learn", phase)
	}
	b.ReportMetric(0, "ns/op")
}

func benchEnvDefault(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func benchEnvInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, "%s", name)
	require.Positive(b, n, "%s", name)
	return n
}

// resetPeak resets the process's peak RSS (Linux clear_refs 5) and returns
// the current RSS in GiB; it skips the benchmark where that is unavailable.
func resetPeak(b *testing.B) float64 {
	b.Helper()
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("peak RSS cannot be reset here: %v", err)
	}
	return procStatusGiB(b, "VmRSS:")
}

// peakGiB is the peak RSS since resetPeak, in GiB.
func peakGiB(b *testing.B) float64 { return procStatusGiB(b, "VmHWM:") }

func procStatusGiB(b *testing.B, key string) float64 {
	b.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			require.NoError(b, err)
			return kb / (1 << 20)
		}
	}
	b.Skipf("no %s in /proc/self/status", key)
	return 0
}
