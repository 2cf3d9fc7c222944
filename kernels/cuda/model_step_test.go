//go:build cudahost || cuda

package cuda_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels/cuda"
	"github.com/x/model"
)

// benchDecodeStep times the decode steps of Batches of batch rows on d, one
// Batch of 32 steps per iteration (its prefill step not timed), and
// reports, per step: the wall
// time, the host time (wall minus the time the host spent waiting for the
// device: what issuing a step costs the host, issue 20's ≤ 100 µs goal),
// the launches and the waits. On the host twin the waits include running
// the kernels, so the host time is the Go side's alone: the model, the
// runtime layer and the twin's queueing (a GPU's cuLaunchKernel costs
// microseconds of host time more per launch).
func benchDecodeStep(b *testing.B, d *cuda.Device, m *model.Model, batch int) {
	const round = 32 // decode steps per Batch
	rng := rand.New(rand.NewPCG(8, uint64(batch)))
	var wall time.Duration
	var wait, launches, syncs, steps, rows int64
	for range b.N {
		b.StopTimer()
		bt := m.NewBatch(model.BatchOptions{MaxBatch: batch})
		for i := range batch {
			ids := make([]int32, 16)
			for j := range ids {
				ids[j] = int32(rng.IntN(m.Config.VocabSize))
			}
			_, err := bt.Add(model.Request{Seq: model.NewSequence(uint64(i), ids...), MaxNewTokens: round + 1})
			require.NoError(b, err)
		}
		_, err := bt.Step(b.Context()) // prefill and the first token
		require.NoError(b, err)
		b.StartTimer()
		for range round {
			n := bt.Len()
			if n == 0 {
				break
			}
			c0, t0 := d.Counters(), time.Now()
			_, err := bt.Step(b.Context())
			el, c1 := time.Since(t0), d.Counters()
			require.NoError(b, err)
			wall += el
			wait += c1.WaitNanos - c0.WaitNanos
			launches += c1.Launches - c0.Launches
			syncs += c1.Syncs - c0.Syncs
			steps++
			rows += int64(n)
		}
		b.StopTimer()
		bt.Release()
		b.StartTimer()
	}
	per := func(v int64) float64 { return float64(v) / float64(steps) }
	b.ReportMetric(per(int64(wall))/1e3, "wall_us/step")
	b.ReportMetric(per(int64(wall)-wait)/1e3, "host_us/step")
	b.ReportMetric(per(launches), "launches/step")
	b.ReportMetric(per(syncs), "waits/step")
	b.ReportMetric(per(rows), "rows/step")
	b.ReportMetric(float64(rows)/wall.Seconds(), "tok/s")
}
