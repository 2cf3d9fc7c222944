package kerneltest

import (
	"fmt"
	"math"
	"math/rand/v2"
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
			d := newAttnData(rng, c.heads, c.kvHeads, c.dim, c.seqs, c.qScale)
			g := newGradData(rng, d)
			want := g.refGrads(rng)
			got, again := g.run(rng, b, kvStore{}), g.run(rng, b, kvStore{})
			g.check(t, got, want, Tolerance("AttentionBackward"), c.qScale)
			for _, w := range []string{"DQ", "DK", "DV"} {
				CheckExact(t, w+" repeated call", again.buf(w), got.buf(w))
			}
		})
	}
}

// gradData is an AttentionBackward case: the batch, the reference
// forward's Out and LSE, dOut, and DK, DV's starting values.
type gradData struct {
	d                      *attnData
	out, lse, dout, dk, dv [][]float32
}

// newGradData runs the reference forward on d and draws dOut and DK/DV's
// starting values.
func newGradData(rng *rand.Rand, d *attnData) *gradData {
	var r ref.Backend
	fw := d.batch(nil, kvStore{}, true)
	r.Attention(fw, d.heads, d.kvHeads, d.dim, d.scale())
	g := &gradData{d: d, out: d.unpack(fw.Out.F32(), d.heads*d.dim), lse: d.unpack(fw.LSE.F32(), d.heads)}
	for _, s := range d.seqs {
		nkv := (s.start + s.t) * d.kvHeads * d.dim
		g.dout = append(g.dout, uniform(rng, s.t*d.heads*d.dim, 1))
		g.dk = append(g.dk, uniform(rng, nkv, 1))
		g.dv = append(g.dv, uniform(rng, nkv, 1))
	}
	return g
}

// scale is the score scale 1/√D.
func (d *attnData) scale() float32 { return float32(1 / math.Sqrt(float64(d.dim))) }

// gradResult is a backward's DQ, DK and DV per sequence.
type gradResult struct {
	dq, dk, dv [][]float32
	dqAll      []float32 // packed DQ with its padding
	dkAll      []float32 // DK and DV with the NaN rows between sequences
	dvAll      []float32
}

// buf returns the packed output named w (DQ, DK or DV).
func (r gradResult) buf(w string) []float32 {
	switch w {
	case "DQ":
		return r.dqAll
	case "DK":
		return r.dkAll
	}
	return r.dvAll
}

// run runs b's backward on g with K/V stored as kv.
func (g *gradData) run(rng *rand.Rand, b kernels.Backend, kv kvStore) gradResult {
	d := g.d
	if kv.dt == kernels.BF16 {
		d = d.rounded()
	}
	gb := d.gradBatch(rng, kv, g.out, g.lse, g.dout, g.dk, g.dv)
	b.AttentionBackward(gb, d.heads, d.kvHeads, d.dim, d.scale())
	return gradResult{dq: d.unpack(gb.DQ.F32(), d.heads*d.dim), dk: d.kvRows(&gb, gb.DK.F32()), dv: d.kvRows(&gb, gb.DV.F32()),
		dqAll: gb.DQ.F32(), dkAll: gb.DK.F32(), dvAll: gb.DV.F32()}
}

// refGrads runs the reference backward on g.
func (g *gradData) refGrads(rng *rand.Rand) gradResult {
	return g.run(rng, ref.Backend{}, kvStore{})
}

// check compares got with want per sequence within tol (DK's absolute
// bound scaled by qScale), and requires the NaN padding and the NaN rows
// between sequences untouched.
func (g *gradData) check(t *testing.T, got, want gradResult, tol Tol, qScale float64) {
	t.Helper()
	for i := range g.d.seqs {
		for _, o := range []struct {
			what      string
			got, want []float32
		}{{"DQ", got.dq[i], want.dq[i]}, {"DK", got.dk[i], want.dk[i]}, {"DV", got.dv[i], want.dv[i]}} {
			tol := tol
			if o.what == "DK" {
				// DK = scale·Σ dS·q: its terms grow with |q|, so an
				// absolute bound for O(1) terms scales with qScale
				// (measured at qScale 30: 4.4e-5 on 3 of 2560
				// elements where terms of ±4 cancel).
				tol.ATol *= qScale
			}
			if allZero(o.want) {
				// A sequence whose queries each see one key (T = 1,
				// Start = 0) has P = 1 and dS = P·(dP − D) = 0, so
				// DQ is exactly 0 and NMSE (relative to Σwant²) is
				// undefined; the per-element bound still applies.
				tol.NMSE = math.Inf(1)
			}
			CheckClose(t, fmt.Sprintf("seq %d %s", i, o.what), o.got, o.want, tol)
		}
	}
	n := 0
	for _, s := range g.d.seqs {
		n += s.t
	}
	CheckExact(t, "DQ past its shape", got.dqAll[n*g.d.heads*g.d.dim:], padded(nil, bwPad))
	CheckExact(t, "DK outside the sequences' rows", outside(got.dkAll, got.dk), outside(want.dkAll, want.dk))
	CheckExact(t, "DV outside the sequences' rows", outside(got.dvAll, got.dv), outside(want.dvAll, want.dv))
}

// outside returns the elements of all that lie in none of the rows slices
// (views of all).
func outside(all []float32, rows [][]float32) []float32 {
	in := make([]bool, len(all))
	for _, r := range rows {
		if len(r) == 0 {
			continue
		}
		off := cap(all) - cap(r)
		for i := range r {
			in[off+i] = true
		}
	}
	var out []float32
	for i, x := range all {
		if !in[i] {
			out = append(out, x)
		}
	}
	return out
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
