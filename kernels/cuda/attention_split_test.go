//go:build cudahost

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
)

// TestAttentionSplitInvariance: the tensor-core forward gives the same bits
// whether a row's key chunks run in one block (folded there) or split over
// blocks and folded by attention_combine (flash-decoding), for decode and
// prefill shapes, f32 and bf16 pools, with the LSE: the host build forced
// never to split and always to split, on rows of several chunks.
func TestAttentionSplitInvariance(t *testing.T) {
	never, always := NewHost(2), NewHost(2)
	never.splitBlocks, always.splitBlocks = 0, math.MaxInt32
	for _, c := range []struct {
		heads, kvHeads, dim int
		spans               []kernels.Span
		dt                  kernels.DType
	}{
		{16, 8, 128, []kernels.Span{{T: 1, Start: 200}, {T: 1, Start: 63}, {T: 1, Start: 64}}, kernels.F32},
		{4, 2, 64, []kernels.Span{{T: 70, Start: 5}, {T: 1, Start: 130}}, kernels.BF16},
		{8, 1, 32, []kernels.Span{{T: 9, Start: 120}}, kernels.F32},
	} {
		t.Run(fmt.Sprintf("H%d_KVH%d_D%d_%v_%v", c.heads, c.kvHeads, c.dim, c.spans, c.dt), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c.heads), uint64(c.dim)))
			a := pagedBatch(rng, c.heads, c.kvHeads, c.dim, 16, c.spans, c.dt)
			run := func(h *Device) ([]float32, []float32) {
				out, lse := make([]float32, a.Out.Len()), make([]float32, a.LSE.Len())
				b := a
				b.Out, b.LSE = kernels.HostF32(out), kernels.HostF32(lse)
				h.Attention(b, c.heads, c.kvHeads, c.dim, 0.125)
				return out, lse
			}
			o1, l1 := run(never)
			o2, l2 := run(always)
			require.False(t, math.IsNaN(float64(o1[0])))
			kerneltest.CheckExact(t, "out", o2, o1)
			kerneltest.CheckExact(t, "lse", l2, l1)
		})
	}
}

// pagedBatch is a batch of random queries and keys and values in a paged
// pool of blocks of bs positions (dtype dt), sequence after sequence.
func pagedBatch(rng *rand.Rand, heads, kvHeads, dim, bs int, spans []kernels.Span, dt kernels.DType) kernels.AttentionBatch {
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(2*rng.Float64() - 1)
		}
		return x
	}
	ints, n, maxT, maxLen := kernels.AppendLayout(nil, spans)
	b := len(spans)
	rl := kvHeads * dim
	w := (maxLen + bs - 1) / bs
	tab := make([]int32, b*w)
	for i := range tab {
		tab[i] = int32(i) // sequence s owns blocks s·w .. s·w+w−1
	}
	p := kernels.PagedKV{BlockSize: bs, BlockStride: 2 * bs * rl, VOff: bs * rl, Tables: kernels.HostI32(tab), TableStride: w}
	p.Pool = kernels.HostRounded(dt, rnd(b*w*p.BlockStride))
	return kernels.AttentionBatch{
		Layout: kernels.BatchLayout{QStart: kernels.HostI32(ints[:b+1]), Pos: kernels.HostI32(ints[b+1:]), B: b, N: n, MaxT: maxT, MaxLen: maxLen},
		Q:      kernels.HostF32(rnd(n * heads * dim)), Out: kernels.HostF32(make([]float32, n*heads*dim)),
		LSE: kernels.HostF32(make([]float32, n*heads)), Paged: p,
	}
}

// TestAttentionGraphReplay: a decode step's attention and KV write read
// only device Buffers at fixed addresses, so they can be captured into a
// CUDA graph (on the host twin) and replayed after new queries, keys and
// positions were uploaded into the same Buffers: the replay equals a
// direct call on the new inputs bit for bit, for a split launch (batch
// 2, keys over several blocks: the partials live in the Device's own
// buffer) and an unsplit one.
func TestAttentionGraphReplay(t *testing.T) {
	for _, split := range []bool{true, false} {
		t.Run(fmt.Sprintf("split%v", split), func(t *testing.T) {
			d := NewHost(2)
			defer d.Close()
			if !split {
				d.splitBlocks = 0
			}
			const heads, kvHeads, dim, bs = 4, 2, 64, 16
			rng := rand.New(rand.NewPCG(3, 4))
			host := pagedBatch(rng, heads, kvHeads, dim, bs, []kernels.Span{{T: 1, Start: 100}, {T: 1, Start: 70}}, kernels.F32)
			host.Layout.MaxLen = 112 // the bound a decode bucket keeps fixed (the tables hold 7 blocks)
			dev := func(h kernels.Buffer) kernels.Buffer {
				x, err := d.Import(h)
				require.NoError(t, err)
				return x
			}
			a := host
			a.Layout.QStart, a.Layout.Pos, a.Q = dev(host.Layout.QStart), dev(host.Layout.Pos), dev(host.Q)
			a.Out, a.LSE, a.Paged.Pool, a.Paged.Tables = dev(host.Out), dev(host.LSE), dev(host.Paged.Pool), dev(host.Paged.Tables)
			rl := kvHeads * dim
			k, v := dev(kernels.HostF32(make([]float32, 2*rl))), dev(kernels.HostF32(make([]float32, 2*rl)))
			step := func() {
				d.WriteKVRoPE(a.Paged, a.Layout, k, v, kvHeads, dim, 1e6)
				d.Attention(a, heads, kvHeads, dim, 0.125)
			}
			step() // grows what the step needs (the partials) before capturing
			require.NoError(t, d.BeginCapture())
			step()
			g, err := d.EndCapture()
			require.NoError(t, err)
			defer g.Close()
			rnd := func(n int) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(2*rng.Float64() - 1)
				}
				return x
			}
			// The next step: new query, key, value and positions, uploaded
			// into the same Buffers; replayed, then run directly.
			q, kn, vn := rnd(a.Q.Len()), rnd(2*rl), rnd(2*rl)
			upload := func() {
				require.NoError(t, d.Upload(a.Q, kernels.HostF32(q)))
				require.NoError(t, d.Upload(k, kernels.HostF32(kn)))
				require.NoError(t, d.Upload(v, kernels.HostF32(vn)))
				require.NoError(t, d.Upload(a.Layout.Pos, kernels.HostI32([]int32{101, 71})))
			}
			read := func() []float32 {
				out := make([]float32, a.Out.Len()+a.LSE.Len())
				require.NoError(t, d.Download(kernels.HostF32(out[:a.Out.Len()]), a.Out))
				require.NoError(t, d.Download(kernels.HostF32(out[a.Out.Len():]), a.LSE))
				return out
			}
			pool := make([]float32, a.Paged.Pool.Len())
			require.NoError(t, d.Download(kernels.HostF32(pool), a.Paged.Pool))
			upload()
			require.NoError(t, g.Replay())
			replayed := read()
			require.NoError(t, d.Upload(a.Paged.Pool, kernels.HostF32(pool))) // the cache before the step
			upload()
			step()
			kerneltest.CheckExact(t, "replayed step vs direct", replayed, read())
			require.NoError(t, d.Err())
		})
	}
}
