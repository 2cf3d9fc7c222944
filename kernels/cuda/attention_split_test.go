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
	mem := rnd(b * w * p.BlockStride)
	if dt == kernels.BF16 {
		u := make([]uint16, len(mem))
		for i, x := range mem {
			u[i] = kernels.F32ToBF16(x)
		}
		p.Pool = kernels.HostBF16(u)
	} else {
		p.Pool = kernels.HostF32(mem)
	}
	return kernels.AttentionBatch{
		Layout: kernels.BatchLayout{QStart: kernels.HostI32(ints[:b+1]), Pos: kernels.HostI32(ints[b+1:]), B: b, N: n, MaxT: maxT, MaxLen: maxLen},
		Q:      kernels.HostF32(rnd(n * heads * dim)), Out: kernels.HostF32(make([]float32, n*heads*dim)),
		LSE: kernels.HostF32(make([]float32, n*heads)), Paged: p,
	}
}
