package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// Attention checks causal GQA attention and its LSE output: GQA ratios 1, 2,
// 4 and 8, head dims 16/24/64/128, T = 1 decode with Start > 0, prefill, a
// batch of sequences of different lengths in one call (one with no new
// tokens), and large logits. K and V are contiguous, with NaN rows between
// sequences and NaN padding past every output (a kernel that reads or
// writes outside its rows is caught). A repeated call must match bitwise.
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
		{8, 2, 64, 1, []attnSeq{{5, 11}, {1, 0}, {0, 6}, {9, 3}}, true},
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
			d := newAttnData(rng, c.heads, c.kvHeads, c.dim, c.seqs, c.qScale)
			want := d.batch(rng, kvStore{}, c.lse)
			r.Attention(want, c.heads, c.kvHeads, c.dim, scale)
			run := func() kernels.AttentionBatch {
				a := d.batch(rng, kvStore{}, c.lse)
				b.Attention(a, c.heads, c.kvHeads, c.dim, scale)
				return a
			}
			got, again := run(), run()
			checkOutputs(t, d, got, want, Tolerance("Attention"), Tolerance("AttentionLSE"))
			CheckExact(t, "repeated call out", again.Out.F32(), got.Out.F32())
		})
	}
}

// checkOutputs compares got's Out and LSE with want's per sequence within
// the tolerances, and requires the NaN padding past them untouched.
func checkOutputs(t *testing.T, d *attnData, got, want kernels.AttentionBatch, tol, tolLSE Tol) {
	t.Helper()
	hd := d.heads * d.dim
	g, w := d.unpack(got.Out.F32(), hd), d.unpack(want.Out.F32(), hd)
	for i := range g {
		CheckClose(t, fmt.Sprintf("seq %d out", i), g[i], w[i], tol)
	}
	n := got.Layout.N
	CheckExact(t, "out past N·H·D", got.Out.F32()[n*hd:], padded(nil, bwPad))
	if got.LSE.Len() == 0 {
		return
	}
	g, w = d.unpack(got.LSE.F32(), d.heads), d.unpack(want.LSE.F32(), d.heads)
	for i := range g {
		CheckClose(t, fmt.Sprintf("seq %d lse", i), g[i], w[i], tolLSE)
	}
	CheckExact(t, "lse past N·H", got.LSE.F32()[n*d.heads:], padded(nil, bwPad))
}
