package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// WriteKV checks the batched KV write against the reference bit for bit:
// F32 and BF16 pools (rounding as Copy does), block sizes from 1 to larger
// than a sequence, prefill rows crossing blocks, decode rows, a sequence
// with no new rows, shuffled blocks among NaN-filled spare ones of a pool
// whose blocks hold other layers (which must stay untouched), and block
// tables with spare entries.
func WriteKV(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		kvHeads, dim, bs int
		seqs             []attnSeq
	}{
		{1, 8, 1, []attnSeq{{3, 2}}},
		{2, 16, 4, []attnSeq{{9, 3}, {1, 12}, {0, 5}, {1, 0}}},
		{8, 128, 64, []attnSeq{{70, 0}, {1, 200}}},
		{3, 24, 16, []attnSeq{{17, 15}}},
		{2, 64, 256, []attnSeq{{5, 1}, {2, 2}}},
	}
	for _, c := range cases {
		for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
			name := fmt.Sprintf("KVH%d_D%d_bs%d_seqs%v_%v", c.kvHeads, c.dim, c.bs, c.seqs, dt)
			t.Run(name, func(t *testing.T) {
				rng := newRNG("WriteKV" + name)
				d := newAttnData(rng, c.kvHeads, c.kvHeads, c.dim, c.seqs, 1)
				a := d.batch(rng, kvStore{bs: c.bs, dt: dt}, false)
				rl := c.kvHeads * c.dim
				k, v := uniform(rng, a.Layout.N*rl, 3), uniform(rng, a.Layout.N*rl, 3)
				want := clonePool(a.Paged)
				r.WriteKV(want, a.Layout, kernels.HostF32(k), kernels.HostF32(v), c.kvHeads, c.dim)
				got := clonePool(a.Paged)
				b.WriteKV(got, a.Layout, kernels.HostF32(k), kernels.HostF32(v), c.kvHeads, c.dim)
				checkPool(t, "pool", got, want)
			})
		}
	}
}

// clonePool returns p with a copy of its pool memory.
func clonePool(p kernels.PagedKV) kernels.PagedKV {
	if p.Pool.DType() == kernels.BF16 {
		p.Pool = kernels.HostBF16(append([]uint16(nil), p.Pool.BF16()...))
	} else {
		p.Pool = kernels.HostF32(clone(p.Pool.F32()))
	}
	return p
}

// checkPool requires the pools of got and want to be bitwise equal.
func checkPool(t *testing.T, what string, got, want kernels.PagedKV) {
	t.Helper()
	if want.Pool.DType() == kernels.BF16 {
		CheckExact(t, what, widen(got.Pool.BF16()), widen(want.Pool.BF16()))
		return
	}
	CheckExact(t, what, got.Pool.F32(), want.Pool.F32())
}

// widen returns bf16 bits as float32 (exactly).
func widen(u []uint16) []float32 {
	out := make([]float32, len(u))
	for i, x := range u {
		out[i] = kernels.BF16ToF32(x)
	}
	return out
}
