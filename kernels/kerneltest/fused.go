package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
)

// Fused checks the optional fused ops (kernels.AddRMSNormer,
// kernels.RoPEKVWriter) against the unfused sequence of ops on the same
// backend, bit for bit: every output (the residual sum and the norm; the
// rotated keys and the pool). A backend without the fused method runs the
// sequence through the kernels helpers, which this checks too.
func Fused(t *testing.T, b kernels.Backend) {
	_, addNorm := b.(kernels.AddRMSNormer)
	_, ropeKV := b.(kernels.RoPEKVWriter)
	t.Logf("fused AddRMSNorm: %v, WriteKVRoPE: %v", addNorm, ropeKV)
	for _, c := range []struct{ rows, cols int }{{1, 1024}, {5, 37}, {64, 1024}, {3, 4096}} {
		t.Run(fmt.Sprintf("AddRMSNorm_%dx%d", c.rows, c.cols), func(t *testing.T) {
			rng := newRNG(fmt.Sprint("AddRMSNorm", c))
			const eps = 1e-6
			n := c.rows * c.cols
			x, res, w := uniform(rng, n, 3), uniform(rng, n, 3), uniform(rng, c.cols, 1)
			wantX, wantOut := padded(x, bwPad), bwNaNs(n)
			b.Add(kernels.HostF32(wantX[:n]), kernels.HostF32(res))
			b.RMSNorm(kernels.HostF32(wantOut), kernels.HostF32(wantX), kernels.HostF32(w), c.rows, c.cols, eps)
			gotX, gotOut := padded(x, bwPad), bwNaNs(n)
			kernels.AddRMSNorm(b, kernels.HostF32(gotOut), kernels.HostF32(gotX), kernels.HostF32(padded(res, bwPad)), kernels.HostF32(w), c.rows, c.cols, eps)
			CheckExact(t, "x + res", gotX, wantX)
			CheckExact(t, "norm", gotOut, wantOut)
		})
	}
	for _, c := range []struct {
		kvHeads, dim, bs int
		seqs             []attnSeq
		dt               kernels.DType
	}{
		{8, 128, 64, []attnSeq{{1, 70}, {1, 0}, {9, 3}}, kernels.F32},
		{2, 16, 4, []attnSeq{{7, 100}}, kernels.BF16},
		{3, 24, 16, []attnSeq{{40, 5}, {0, 3}}, kernels.F32},
	} {
		t.Run(fmt.Sprintf("WriteKVRoPE_KVH%d_D%d_bs%d_seqs%v_%v", c.kvHeads, c.dim, c.bs, c.seqs, c.dt), func(t *testing.T) {
			rng := newRNG(fmt.Sprint("WriteKVRoPE", c))
			const theta = 1e6
			d := newAttnData(rng, c.kvHeads, c.kvHeads, c.dim, c.seqs, 1)
			a := d.batch(rng, kvStore{bs: c.bs, dt: c.dt}, false)
			rl := c.kvHeads * c.dim
			k, v := uniform(rng, a.Layout.N*rl, 3), uniform(rng, a.Layout.N*rl, 3)
			want, wantK := clonePool(a.Paged), padded(k, bwPad)
			b.RoPE(kernels.HostF32(wantK[:len(k)]), a.Layout.Pos, c.kvHeads, c.dim, theta)
			b.WriteKV(want, a.Layout, kernels.HostF32(wantK), kernels.HostF32(v), c.kvHeads, c.dim)
			got, gotK := clonePool(a.Paged), padded(k, bwPad)
			kernels.WriteKVRoPE(b, got, a.Layout, kernels.HostF32(gotK), kernels.HostF32(v), c.kvHeads, c.dim, theta)
			CheckExact(t, "rotated k", gotK, wantK)
			checkPool(t, "pool", got, want)
		})
	}
}
