package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// AttentionBackwardPaged checks AttentionBackward reading K/V through block
// tables (kernels.PagedKV): blocks shuffled among spare garbage-filled ones,
// a partial last block, block sizes from 1 to larger than the sequence,
// head dims that are not a multiple of any SIMD width (8, 24, 40), GQA
// ratios 1 to 8, a decode-shaped sequence, an empty one (T = 0), and
// paged and contiguous sequences in one call. DQ, DK and DV (the latter
// accumulated onto random values) must equal the backend's own contiguous
// backward on the same floats bit for bit: the K/V as given for F32
// blocks, rounded to bf16 for BF16 blocks. They must also match the
// reference on those floats within Tolerance("AttentionBackward").
func AttentionBackwardPaged(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		heads, kvHeads, dim int
		bs                  int
		seqs                []attnSeq
	}{
		{2, 1, 16, 1, []attnSeq{{1, 9}}},
		{4, 2, 64, 16, []attnSeq{{5, 11}, {1, 0}, {0, 4}, {9, 3}}},
		{4, 2, 64, 64, []attnSeq{{33, 40}, {2, 1}}},
		{8, 2, 128, 32, []attnSeq{{70, 0}, {1, 95}}},
		{6, 3, 8, 5, []attnSeq{{12, 21}}},
		{4, 2, 24, 16, []attnSeq{{9, 40}}},
		{8, 1, 40, 7, []attnSeq{{21, 2}}},
		{2, 2, 16, 256, []attnSeq{{17, 3}}}, // one block, longer than the sequence
		{16, 8, 128, 128, []attnSeq{{3, 200}}},
	}
	for _, c := range cases {
		for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
			name := fmt.Sprintf("H%d_KVH%d_D%d_bs%d_seqs%v_%v", c.heads, c.kvHeads, c.dim, c.bs, c.seqs, dt)
			t.Run(name, func(t *testing.T) {
				rng := newRNG("AttentionBackwardPaged" + name)
				scale := float32(1 / math.Sqrt(float64(c.dim)))
				rowLen := c.kvHeads * c.dim
				var want, contig, paged []hostGradSeq
				for i, s := range c.seqs {
					n := s.start + s.t
					nq, nkv := s.t*c.heads*c.dim, n*rowLen
					k, v := uniform(rng, nkv, 1), uniform(rng, nkv, 1)
					if dt == kernels.BF16 {
						k, v = roundBF16(k), roundBF16(v) // the floats the bf16 blocks hold
					}
					fw := hostSeq{Q: uniform(rng, nq, 2), K: k, V: v, Out: make([]float32, nq),
						LSE: make([]float32, s.t*c.heads), T: s.t, Start: s.start}
					r.Attention(seqBufs([]hostSeq{fw}), c.heads, c.kvHeads, c.dim, scale)
					dk0, dv0 := uniform(rng, nkv, 1), uniform(rng, nkv, 1)
					g := hostGradSeq{DOut: uniform(rng, nq, 1), Q: fw.Q, K: k, V: v, Out: fw.Out, LSE: fw.LSE,
						DQ: make([]float32, nq), DK: clone(dk0), DV: clone(dv0), T: s.t, Start: s.start}
					want = append(want, g)
					mk := func() hostGradSeq {
						h := g
						h.DQ, h.DK, h.DV = bwNaNs(nq), padded(dk0, bwPad), padded(dv0, bwPad)
						return h
					}
					contig = append(contig, mk())
					p := mk()
					if i != 1 || dt != kernels.F32 { // else a contiguous sequence among paged ones
						p.K, p.V = nil, nil
						p.Paged = pageKV(rng, k, v, n, rowLen, c.bs, dt)
					}
					paged = append(paged, p)
				}
				r.AttentionBackward(gradBufs(want), c.heads, c.kvHeads, c.dim, scale)
				b.AttentionBackward(gradBufs(contig), c.heads, c.kvHeads, c.dim, scale)
				b.AttentionBackward(gradBufs(paged), c.heads, c.kvHeads, c.dim, scale)
				tol := Tolerance("AttentionBackward")
				for i := range paged {
					for _, o := range []struct {
						what              string
						got, contig, want []float32
					}{
						{"DQ", paged[i].DQ, contig[i].DQ, want[i].DQ},
						{"DK", paged[i].DK, contig[i].DK, want[i].DK},
						{"DV", paged[i].DV, contig[i].DV, want[i].DV},
					} {
						CheckExact(t, fmt.Sprintf("seq %d paged %s vs contiguous", i, o.what), o.got, o.contig)
						n := len(o.want)
						tol := tol
						if allZero(o.want) {
							tol.NMSE = math.Inf(1) // see AttentionBackward
						}
						CheckClose(t, fmt.Sprintf("seq %d paged %s vs reference", i, o.what), o.got[:n], o.want, tol)
						CheckExact(t, fmt.Sprintf("seq %d paged %s past its shape", i, o.what), o.got[n:], padded(nil, bwPad))
					}
				}
			})
		}
	}
}
