//go:build cuda

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cuda"
	"github.com/x/model"
)

// Attention alone on the Device at the Qwen3-0.6B head layout (16 query
// heads, 8 kv heads of 128), K/V in a paged f32 pool of 64-position blocks
// (the model's default) read through device-side block tables, everything
// resident on the device: decode steps (one token per sequence at context
// ctx, where the split-KV launch spreads a row's keys over blocks when the
// batch is small) and a prefill. Reported with the analytic traffic and
// work: GB/s of K/V read (each position's K and V once per step) and
// TFLOP/s (4·D FLOPs per visible query-key pair and head: Q·Kᵀ and P·V).

const (
	attnH, attnKVH, attnD, attnBS = 16, 8, 128, 64
)

// attnBench is a batch resident on d: b sequences of t new tokens at
// positions ctx−t .. ctx−1, their K/V in a paged f32 pool.
type attnBench struct {
	a     kernels.AttentionBatch
	bufs  []kernels.Buffer
	pairs float64 // visible query-key pairs per head
	kvB   float64 // K/V bytes read
}

func newAttnBench(tb testing.TB, d *cuda.Device, b, t, ctx int) *attnBench {
	tb.Helper()
	rng := rand.New(rand.NewPCG(uint64(b), uint64(ctx)))
	ab := &attnBench{}
	dev := func(h kernels.Buffer) kernels.Buffer {
		x, err := d.Import(h)
		require.NoError(tb, err)
		ab.bufs = append(ab.bufs, x)
		return x
	}
	base := make([]float32, 1<<20) // random values, tiled: filling a GiB value by value takes seconds
	for i := range base {
		base[i] = float32(2*rng.Float64() - 1)
	}
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := 0; i < n; i += len(base) {
			copy(x[i:], base)
		}
		return x
	}
	spans := make([]kernels.Span, b)
	for i := range spans {
		spans[i] = kernels.Span{T: t, Start: ctx - t}
	}
	lay, n, maxT, maxLen := kernels.AppendLayout(nil, spans)
	w := (ctx + attnBS - 1) / attnBS
	tab := make([]int32, b*w)
	for i := range tab {
		tab[i] = int32(i)
	}
	rl := attnKVH * attnD
	p := kernels.PagedKV{BlockSize: attnBS, BlockStride: 2 * attnBS * rl, VOff: attnBS * rl, TableStride: w}
	p.Pool = dev(kernels.HostF32(rnd(b * w * p.BlockStride)))
	p.Tables = dev(kernels.HostI32(tab))
	ab.a = kernels.AttentionBatch{
		Layout: kernels.BatchLayout{QStart: dev(kernels.HostI32(lay[:b+1])), Pos: dev(kernels.HostI32(lay[b+1:])), B: b, N: n,
			MaxT: maxT, MaxLen: maxLen},
		Q: dev(kernels.HostF32(rnd(n * attnH * attnD))), Out: dev(kernels.HostF32(make([]float32, n*attnH*attnD))),
		LSE: dev(kernels.HostF32(make([]float32, n*attnH))), Paged: p,
	}
	for j := range t {
		ab.pairs += float64(b * (ctx - t + j + 1))
	}
	ab.kvB = float64(b * ctx * 2 * rl * 4)
	tb.Cleanup(func() {
		for _, x := range ab.bufs {
			d.Free(x)
		}
	})
	return ab
}

// attnReps is how many calls one benchmark iteration times (the GPU check
// runs 2 iterations).
const attnReps = 20

// run times b.N·attnReps calls of Attention, ending with a Download (a sync
// point).
func (ab *attnBench) run(b *testing.B, d *cuda.Device) {
	one := make([]float32, 1)
	d.Attention(ab.a, attnH, attnKVH, attnD, 0.0884) // warm up
	require.NoError(b, d.Download(kernels.HostF32(one), ab.a.Out.Slice(0, 1)))
	start := time.Now()
	for range b.N * attnReps {
		d.Attention(ab.a, attnH, attnKVH, attnD, 0.0884)
	}
	require.NoError(b, d.Download(kernels.HostF32(one), ab.a.Out.Slice(0, 1)))
	el := time.Since(start).Seconds() / float64(b.N*attnReps)
	b.ReportMetric(el*1e6, "µs/call")
	b.ReportMetric(ab.kvB/el/1e9, "KV_GB/s")
	b.ReportMetric(4*attnD*attnH*ab.pairs/el/1e12, "TFLOP/s")
}

// BenchmarkAttentionDecode: one decode step's attention (T = 1 per
// sequence) at batch 1, 64 and 256 at context 512, and at batch 1 at 4096
// (where the split launch spreads a row's 64 chunks over blocks).
func BenchmarkAttentionDecode(b *testing.B) {
	d := newDevice(b)
	for _, c := range []struct{ batch, ctx int }{{1, 512}, {64, 512}, {256, 512}, {1, 4096}} {
		b.Run(fmt.Sprintf("B%d_ctx%d", c.batch, c.ctx), func(b *testing.B) {
			newAttnBench(b, d, c.batch, 1, c.ctx).run(b, d)
		})
	}
}

// BenchmarkAttentionPrefill: attention of a prefill of 8 sequences of 512
// tokens (and one of 4096), causal from position 0.
func BenchmarkAttentionPrefill(b *testing.B) {
	d := newDevice(b)
	for _, c := range []struct{ batch, t int }{{8, 512}, {1, 4096}} {
		b.Run(fmt.Sprintf("B%d_T%d", c.batch, c.t), func(b *testing.B) {
			newAttnBench(b, d, c.batch, c.t, c.t).run(b, d)
		})
	}
}

// modelCost is the analytic work of the model per token at context ctx:
// the FLOPs of its matmuls (2 per weight element, the LM head included,
// the embedding lookup not) and of attention (4·ctx·H·D per layer), and
// the bytes of one decode step of b sequences: every bf16 weight once
// (weightBytes) plus each sequence's f32 K and V of ctx positions in every
// layer.
func modelCost(cfg model.Config, weightBytes int64, b, ctx int) (flopsPerToken, stepBytes float64) {
	var params float64
	for _, w := range model.WeightNames(cfg) {
		n := 1
		for _, d := range w.Shape {
			n *= d
		}
		if w.Name != "model.embed_tokens.weight" {
			params += float64(n)
		}
	}
	if cfg.TieWordEmbeddings {
		params += float64(cfg.VocabSize * cfg.HiddenSize) // the LM head reads the embedding
	}
	flopsPerToken = 2*params + float64(cfg.NumLayers)*4*float64(ctx)*float64(cfg.QDim())
	stepBytes = float64(weightBytes) + float64(b*ctx*cfg.NumLayers*2*cfg.KVDim()*4)
	return flopsPerToken, stepBytes
}
