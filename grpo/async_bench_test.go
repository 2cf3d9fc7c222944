package grpo

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/x/env/envtest"
)

// BenchmarkAsyncStep compares the wall time per optimizer step of Train
// on a tool-heavy fake environment (envtest.Slow: every rollout calls a
// tool that takes GRPO_ASYNC_DELAY, 400 ms by default, twice) between the
// synchronous trainer (staleness 0) and the asynchronous one at
// staleness 1 (each generation played while the previous one trains),
// the two run alternately in every iteration (a fresh trainer each, 4
// optimizer steps of 8 rollouts on the tiny model with LoRA, scripted
// generation so that the model's work is the training passes). It
// reports ms/step of each and their ratio.
func BenchmarkAsyncStep(b *testing.B) {
	const steps = 4
	delay := 400 * time.Millisecond
	if v := os.Getenv("GRPO_ASYNC_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(b, err, "GRPO_ASYNC_DELAY")
		delay = d
	}
	var took [2]time.Duration
	b.ResetTimer()
	for range b.N {
		for i, s := range []int{0, 1} {
			b.StopTimer()
			tr := slowToolTrainer(b, &envtest.Gauge{}, delay, func(c *Config) { c.MaxSteps, c.MaxStaleness = steps, s })
			b.StartTimer()
			t0 := time.Now()
			require.NoError(b, tr.Train(context.Background(), nil))
			took[i] += time.Since(t0)
			require.Equal(b, steps, tr.State().GlobalStep)
		}
	}
	perStep := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N*steps) }
	b.ReportMetric(perStep(took[0]), "sync-ms/step")
	b.ReportMetric(perStep(took[1]), "async-ms/step")
	b.ReportMetric(float64(took[0])/float64(took[1]), "speedup")
	b.ReportMetric(0, "ns/op")
}
