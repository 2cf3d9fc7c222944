//go:build cuda

package grpo

// The trainer on a GPU (kernels/cuda's Device): backend_run_test.go's
// harness against kernels/cpu, and the Qwen3-0.6B 64 × 512 LoRA step's
// memory by phase. scripts/gpu-check.sh's grpo stage runs these from the
// `go test -c -tags cuda` binary of this package.

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cuda"
)

func newGPU(t *testing.T) kernels.Backend {
	d, err := cuda.NewDevice(0)
	require.NoError(t, err, "opening GPU 0")
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// TestGRPOGPUvsCPU: a short GRPO run (LoRA with the KL reference pass,
// and full weights) on the GPU equals the same run on kernels/cpu (see
// backendGRPOVsCPU: the same completions and rewards, losses within
// ModelLogProbs, parameters within GRPORunParams, the sampled log-probs
// within samplingLogpBound of the training forward's).
func TestGRPOGPUvsCPU(t *testing.T) {
	t.Run("lora", func(t *testing.T) { backendGRPOVsCPU(t, newGPU, false) })
	t.Run("full", func(t *testing.T) { backendGRPOVsCPU(t, newGPU, true) })
}

// TestGRPOGPUResume: a checkpoint and a bit-exact resume on the GPU, and
// the saved PEFT adapter on kernels/cpu (backendResume).
func TestGRPOGPUResume(t *testing.T) { backendResume(t, newGPU) }

// TestSFTGPUvsCPU: SFT (LoRA and full) on the GPU equals kernels/cpu's
// and gives every allocation back (backendSFTVsCPU).
func TestSFTGPUvsCPU(t *testing.T) { backendSFTVsCPU(t, newGPU) }

// BenchmarkGRPOStepMemory is the Qwen3-0.6B GRPO step of issue 19 through
// the trainer on the GPU: 8 prompts × 8 rollouts of about 64 prompt and
// exactly 448 new tokens (64 × 512), LoRA r16, bf16 KV cache, micro-batches
// of 8,192 tokens, checkpointed activations. It reports the step's backend
// memory by phase (kerneltest.Counting's Buffer bytes: floor, generation
// peak, KV at its end, learning peak; DESIGN.md, "Memory of a GRPO step",
// derives them) and the seconds of each phase, printing each phase's
// figures as it ends so that a run cut short by the stage's time limit
// still reports generation; beside them the device allocator's own peaks
// (allocated, reserved) and the device memory in use at the end. The
// budget is 40 GiB.
func BenchmarkGRPOStepMemory(b *testing.B) {
	r := stepMemoryRun{shape: "qwen3-0.6b", prompts: 8, g: 8, promptTokens: 64, newTokens: 448,
		lora: 16, microBatchTokens: 8192, kvDType: KVBFloat16}
	d, err := cuda.NewDevice(0)
	require.NoError(b, err)
	defer func() { _ = d.Close() }()
	var s stepMemory
	for range b.N {
		s = runStepMemory(b, d, r, os.Stderr)
	}
	reportStepMemory(b, s)
	ms := d.MemoryStats() // the caching allocator's view: Buffers plus its rounding and cache
	b.ReportMetric(float64(ms.PeakAllocated)/(1<<30), "alloc_peak_GiB")
	b.ReportMetric(float64(ms.PeakReserved)/(1<<30), "reserved_peak_GiB")
	if free, total, err := d.MemInfo(); err == nil {
		b.ReportMetric(float64(total-free)/(1<<30), "device_used_GiB")
	}
	if peak := max(s.genPeak, s.learnPeak); peak > 40<<30 {
		b.Errorf("step peak %s exceeds the 40 GiB budget", gib(peak))
	}
}
