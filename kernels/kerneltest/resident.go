package kerneltest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// Resident runs the compute ops on operands in the backend's own memory
// (Alloc, Upload), each a view that starts residentPad elements into its
// allocation and ends residentPad before its end, where the other families
// pass host Buffers. A device backend reads those in place (no staging),
// so this is the family that checks its Buffer offsets and that its
// outputs stay inside their views: the padding of every output must still
// be zero afterwards. Results are compared with kernels/ref on host
// copies, with the ops' tolerances.
func Resident(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	rng := newRNG("Resident")
	t.Run("MatMul", func(t *testing.T) {
		for _, dt := range dtypes() {
			const m, n, k = 5, 33, 70
			w := randMat(rng, dt, n, k, 1)
			x := uniform(rng, m*k, 1)
			want := make([]float32, m*n)
			r.MatMul(kernels.HostF32(want), kernels.HostF32(x), w, m, false)
			out := resident(t, b, kernels.HostF32(make([]float32, m*n)))
			b.MatMul(out.view, resident(t, b, kernels.HostF32(x)).view, kernels.MatOf(resident(t, b, w.Data).view, n, k), m, false)
			CheckClose(t, fmt.Sprintf("%v out", dt), out.get(t, b).F32(), want, Tolerance("MatMul"))
		}
	})
	t.Run("Embedding", func(t *testing.T) {
		const v, c = 11, 19
		table := randMat(rng, kernels.BF16, v, c, 1)
		ids := []int32{3, 0, 10, 3, 7, 1}
		want := make([]float32, len(ids)*c)
		r.Embedding(kernels.HostF32(want), table, kernels.HostI32(ids))
		out := resident(t, b, kernels.HostF32(make([]float32, len(want))))
		b.Embedding(out.view, kernels.MatOf(resident(t, b, table.Data).view, v, c), resident(t, b, kernels.HostI32(ids)).view)
		CheckClose(t, "out", out.get(t, b).F32(), want, Tolerance("Embedding"))
	})
	t.Run("RMSNorm", func(t *testing.T) {
		const rows, cols, eps = 4, 37, 1e-6
		x, w := uniform(rng, rows*cols, 1), uniform(rng, cols, 2)
		want := make([]float32, rows*cols)
		r.RMSNorm(kernels.HostF32(want), kernels.HostF32(x), kernels.HostF32(w), rows, cols, eps)
		out := resident(t, b, kernels.HostF32(make([]float32, rows*cols)))
		b.RMSNorm(out.view, resident(t, b, kernels.HostF32(x)).view, resident(t, b, kernels.HostF32(w)).view, rows, cols, eps)
		CheckClose(t, "out", out.get(t, b).F32(), want, Tolerance("RMSNorm"))
	})
	t.Run("LogSoftmaxGather", func(t *testing.T) {
		const rows, v = 3, 45
		x := uniform(rng, rows*v, 4)
		targets := []int32{44, 0, 17}
		wantLP, wantH := make([]float32, rows), make([]float32, rows)
		r.LogSoftmaxGather(kernels.HostF32(wantLP), kernels.HostF32(wantH), kernels.HostF32(x), kernels.HostI32(targets), rows, v)
		lp, h := resident(t, b, kernels.HostF32(make([]float32, rows))), resident(t, b, kernels.HostF32(make([]float32, rows)))
		b.LogSoftmaxGather(lp.view, h.view, resident(t, b, kernels.HostF32(x)).view, resident(t, b, kernels.HostI32(targets)).view, rows, v)
		CheckClose(t, "logp", lp.get(t, b).F32(), wantLP, Tolerance("LogSoftmaxGather"))
		CheckClose(t, "entropy", h.get(t, b).F32(), wantH, Tolerance("Entropy"))
	})
	t.Run("Attention", func(t *testing.T) {
		const heads, kvHeads, d = 4, 2, 16
		data := newAttnData(rng, heads, kvHeads, d, []attnSeq{{5, 2}, {1, 9}}, 1)
		want := data.batch(rng, kvStore{}, true)
		r.Attention(want, heads, kvHeads, d, data.scale())
		host := data.batch(rng, kvStore{bs: 4, dt: kernels.F32}, true)
		dev, out, lse := residentBatch(t, b, host)
		b.Attention(dev, heads, kvHeads, d, data.scale())
		n := want.Layout.N
		CheckClose(t, "out", out.get(t, b).F32()[:n*heads*d], want.Out.F32()[:n*heads*d], Tolerance("Attention"))
		CheckClose(t, "lse", lse.get(t, b).F32()[:n*heads], want.LSE.F32()[:n*heads], Tolerance("AttentionLSE"))
	})
	t.Run("WriteKV", func(t *testing.T) {
		const kvHeads, d = 2, 8
		data := newAttnData(rng, 2, kvHeads, d, []attnSeq{{3, 2}, {1, 6}}, 1)
		host := data.batch(rng, kvStore{bs: 4, dt: kernels.F32}, false)
		k, v := uniform(rng, host.Layout.N*kvHeads*d, 1), uniform(rng, host.Layout.N*kvHeads*d, 1)
		dev, _, _ := residentBatch(t, b, host)
		pool := resident(t, b, host.Paged.Pool)
		dev.Paged.Pool = pool.view
		b.WriteKV(dev.Paged, dev.Layout, resident(t, b, kernels.HostF32(k)).view, resident(t, b, kernels.HostF32(v)).view, kvHeads, d)
		r.WriteKV(host.Paged, host.Layout, kernels.HostF32(k), kernels.HostF32(v), kvHeads, d)
		CheckExact(t, "pool", pool.get(t, b).F32(), host.Paged.Pool.F32())
	})
	t.Run("AdamW", func(t *testing.T) {
		const n = 29
		p := kernels.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
		param, grad := uniform(rng, n, 1), uniform(rng, n, 1)
		want := [3][]float32{clone(param), make([]float32, n), make([]float32, n)}
		r.AdamW(kernels.HostF32(want[0]), kernels.HostF32(grad), kernels.HostF32(want[1]), kernels.HostF32(want[2]), p, 1)
		got := [3]residentBuf{resident(t, b, kernels.HostF32(param)), resident(t, b, kernels.HostF32(make([]float32, n))), resident(t, b, kernels.HostF32(make([]float32, n)))}
		b.AdamW(got[0].view, resident(t, b, kernels.HostF32(grad)).view, got[1].view, got[2].view, p, 1)
		for i, what := range []string{"param", "m", "v"} {
			CheckClose(t, what, got[i].get(t, b).F32(), want[i], Tolerance("AdamW"))
		}
	})
	t.Run("PolicyLoss", func(t *testing.T) {
		var c lossCase
		for _, lc := range lossCases() {
			if lc.name == "gspo" { // Seg, SeqAdv, Mask and the KL term
				c = lc
			}
		}
		require.Equal(t, "gspo", c.name)
		in, n := lossInputs(rng, c, 3)
		want := newLossOutput(n)
		r.PolicyLoss(want.Buffers(), in.Buffers(), c.p, n)
		dev := func(s []float32) kernels.Buffer {
			if s == nil {
				return kernels.Buffer{}
			}
			return resident(t, b, kernels.HostF32(s)).view
		}
		din := kernels.LossInput{LogP: dev(in.LogP), Entropy: dev(in.Entropy), OldLogP: dev(in.OldLogP), RefLogP: dev(in.RefLogP),
			Adv: dev(in.Adv), SeqAdv: dev(in.SeqAdv), Mask: dev(in.Mask), ISRatio: dev(in.ISRatio), Weight: dev(in.Weight)}
		if in.Seg != nil {
			din.Seg = resident(t, b, kernels.HostI32(in.Seg)).view
		}
		loss, dlogp := resident(t, b, kernels.HostF32(make([]float32, n))), resident(t, b, kernels.HostF32(make([]float32, n)))
		b.PolicyLoss(kernels.LossOutput{Loss: loss.view, DLogP: dlogp.view}, din, c.p, n)
		tol := Tolerance("PolicyLoss")
		CheckClose(t, "loss", loss.get(t, b).F32(), want.Loss, tol)
		CheckClose(t, "dlogp", dlogp.get(t, b).F32(), want.DLogP, tol)
	})
	assert.NoError(t, b.Err())
}

// residentBatch copies every Buffer of the host batch a into b's memory
// (see resident) and returns the batch of views, with Out and LSE's.
func residentBatch(t *testing.T, b kernels.Backend, a kernels.AttentionBatch) (dev kernels.AttentionBatch, out, lse residentBuf) {
	t.Helper()
	dev = a
	for _, x := range []*kernels.Buffer{&dev.Layout.QStart, &dev.Layout.Pos, &dev.Q, &dev.K, &dev.V, &dev.KStart, &dev.Paged.Pool, &dev.Paged.Tables} {
		if x.Len() > 0 {
			*x = resident(t, b, *x).view
		}
	}
	out = resident(t, b, a.Out)
	dev.Out = out.view
	if a.LSE.Len() > 0 {
		lse = resident(t, b, a.LSE)
		dev.LSE = lse.view
	}
	return dev, out, lse
}

// residentPad is the number of elements before and after each view of
// Resident in its allocation.
const residentPad = 3

// residentBuf is a view into a larger allocation of a backend.
type residentBuf struct {
	all, view kernels.Buffer
}

// resident allocates h.Len()+2·residentPad elements of h's dtype on b
// (zeroed), uploads h into the middle, and frees the allocation when the
// test ends.
func resident(t *testing.T, b kernels.Backend, h kernels.Buffer) residentBuf {
	t.Helper()
	all, err := b.Alloc(h.DType(), h.Len()+2*residentPad)
	require.NoError(t, err, "Alloc")
	t.Cleanup(func() { b.Free(all) })
	view := all.Slice(residentPad, residentPad+h.Len())
	require.NoError(t, b.Upload(view, h), "Upload")
	return residentBuf{all: all, view: view}
}

// get downloads the view, after checking that the padding around it is
// still zero (the op wrote inside its view only).
func (rb residentBuf) get(t *testing.T, b kernels.Backend) kernels.Buffer {
	t.Helper()
	all := toHost(t, b, rb.all)
	n := rb.view.Len()
	whole := all.F32()
	assert.Equal(t, make([]float32, residentPad), whole[:residentPad], "padding before the view")
	assert.Equal(t, make([]float32, residentPad), whole[residentPad+n:], "padding after the view")
	return kernels.HostF32(whole[residentPad : residentPad+n])
}
