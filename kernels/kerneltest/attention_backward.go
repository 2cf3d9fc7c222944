package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// AttentionBackward checks DQ (=), DK and DV (+=, from random starting
// values) against the reference, given the reference forward's Out and LSE:
// GQA ratios 1, 2, 4 and 8, head dims 8 (not a SIMD multiple), 16, 64 and
// 128, T = 1 with Start > 0 (decode-shaped), prefill longer than a tile,
// batches of sequences of different lengths and starts (one empty: T = 0
// leaves its DK and DV unchanged), and peaked softmaxes
// (query scale 30). A repeated call must match bitwise.
func AttentionBackward(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		heads, kvHeads, dim int
		qScale              float64
		seqs                []attnSeq
	}{
		{1, 1, 16, 1, []attnSeq{{1, 0}}},
		{2, 2, 16, 1, []attnSeq{{1, 37}}},
		{4, 2, 8, 1, []attnSeq{{9, 4}}},
		{4, 2, 64, 1, []attnSeq{{17, 0}}},
		{8, 2, 64, 1, []attnSeq{{5, 11}, {1, 0}, {0, 4}, {9, 3}}},
		{16, 8, 128, 1, []attnSeq{{3, 200}, {40, 0}}},
		{4, 1, 64, 30, []attnSeq{{33, 7}}},
		{2, 1, 128, 1, []attnSeq{{130, 0}}},
		{6, 3, 16, 4, []attnSeq{{70, 70}, {2, 1}}},
		{8, 1, 16, 1, []attnSeq{{21, 2}}},
	}
	for _, c := range cases {
		name := fmt.Sprintf("H%d_KVH%d_D%d_q%g_seqs%v", c.heads, c.kvHeads, c.dim, c.qScale, c.seqs)
		t.Run(name, func(t *testing.T) {
			rng := newRNG("AttentionBackward" + name)
			scale := float32(1 / math.Sqrt(float64(c.dim)))
			var want []hostGradSeq
			var dk0, dv0 [][]float32
			for _, s := range c.seqs {
				n := s.start + s.t
				nq, nkv := s.t*c.heads*c.dim, n*c.kvHeads*c.dim
				fw := hostSeq{
					Q: uniform(rng, nq, c.qScale), K: uniform(rng, nkv, 1), V: uniform(rng, nkv, 1),
					Out: make([]float32, nq), LSE: make([]float32, s.t*c.heads), T: s.t, Start: s.start,
				}
				r.Attention(seqBufs([]hostSeq{fw}), c.heads, c.kvHeads, c.dim, scale)
				dk0 = append(dk0, uniform(rng, nkv, 1))
				dv0 = append(dv0, uniform(rng, nkv, 1))
				want = append(want, hostGradSeq{
					DOut: uniform(rng, nq, 1), Q: fw.Q, K: fw.K, V: fw.V, Out: fw.Out, LSE: fw.LSE,
					DQ: make([]float32, nq), DK: clone(dk0[len(dk0)-1]), DV: clone(dv0[len(dv0)-1]),
					T: s.t, Start: s.start,
				})
			}
			r.AttentionBackward(gradBufs(want), c.heads, c.kvHeads, c.dim, scale)
			run := func() []hostGradSeq {
				got := make([]hostGradSeq, len(want))
				for i, w := range want {
					got[i] = w
					got[i].DQ = bwNaNs(len(w.DQ))
					got[i].DK = padded(dk0[i], bwPad)
					got[i].DV = padded(dv0[i], bwPad)
				}
				b.AttentionBackward(gradBufs(got), c.heads, c.kvHeads, c.dim, scale)
				return got
			}
			got, again := run(), run()
			tol := Tolerance("AttentionBackward")
			for i, w := range want {
				for _, o := range []struct {
					what      string
					got, want []float32
					again     []float32
				}{{"DQ", got[i].DQ, w.DQ, again[i].DQ}, {"DK", got[i].DK, w.DK, again[i].DK}, {"DV", got[i].DV, w.DV, again[i].DV}} {
					n := len(o.want)
					tol := tol
					if o.what == "DK" {
						// DK = scale·Σ dS·q: its terms grow with |q|, so an
						// absolute bound for O(1) terms scales with qScale
						// (measured at qScale 30: 4.4e-5 on 3 of 2560
						// elements where terms of ±4 cancel).
						tol.ATol *= c.qScale
					}
					if allZero(o.want) {
						// A sequence whose queries each see one key (T = 1,
						// Start = 0) has P = 1 and dS = P·(dP − D) = 0, so
						// DQ is exactly 0 and NMSE (relative to Σwant²) is
						// undefined; the per-element bound still applies.
						tol.NMSE = math.Inf(1)
					}
					CheckClose(t, fmt.Sprintf("seq %d %s", i, o.what), o.got[:n], o.want, tol)
					CheckExact(t, fmt.Sprintf("seq %d %s past its shape", i, o.what), o.got[n:], padded(nil, bwPad))
					CheckExact(t, fmt.Sprintf("seq %d %s repeated call", i, o.what), o.again, o.got)
				}
			}
		})
	}
}

// allZero reports whether every element of x is zero.
func allZero(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}
