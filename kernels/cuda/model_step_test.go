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

// benchDecodeStep times the decode steps of Batches of batch rows on d,
// replayed from graphs and op by op (BatchOptions.NoGraphs), interleaved:
// each iteration runs one Batch of each, in alternating order, so a loaded
// machine slows both alike. A Batch's prefill step and its first two
// decode steps (the graphs' op-by-op first run and capture) are not
// timed; then 32 steps are. Reported per step and variant (graph_, direct_):
// the wall time, the host time (wall minus the time the host spent
// waiting for the device: what issuing a step costs the host, issue 20's
// ≤ 100 µs goal), kernel launches and graph launches from the host, and
// waits. On the host twin the waits include running the kernels, so the
// host time is the Go side's alone: the model, the runtime layer and the
// twin's queueing (a GPU's cuLaunchKernel costs microseconds of host time
// more per launch, which a replay does not pay).
func benchDecodeStep(b *testing.B, d *cuda.Device, m *model.Model, batch int) {
	const warm, round = 2, 32 // untimed and timed decode steps per Batch
	const promptLen = 16
	type tally struct{ wall, wait, launches, graphs, syncs, steps, rows int64 }
	var t [2]tally // [0] graphs, [1] op by op
	rng := rand.New(rand.NewPCG(8, uint64(batch)))
	one := func(v int) {
		// Every prompt in one prefill step, so the timed steps are all decode
		// steps (at the default budget of 512 tokens, batch 256's 4,096
		// prompt tokens spilled into five timed steps, run op by op).
		bt := m.NewBatch(model.BatchOptions{MaxBatch: batch, NoGraphs: v == 1, PrefillTokens: batch * promptLen})
		defer bt.Release()
		var seqs []*model.Sequence
		for i := range batch {
			ids := make([]int32, promptLen)
			for j := range ids {
				ids[j] = int32(rng.IntN(m.Config.VocabSize))
			}
			s := model.NewSequence(uint64(i), ids...)
			seqs = append(seqs, s)
			_, err := bt.Add(model.Request{Seq: s, MaxNewTokens: warm + round + 1})
			require.NoError(b, err)
		}
		defer func() {
			for _, s := range seqs {
				s.Release()
			}
		}()
		for range 1 + warm { // prefill and the first token, then the untimed steps
			_, err := bt.Step(b.Context())
			require.NoError(b, err)
		}
		b.StartTimer()
		defer b.StopTimer()
		x := &t[v]
		for range round {
			n := bt.Len()
			if n == 0 {
				break
			}
			c0, t0 := d.Counters(), time.Now()
			_, err := bt.Step(b.Context())
			el, c1 := time.Since(t0), d.Counters()
			require.NoError(b, err)
			x.wall += int64(el)
			x.wait += c1.WaitNanos - c0.WaitNanos
			x.launches += c1.Launches - c0.Launches
			x.graphs += c1.GraphLaunches - c0.GraphLaunches
			x.syncs += c1.Syncs - c0.Syncs
			x.steps++
			x.rows += int64(n)
		}
	}
	b.StopTimer()
	for i := range b.N {
		one(i % 2)
		one(1 - i%2)
	}
	for v, name := range []string{"graph_", "direct_"} {
		x := t[v]
		per := func(n int64) float64 { return float64(n) / float64(x.steps) }
		b.ReportMetric(per(x.wall)/1e3, name+"wall_us/step")
		b.ReportMetric(per(x.wall-x.wait), name+"host_ns/step")
		b.ReportMetric(per(x.launches), name+"launches/step")
		b.ReportMetric(per(x.graphs), name+"graph_launches/step")
		b.ReportMetric(per(x.syncs), name+"waits/step")
		b.ReportMetric(float64(x.rows)/time.Duration(x.wall).Seconds(), name+"tok/s")
	}
}
