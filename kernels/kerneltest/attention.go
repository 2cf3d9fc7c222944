package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// attnSeq is the shape of one sequence in a batched Attention case.
type attnSeq struct{ t, start int }

// Attention checks causal GQA attention and its LSE output: GQA ratios 1, 2,
// 4 and 8, head dims 16/24/64/128, T = 1 decode with Start > 0, prefill, a
// batch of sequences of different lengths in one call, and large logits.
func Attention(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		heads, kvHeads, dim int
		qScale              float64 // scores grow with it; 30 gives logits in the hundreds
		seqs                []attnSeq
		lse                 bool
	}{
		{1, 1, 16, 1, []attnSeq{{1, 0}}, true},
		{2, 2, 16, 1, []attnSeq{{1, 37}}, true},
		{4, 2, 64, 1, []attnSeq{{17, 0}}, true},
		{8, 2, 64, 1, []attnSeq{{5, 11}, {1, 0}, {9, 3}}, true},
		{16, 8, 128, 1, []attnSeq{{1, 300}, {1, 5}}, false},
		{16, 2, 128, 1, []attnSeq{{3, 200}}, true},
		{4, 1, 64, 30, []attnSeq{{33, 7}}, true},
		{2, 1, 128, 1, []attnSeq{{130, 0}}, true},
		{6, 3, 16, 4, []attnSeq{{70, 70}, {2, 1}}, true},
		{4, 2, 24, 1, []attnSeq{{9, 4}}, true},   // D not a multiple of the SIMD width
		{32, 4, 64, 1, []attnSeq{{40, 0}}, true}, // group 8: a tile holds few tokens
	}
	for _, c := range cases {
		name := fmt.Sprintf("H%d_KVH%d_D%d_q%g_seqs%v_lse%v", c.heads, c.kvHeads, c.dim, c.qScale, c.seqs, c.lse)
		t.Run(name, func(t *testing.T) {
			rng := newRNG("Attention" + name)
			scale := float32(1 / math.Sqrt(float64(c.dim)))
			var got, want, again []hostSeq
			for _, s := range c.seqs {
				n := s.start + s.t
				q := uniform(rng, s.t*c.heads*c.dim, c.qScale)
				k := uniform(rng, n*c.kvHeads*c.dim, 1)
				v := uniform(rng, n*c.kvHeads*c.dim, 1)
				mk := func(pad int) hostSeq {
					a := hostSeq{Q: q, K: k, V: v, T: s.t, Start: s.start,
						Out: padded(make([]float32, s.t*c.heads*c.dim), pad)}
					if c.lse {
						a.LSE = padded(make([]float32, s.t*c.heads), pad)
					}
					return a
				}
				want = append(want, mk(0))
				got = append(got, mk(3))
				again = append(again, mk(3))
			}
			r.Attention(seqBufs(want), c.heads, c.kvHeads, c.dim, scale)
			b.Attention(seqBufs(got), c.heads, c.kvHeads, c.dim, scale)
			b.Attention(seqBufs(again), c.heads, c.kvHeads, c.dim, scale)
			for i := range want {
				no := len(want[i].Out)
				CheckClose(t, fmt.Sprintf("seq %d out", i), got[i].Out[:no], want[i].Out, Tolerance("Attention"))
				CheckExact(t, fmt.Sprintf("seq %d out past T·H·D", i), got[i].Out[no:], padded(nil, 3))
				CheckExact(t, fmt.Sprintf("seq %d repeated call", i), again[i].Out, got[i].Out)
				if c.lse {
					nl := len(want[i].LSE)
					CheckClose(t, fmt.Sprintf("seq %d lse", i), got[i].LSE[:nl], want[i].LSE, Tolerance("AttentionLSE"))
					CheckExact(t, fmt.Sprintf("seq %d lse past T·H", i), got[i].LSE[nl:], padded(nil, 3))
				}
			}
		})
	}
}
