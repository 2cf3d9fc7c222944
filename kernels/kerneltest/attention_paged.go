package kerneltest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// pageKV scatters a contiguous [n, KVH, D] K and V into blocks of bs
// positions, in a shuffled order among spare blocks filled with garbage
// (and each block padded with garbage past bs positions), as a paged KV
// cache lays them out. With dt BF16 the blocks hold the values rounded to
// bfloat16.
func pageKV(rng *rand.Rand, k, v []float32, n, rowLen, bs int, dt kernels.DType) kernels.PagedKV {
	blocks := (n + bs - 1) / bs
	total := 2*blocks + 1
	size := bs*rowLen + 5
	perm := rng.Perm(total)[:blocks]
	p := kernels.PagedKV{BlockSize: bs, DType: dt}
	fill := func(src []float32, b int) ([]float32, []uint16) {
		f := uniform(rng, size, 100) // garbage where no position lives
		for i := range f {
			if o := b*bs*rowLen + i; i < bs*rowLen && o < n*rowLen {
				f[i] = src[o]
			}
		}
		if dt != kernels.BF16 {
			return f, nil
		}
		u := make([]uint16, size)
		for i, x := range f {
			u[i] = kernels.F32ToBF16(x)
		}
		return nil, u
	}
	pool := make([][2][]float32, total)
	pool16 := make([][2][]uint16, total)
	for b := range blocks {
		pool[perm[b]][0], pool16[perm[b]][0] = fill(k, b)
		pool[perm[b]][1], pool16[perm[b]][1] = fill(v, b)
	}
	for b := range blocks {
		if dt == kernels.BF16 {
			p.K = append(p.K, kernels.HostBF16(pool16[perm[b]][0]))
			p.V = append(p.V, kernels.HostBF16(pool16[perm[b]][1]))
		} else {
			p.K = append(p.K, kernels.HostF32(pool[perm[b]][0]))
			p.V = append(p.V, kernels.HostF32(pool[perm[b]][1]))
		}
	}
	return p
}

// roundBF16 returns x rounded to bfloat16 and widened back.
func roundBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = kernels.BF16ToF32(kernels.F32ToBF16(v))
	}
	return out
}

// AttentionPaged checks Attention reading K/V through block tables
// (kernels.PagedKV): block sizes that split the backend's key blocks and
// ones that hold them whole, decode and prefill, GQA, paged and contiguous
// sequences in one call. F32 blocks must give exactly the contiguous result
// (bit for bit, output and LSE); BF16 blocks must give exactly the
// contiguous result on K/V rounded to bf16, and the reference's f32 result
// within Tolerance("AttentionBF16KV").
func AttentionPaged(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		heads, kvHeads, dim int
		bs                  int
		seqs                []attnSeq
	}{
		{2, 1, 16, 1, []attnSeq{{1, 9}}},
		{4, 2, 64, 16, []attnSeq{{1, 200}, {1, 0}, {7, 3}}},
		{4, 2, 64, 64, []attnSeq{{1, 130}, {33, 40}}},
		{8, 2, 128, 32, []attnSeq{{70, 0}, {1, 95}}},
		{6, 3, 16, 5, []attnSeq{{12, 21}}},
		{4, 2, 24, 16, []attnSeq{{9, 40}}}, // D not a multiple of the SIMD width
		{16, 8, 128, 128, []attnSeq{{1, 300}, {2, 126}}},
	}
	for _, c := range cases {
		for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
			name := fmt.Sprintf("H%d_KVH%d_D%d_bs%d_seqs%v_%v", c.heads, c.kvHeads, c.dim, c.bs, c.seqs, dt)
			t.Run(name, func(t *testing.T) {
				rng := newRNG("AttentionPaged" + name)
				scale := float32(1 / math.Sqrt(float64(c.dim)))
				rowLen := c.kvHeads * c.dim
				var contig, paged, exact []hostSeq
				for i, s := range c.seqs {
					n := s.start + s.t
					q := uniform(rng, s.t*c.heads*c.dim, 2)
					k := uniform(rng, n*rowLen, 1)
					v := uniform(rng, n*rowLen, 1)
					mk := func() hostSeq {
						return hostSeq{Q: q, T: s.t, Start: s.start,
							Out: make([]float32, s.t*c.heads*c.dim), LSE: make([]float32, s.t*c.heads)}
					}
					a := mk()
					a.K, a.V = k, v
					contig = append(contig, a)
					e := mk()
					e.K, e.V = k, v
					if dt == kernels.BF16 {
						e.K, e.V = roundBF16(k), roundBF16(v)
					}
					exact = append(exact, e)
					p := mk()
					if i == 1 && dt == kernels.F32 {
						p.K, p.V = k, v // a contiguous sequence among paged ones
					} else {
						p.Paged = pageKV(rng, k, v, n, rowLen, c.bs, dt)
					}
					paged = append(paged, p)
				}
				r.Attention(seqBufs(contig), c.heads, c.kvHeads, c.dim, scale)
				b.Attention(seqBufs(exact), c.heads, c.kvHeads, c.dim, scale)
				b.Attention(seqBufs(paged), c.heads, c.kvHeads, c.dim, scale)
				tol := Tolerance("Attention")
				if dt == kernels.BF16 {
					tol = Tolerance("AttentionBF16KV")
				}
				for i := range paged {
					CheckExact(t, fmt.Sprintf("seq %d paged out vs contiguous", i), paged[i].Out, exact[i].Out)
					CheckExact(t, fmt.Sprintf("seq %d paged lse vs contiguous", i), paged[i].LSE, exact[i].LSE)
					CheckClose(t, fmt.Sprintf("seq %d paged out vs f32 reference", i), paged[i].Out, contig[i].Out, tol)
				}
			})
		}
	}
}
