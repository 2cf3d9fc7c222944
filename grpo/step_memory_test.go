package grpo

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// stepMemoryRun is one GRPO step sized for a memory measurement.
type stepMemoryRun struct {
	shape            string // model.NamedConfig's name
	prompts, g       int    // prompts per step, rollouts per prompt
	promptTokens     int    // about this many tokens per prompt (a repeated word)
	newTokens        int    // every rollout generates exactly this many
	lora             int    // LoRA rank (0: full fine-tuning)
	microBatchTokens int    // Config.MicroBatchTokens
	kvDType          string // Config.KVCacheDType
}

// String names the run as the benchmark reports it.
func (r stepMemoryRun) String() string {
	return fmt.Sprintf("%s/%dx%d/prompt%d+%d/lora%d/mb%d/kv%s", r.shape, r.prompts, r.g, r.promptTokens, r.newTokens, r.lora, r.microBatchTokens, r.kvDType)
}

// stepMemory is a step's backend memory by phase (bytes, as
// kerneltest.Counting counts them: the Buffers' own sizes).
type stepMemory struct {
	floor, genPeak, kvAtEnd, learnPeak int64
	gen, learn                         time.Duration
}

// runStepMemory writes a random bf16 checkpoint of r.shape (the embedded
// tiny tokenizer's ids are a subset of every shape's vocabulary), loads it
// on be through a phaseMeter (weights imported as copies, as on a device),
// and runs one GRPO step of r. It reports each phase to log as it ends,
// so a step cut short by a time limit still says what it measured.
func runStepMemory(tb testing.TB, be kernels.Backend, r stepMemoryRun, log io.Writer) stepMemory {
	tb.Helper()
	tok := tokenizer.Tiny()
	cfg, err := model.NamedConfig(r.shape)
	require.NoError(tb, err)
	if r.shape == "tiny" {
		cfg.VocabSize = tok.VocabSize()
	}
	cfg.EOSTokenIDs = []int32{tok.EOS()}
	dir := tb.TempDir()
	require.NoError(tb, model.WriteRandom(dir, cfg, kernels.BF16, 1, model.RandomOptions{}))
	meter := &phaseMeter{Counting: &kerneltest.Counting{Backend: be, CopyImports: !isDevice(be)}}
	m, err := model.Load(dir, meter)
	require.NoError(tb, err)
	defer func() { require.NoError(tb, m.Close()) }()

	c := benchRolloutConfig(r.prompts, r.g, r.newTokens)
	c.MicroBatchTokens, c.KVCacheDType = r.microBatchTokens, r.kvDType
	c.Beta = 0 // TRL's default: no reference pass
	var opts []Option
	opts = append(opts, WithReward("one", 1, constant(1)))
	if r.lora > 0 {
		opts = append(opts, WithLoRA(model.LoRAConfig{R: r.lora, Alpha: 2 * float64(r.lora)}))
	}
	tr, err := NewTrainer(m, tok, c, opts...)
	require.NoError(tb, err)
	defer func() { require.NoError(tb, tr.Close()) }()
	tr.eng.stop = nil // every rollout generates newTokens

	rows := make([]env.Row, r.prompts)
	for i := range rows {
		rows[i] = env.Row{"prompt": fmt.Sprintf("%d: %s", i, strings.Repeat(" number", r.promptTokens))}
	}
	var res stepMemory
	dec := tr.eng.decoder
	begin := time.Now()
	tr.eng.decoder = func(s sampling, stop []int32) turnDecoder {
		return meteredDecoder{dec(s, stop), meter, func() {
			res.gen = time.Since(begin)
			fmt.Fprintf(log, "%s: generation %.1f s: floor %s, peak %s, KV at its end %s\n", r, res.gen.Seconds(),
				gib(meter.start[phaseGenerate]), gib(meter.peak[phaseGenerate]), gib(meter.Bytes-meter.start[phaseGenerate]))
		}}
	}
	meter.begin(phaseGenerate)
	_, err = tr.Step(context.Background(), rows)
	require.NoError(tb, err)
	res.learn = time.Since(begin) - res.gen
	res.floor, res.genPeak = meter.start[phaseGenerate], meter.peak[phaseGenerate]
	res.kvAtEnd, res.learnPeak = meter.start[phaseLearn]-res.floor, meter.peak[phaseLearn]
	fmt.Fprintf(log, "%s: learning %.1f s: peak %s; step peak %s above a floor of %s\n", r, res.learn.Seconds(),
		gib(res.learnPeak), gib(max(res.genPeak, res.learnPeak)), gib(res.floor))
	return res
}

// isDevice reports whether be's Alloc returns device memory.
func isDevice(be kernels.Backend) bool {
	b, err := be.Alloc(kernels.F32, 1)
	if err != nil {
		return false
	}
	defer be.Free(b)
	return !b.Host()
}

// gib formats bytes in GiB.
func gib(n int64) string { return fmt.Sprintf("%.3f GiB", float64(n)/(1<<30)) }

// reportStepMemory reports a run's figures as benchmark metrics.
func reportStepMemory(b *testing.B, s stepMemory) {
	g := func(n int64) float64 { return float64(n) / (1 << 30) }
	b.ReportMetric(g(s.floor), "floor_GiB")
	b.ReportMetric(g(s.genPeak), "gen_peak_GiB")
	b.ReportMetric(g(s.kvAtEnd), "kv_GiB")
	b.ReportMetric(g(s.learnPeak), "learn_peak_GiB")
	b.ReportMetric(g(max(s.genPeak, s.learnPeak)), "step_peak_GiB")
	b.ReportMetric(s.gen.Seconds(), "gen_s")
	b.ReportMetric(s.learn.Seconds(), "learn_s")
}

// BenchmarkStepMemory measures a GRPO step's backend memory by phase on
// kernels/cpu (weights imported as copies, so the bytes are a device's
// Buffers): the figures DESIGN.md's memory model for the Qwen3-0.6B
// 64 × 512 step is checked against, at sizes the CPU runs. The run is
// GRPO_MEM_SHAPE (qwen3-0.6b), GRPO_MEM_PROMPTS × GRPO_MEM_G rollouts
// (2 × 2) of GRPO_MEM_PROMPT (32) prompt and GRPO_MEM_NEW (16) new tokens,
// LoRA rank GRPO_MEM_LORA (16), GRPO_MEM_MB micro-batch tokens (8192), KV
// cache GRPO_MEM_KV (bf16).
func BenchmarkStepMemory(b *testing.B) {
	r := stepMemoryRun{
		shape:   benchEnvDefault("GRPO_MEM_SHAPE", "qwen3-0.6b"),
		prompts: benchEnvInt(b, "GRPO_MEM_PROMPTS", 2), g: benchEnvInt(b, "GRPO_MEM_G", 2),
		promptTokens: benchEnvInt(b, "GRPO_MEM_PROMPT", 32), newTokens: benchEnvInt(b, "GRPO_MEM_NEW", 16),
		lora: benchEnvInt(b, "GRPO_MEM_LORA", 16), microBatchTokens: benchEnvInt(b, "GRPO_MEM_MB", 8192),
		kvDType: benchEnvDefault("GRPO_MEM_KV", KVBFloat16),
	}
	be := cpu.New(0)
	defer be.Close()
	var s stepMemory
	for range b.N {
		s = runStepMemory(b, be, r, os.Stderr)
	}
	reportStepMemory(b, s)
}
