package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// AttentionPaged checks Attention reading K/V through the block tables of a
// paged pool (kernels.PagedKV): block sizes that split the backend's key
// blocks and ones that hold them whole, decode and prefill, GQA, blocks
// shuffled among NaN-filled spare ones in a pool whose blocks hold other
// layers too, a forked prompt's blocks shared between sequences. F32 blocks
// must give exactly the contiguous result (bit for bit, output and LSE);
// BF16 blocks must give exactly the contiguous result on K/V rounded to
// bf16, and the reference's f32 result within Tolerance("AttentionBF16KV").
func AttentionPaged(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		heads, kvHeads, dim int
		bs                  int
		seqs                []attnSeq
		share               int // positions the later sequences share with the first
	}{
		{2, 1, 16, 1, []attnSeq{{1, 9}}, 0},
		{4, 2, 64, 16, []attnSeq{{1, 200}, {1, 0}, {7, 3}}, 0},
		{4, 2, 64, 64, []attnSeq{{1, 130}, {33, 40}}, 64},
		{8, 2, 128, 32, []attnSeq{{70, 0}, {1, 95}}, 64},
		{6, 3, 16, 5, []attnSeq{{12, 21}, {0, 3}}, 0},
		{4, 2, 24, 16, []attnSeq{{9, 40}}, 0}, // D not a multiple of the SIMD width
		{16, 8, 128, 128, []attnSeq{{1, 300}, {2, 126}}, 0},
		{2, 1, 64, 4, []attnSeq{{1, 17}, {1, 17}, {3, 12}}, 12}, // three forks of one prompt
	}
	for _, c := range cases {
		for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
			name := fmt.Sprintf("H%d_KVH%d_D%d_bs%d_seqs%v_share%d_%v", c.heads, c.kvHeads, c.dim, c.bs, c.seqs, c.share, dt)
			t.Run(name, func(t *testing.T) {
				rng := newRNG("AttentionPaged" + name)
				scale := float32(1 / math.Sqrt(float64(c.dim)))
				d := newAttnData(rng, c.heads, c.kvHeads, c.dim, c.seqs, 2).withShare(c.share)
				exact := d // the floats the pool holds
				if dt == kernels.BF16 {
					exact = d.rounded()
				}
				ref := d.batch(rng, kvStore{}, true)
				r.Attention(ref, c.heads, c.kvHeads, c.dim, scale)
				contig := exact.batch(rng, kvStore{}, true)
				b.Attention(contig, c.heads, c.kvHeads, c.dim, scale)
				paged := d.batch(rng, kvStore{bs: c.bs, dt: dt, share: c.share}, true)
				b.Attention(paged, c.heads, c.kvHeads, c.dim, scale)
				CheckExact(t, "paged out vs contiguous", paged.Out.F32(), contig.Out.F32())
				CheckExact(t, "paged lse vs contiguous", paged.LSE.F32(), contig.LSE.F32())
				tol := Tolerance("Attention")
				if dt == kernels.BF16 {
					tol = Tolerance("AttentionBF16KV")
				}
				g, w := d.unpack(paged.Out.F32(), c.heads*c.dim), d.unpack(ref.Out.F32(), c.heads*c.dim)
				for i := range g {
					CheckClose(t, fmt.Sprintf("seq %d paged out vs f32 reference", i), g[i], w[i], tol)
				}
			})
		}
	}
}
