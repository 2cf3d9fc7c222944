package model

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
)

// hollowGraphs is a kernels.StepGrapher over a host backend whose
// recordings run their ops the first time a key is seen and then queue
// nothing: a step through it costs the model's own host bookkeeping (the
// feeds, block tables, sampling arguments, upload, collecting the tokens)
// and no kernel, which is what a replayed graph leaves the host on a GPU.
// Its tokens after the first step are stale (the ids Buffer keeps the
// first step's), so it is for timing and counting allocations only.
type hollowGraphs struct {
	kernels.Backend
}

func (h hollowGraphs) NewStepGraphs() kernels.StepGraphs { return &hollowRuns{seen: map[any]bool{}} }

type hollowRuns struct{ seen map[any]bool }

func (h *hollowRuns) Run(key any, record func() error) error {
	if h.seen[key] {
		return nil
	}
	h.seen[key] = true
	return record()
}

func (h *hollowRuns) Close() error { return nil }

// hollowModel is the tiny shape on kernels/cpu through hollowGraphs.
func hollowModel(tb testing.TB) *Model {
	cfg, err := NamedConfig("tiny")
	require.NoError(tb, err)
	dir := tb.TempDir()
	require.NoError(tb, WriteRandom(dir, cfg, kernels.BF16, 1, RandomOptions{}))
	be := cpu.New(1)
	tb.Cleanup(be.Close)
	m, err := Load(dir, hollowGraphs{be})
	require.NoError(tb, err)
	tb.Cleanup(func() { m.Close() })
	return m
}

// hollowRound starts batch sequences in bt (sampling with temperature and
// top-k) that decode steps+1 tokens each, runs their prefill and first two
// steps (the first run and the recording of a key), and returns a func
// that releases them.
func hollowRound(tb testing.TB, bt *Batch, batch, steps int) func() {
	seqs := make([]*Sequence, batch)
	for i := range seqs {
		seqs[i] = NewSequence(uint64(i), int32(i%bt.m.Config.VocabSize), 1, 2)
		_, err := bt.Add(Request{Seq: seqs[i], MaxNewTokens: steps + 3, Sampling: kernels.SamplingParams{Temperature: 0.8, TopK: 20}})
		require.NoError(tb, err)
	}
	for range 3 {
		_, err := bt.Step(tb.Context())
		require.NoError(tb, err)
	}
	return func() {
		for bt.Len() > 0 {
			_, err := bt.Step(tb.Context())
			require.NoError(tb, err)
		}
		for _, s := range seqs {
			s.Release()
		}
	}
}

// BenchmarkBatchStepHost: the host time of a decode step replayed from a
// recording, the model's bookkeeping alone (see hollowGraphs), per batch:
// rounds of 32 timed steps, each round's sequences started and released
// untimed (so the KV pool has its size after the first).
func BenchmarkBatchStepHost(b *testing.B) {
	const round = 32
	for _, batch := range []int{1, 8, 64, 256} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			m := hollowModel(b)
			bt := m.NewBatch(BatchOptions{MaxBatch: batch})
			defer bt.Release()
			require.NotNil(b, bt.graphs)
			b.ReportAllocs()
			b.StopTimer()
			b.ResetTimer()
			for i := 0; i < b.N; i += round {
				done := hollowRound(b, bt, batch, round)
				b.StartTimer()
				for range min(round, b.N-i) {
					if _, err := bt.Step(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				done()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "host_ns/step")
		})
	}
}

// TestBatchStepAllocs: a decode step replayed from a recording allocates
// nothing on the host at any batch (the record func and the key are made
// once, the download's transfers live in the Batch, a sequence's tokens
// have room for its request), so its host time cannot grow by the garbage
// collector's work per row. It would fail with any per-step allocation.
func TestBatchStepAllocs(t *testing.T) {
	m := hollowModel(t)
	for _, batch := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			bt := m.NewBatch(BatchOptions{MaxBatch: batch})
			defer bt.Release()
			done := hollowRound(t, bt, batch, 32)
			defer done()
			allocs := testing.AllocsPerRun(8, func() {
				if _, err := bt.Step(t.Context()); err != nil {
					t.Fatal(err)
				}
			})
			require.Zero(t, allocs, "allocations per decode step")
		})
	}
}
