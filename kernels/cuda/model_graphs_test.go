//go:build cudahost || cuda

package cuda_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cuda"
	"github.com/x/model"
)

// e2eGraphs: a Batch's decode steps replayed from the Device's graphs give
// every sequence the tokens and both log-probs, bit for bit, that op-by-op
// steps give (BatchOptions.NoGraphs) and that the sequence gets decoded
// alone, so the padding rows of a bucket (3 rows run as 4) leak into
// nothing; the batch shrinks as requests finish (buckets 4, 2, 1). Per
// step: the first decode step of a bucket runs op by op, the second is
// captured and replayed, the later ones replayed (no kernel launch from
// the host, one graph launch). Between two replays a forward of another
// sequence grows the KV pool, which moves it to new memory: the graph
// reading the old pool is stale, so the next step runs op by op again and
// the one after is captured anew (a stale replay would write the step's
// K/V rows into the freed pool, and the tokens after would differ). The
// padding rows' block goes back with the Batch.
func e2eGraphs(t *testing.T, nb newBackend) {
	d, ok := nb(t).(*cuda.Device)
	require.True(t, ok, "the backend under test is not a *cuda.Device")
	m := loadOn(t, e2eCheckpoint(t), d)
	ctx := t.Context()
	prompts := [][]int32{{1, 2, 3}, {4, 5}, {6, 7, 8, 9, 10}}
	sampling := []kernels.SamplingParams{{}, {Temperature: 0.8, TopK: 20}, {Temperature: 1, TopP: 0.9, MinP: 0.02}}
	maxNew := []int{14, 9, 11}
	const grow = 5 // the step before which another sequence grows the pool
	type stepCount struct{ launches, graphs int64 }
	run := func(noGraphs bool, only int) ([]model.Completion, []stepCount) {
		b := m.NewBatch(model.BatchOptions{MaxBatch: 4, NoGraphs: noGraphs})
		var seqs []*model.Sequence
		ids := map[int]int{}
		for i, p := range prompts {
			if only >= 0 && i != only {
				continue
			}
			s := model.NewSequence(uint64(100+i), p...)
			seqs = append(seqs, s)
			id, err := b.Add(model.Request{Seq: s, MaxNewTokens: maxNew[i], Sampling: sampling[i]})
			require.NoError(t, err)
			ids[id] = i
		}
		out := make([]model.Completion, len(prompts))
		var counts []stepCount
		var other model.KVCache
		for step := 0; b.Len() > 0; step++ {
			if step == grow && only < 0 {
				before := m.KVStats().Blocks
				_, err := m.NewRunner().TryForward([]*model.KVCache{&other}, [][]int32{make([]int32, 4*64)})
				require.NoError(t, err)
				require.Greater(t, m.KVStats().Blocks, before, "the pool did not grow")
			}
			c0 := d.Counters()
			done, err := b.Step(ctx)
			require.NoError(t, err)
			c1 := d.Counters()
			counts = append(counts, stepCount{c1.Launches - c0.Launches, c1.GraphLaunches - c0.GraphLaunches})
			for _, f := range done {
				require.NoError(t, f.Err)
				out[ids[f.ID]] = f.Completion
			}
		}
		b.Release()
		other.Release()
		for _, s := range seqs {
			s.Release()
		}
		assert.Zero(t, m.KVStats().InUse, "KV blocks held after the sequences and the Batch were released")
		return out, counts
	}
	bits := func(x []float32) []uint32 {
		out := make([]uint32, len(x))
		for i, v := range x {
			out[i] = math.Float32bits(v)
		}
		return out
	}
	direct, dc := run(true, -1)
	graphed, gc := run(false, -1)
	for i := range prompts {
		alone, _ := run(true, i)
		for what, c := range map[string]model.Completion{"op by op": direct[i], "alone": alone[i]} {
			assert.Equal(t, c.Tokens, graphed[i].Tokens, "sequence %d: tokens with graphs vs %s", i, what)
			assert.Equal(t, bits(c.LogProbs), bits(graphed[i].LogProbs), "sequence %d: log-probs with graphs vs %s", i, what)
			assert.Equal(t, bits(c.FullLogProbs), bits(graphed[i].FullLogProbs), "sequence %d: full log-probs with graphs vs %s", i, what)
		}
		require.Len(t, graphed[i].Tokens, maxNew[i])
	}
	for _, c := range dc {
		assert.Zero(t, c.graphs, "op by op: graph launches %v", dc)
	}
	// Steps 1..4 at bucket 4: op by op, captured, replayed, replayed; the
	// pool grew before step 5: op by op, then captured again.
	want := []bool{false, false, true, true, true, false, true, true}
	for s, replayed := range want {
		c := gc[s]
		if replayed {
			assert.Equal(t, stepCount{0, 1}, c, "step %d replayed; steps %v", s, gc)
		} else {
			assert.Positive(t, c.launches, "step %d op by op; steps %v", s, gc)
			assert.Zero(t, c.graphs, "step %d op by op; steps %v", s, gc)
		}
	}
	t.Logf("per step (launches from the host, graph launches): op by op %v, with graphs %v", dc, gc)
}
