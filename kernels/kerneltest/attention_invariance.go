package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
)

// AttentionInvariance checks that a query row's output and LSE do not
// depend on the batch it is computed in (batch invariance, which sampling
// needs so that the log-probs it records equal the training forward's):
// bit for bit, each sequence computed alone equals it computed in a batch
// with others; every row of a prefill equals that row computed as a decode
// step (T = 1 at its position) alone and in a batch of decodes; a prefill
// split into chunks (as a model's chunked prefill does) equals it whole;
// and the output is the same with and without the LSE. K/V are paged
// (F32 and BF16 pools, the model's layout) and contiguous. A backend that
// picks its kernel by shape (a decode kernel for T = 1, a tiled one for
// prefill) is checked across its variants here. A backend that does not
// say it is invariant (kernels.AttentionInvariant) is skipped.
func AttentionInvariance(t *testing.T, b kernels.Backend) {
	if inv, ok := b.(kernels.AttentionInvariant); !ok || !inv.AttentionBatchInvariant() {
		t.Skip("the backend does not say its attention is batch-invariant (kernels.AttentionInvariant)")
	}
	cases := []struct {
		heads, kvHeads, dim int
		seqs                []attnSeq
	}{
		{2, 1, 16, []attnSeq{{9, 0}, {1, 5}, {4, 30}}},
		{16, 8, 128, []attnSeq{{70, 0}, {3, 61}}},
		{4, 2, 64, []attnSeq{{130, 7}, {1, 0}}},
		{8, 2, 24, []attnSeq{{33, 100}, {2, 1}, {1, 64}}},
		{32, 4, 64, []attnSeq{{20, 44}}},
	}
	stores := []kvStore{{}, {bs: 16, dt: kernels.F32}, {bs: 64, dt: kernels.BF16}}
	for _, c := range cases {
		for _, kv := range stores {
			name := fmt.Sprintf("H%d_KVH%d_D%d_seqs%v_bs%d_%v", c.heads, c.kvHeads, c.dim, c.seqs, kv.bs, kv.dt)
			t.Run(name, func(t *testing.T) {
				rng := newRNG("AttentionInvariance" + name)
				d := newAttnData(rng, c.heads, c.kvHeads, c.dim, c.seqs, 2)
				run := func(d *attnData, lse bool) kernels.AttentionBatch {
					a := d.batch(rng, kv, lse)
					b.Attention(a, d.heads, d.kvHeads, d.dim, d.scale())
					return a
				}
				hd := c.heads * c.dim
				all := run(d, true)
				outs, lses := d.unpack(all.Out.F32(), hd), d.unpack(all.LSE.F32(), c.heads)
				noLSE := run(d, false)
				CheckExact(t, "out without the LSE", noLSE.Out.F32(), all.Out.F32())
				decodes := attnData{heads: d.heads, kvHeads: d.kvHeads, dim: d.dim} // every row of every sequence as a decode step
				for i, s := range c.seqs {
					one := d.sub(i, 0, s.t)
					alone := run(one, true)
					CheckExact(t, fmt.Sprintf("seq %d alone vs in the batch: out", i), alone.Out.F32()[:s.t*hd], outs[i])
					CheckExact(t, fmt.Sprintf("seq %d alone vs in the batch: lse", i), alone.LSE.F32()[:s.t*c.heads], lses[i])
					for tt := range s.t {
						row := d.sub(i, tt, tt+1)
						dec := run(row, true)
						what := fmt.Sprintf("seq %d row %d as a decode step", i, tt)
						CheckExact(t, what+": out", dec.Out.F32()[:hd], outs[i][tt*hd:(tt+1)*hd])
						CheckExact(t, what+": lse", dec.LSE.F32()[:c.heads], lses[i][tt*c.heads:(tt+1)*c.heads])
						decodes.append(row)
					}
					if s.t > 4 { // chunks 3, 1, the rest
						ch := d.sub(i, 0, 3)
						ch.append(d.sub(i, 3, 4))
						ch.append(d.sub(i, 4, s.t))
						got := run(ch, true)
						CheckExact(t, fmt.Sprintf("seq %d in chunks: out", i), got.Out.F32()[:s.t*hd], outs[i])
						CheckExact(t, fmt.Sprintf("seq %d in chunks: lse", i), got.LSE.F32()[:s.t*c.heads], lses[i])
					}
				}
				dec := run(&decodes, true)
				at := 0
				for i, s := range c.seqs {
					n := s.t * hd
					CheckExact(t, fmt.Sprintf("seq %d rows in a batch of decode steps", i), dec.Out.F32()[at:at+n], outs[i])
					at += n
				}
			})
		}
	}
}

// sub returns sequence i of d restricted to its new tokens t0 .. t1−1:
// the same keys and values up to position start+t1−1, queries of those
// tokens.
func (d *attnData) sub(i, t0, t1 int) *attnData {
	s := d.seqs[i]
	n := s.start + t1
	rl, hd := d.kvHeads*d.dim, d.heads*d.dim
	return &attnData{heads: d.heads, kvHeads: d.kvHeads, dim: d.dim,
		seqs: []attnSeq{{t1 - t0, s.start + t0}},
		q:    [][]float32{d.q[i][t0*hd : t1*hd]}, k: [][]float32{d.k[i][:n*rl]}, v: [][]float32{d.v[i][:n*rl]}}
}

// append adds o's sequences to d.
func (d *attnData) append(o *attnData) {
	d.seqs = append(d.seqs, o.seqs...)
	d.q, d.k, d.v = append(d.q, o.q...), append(d.k, o.k...), append(d.v, o.v...)
}
