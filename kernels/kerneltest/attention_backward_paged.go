package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
)

// AttentionBackwardPaged checks AttentionBackward reading K/V through the
// block tables of a paged pool (kernels.PagedKV): blocks shuffled among
// NaN-filled spare ones, a partial last block, block sizes from 1 to larger
// than the sequence, head dims that are not a multiple of any SIMD width
// (8, 24, 40), GQA ratios 1 to 8, a decode-shaped sequence, an empty one
// (T = 0), and blocks shared between sequences. DQ, DK and DV (the latter
// accumulated onto random values) must equal the backend's own contiguous
// backward on the same floats bit for bit: the K/V as given for F32
// blocks, rounded to bf16 for BF16 blocks. They must also match the
// reference on those floats within Tolerance("AttentionBackward").
func AttentionBackwardPaged(t *testing.T, b kernels.Backend) {
	cases := []struct {
		heads, kvHeads, dim int
		bs                  int
		seqs                []attnSeq
		share               int
	}{
		{2, 1, 16, 1, []attnSeq{{1, 9}}, 0},
		{4, 2, 64, 16, []attnSeq{{5, 11}, {1, 0}, {0, 4}, {9, 3}}, 0},
		{4, 2, 64, 64, []attnSeq{{33, 40}, {2, 1}}, 0},
		{8, 2, 128, 32, []attnSeq{{70, 0}, {1, 95}}, 64},
		{6, 3, 8, 5, []attnSeq{{12, 21}}, 0},
		{4, 2, 24, 16, []attnSeq{{9, 40}}, 0},
		{8, 1, 40, 7, []attnSeq{{21, 2}, {4, 20}}, 14},
		{2, 2, 16, 256, []attnSeq{{17, 3}}, 0}, // one block, longer than the sequence
		{16, 8, 128, 128, []attnSeq{{3, 200}}, 0},
	}
	for _, c := range cases {
		for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
			name := fmt.Sprintf("H%d_KVH%d_D%d_bs%d_seqs%v_share%d_%v", c.heads, c.kvHeads, c.dim, c.bs, c.seqs, c.share, dt)
			t.Run(name, func(t *testing.T) {
				rng := newRNG("AttentionBackwardPaged" + name)
				d := newAttnData(rng, c.heads, c.kvHeads, c.dim, c.seqs, 2).withShare(c.share)
				if dt == kernels.BF16 {
					d = d.rounded() // the floats the bf16 blocks hold
				}
				g := newGradData(rng, d)
				want := g.refGrads(rng)
				contig := g.run(rng, b, kvStore{})
				paged := g.run(rng, b, kvStore{bs: c.bs, dt: dt, share: c.share})
				for _, w := range []string{"DQ", "DK", "DV"} {
					CheckExact(t, "paged "+w+" vs contiguous", paged.buf(w), contig.buf(w))
				}
				g.check(t, paged, want, Tolerance("AttentionBackward"), 1)
			})
		}
	}
}
