package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
)

// TestForwardThreadCountIndependent checks that the forward kernels' sums
// run in an order fixed by the tiling, not by the scheduling: one, two and
// three threads give bitwise the same outputs, on every SIMD path.
func TestForwardThreadCountIndependent(t *testing.T) {
	forEachPath(t, forwardThreadCountIndependent)
}

func forwardThreadCountIndependent(t *testing.T, p simdPath) {
	bs := []*Backend{pathBackend(t, p, 1), pathBackend(t, p, 2), pathBackend(t, p, 3)}
	r := rand.New(rand.NewPCG(7, 8))
	vec := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	const m, n, k = 70, 150, 1100 // blocked MatMul path, several K chunks, ragged tiles
	u := make([]uint16, n*k)
	for i := range u {
		u[i] = kernels.F32ToBF16(float32(r.NormFloat64()))
	}
	w := kernels.MatBF16(u, n, k)
	x, dy := vec(m*k), vec(m*n)
	const heads, kvh, d, T, start = 8, 2, 64, 40, 30
	q, kk, v := vec(T*heads*d), vec((start+T)*kvh*d), vec((start+T)*kvh*d)
	const rows, vocab = 3, 5000
	logits := vec(rows * vocab)
	targets := []int32{1, 4999, 77}

	run := func(b *Backend) map[string][]float32 {
		res := map[string][]float32{}
		out := make([]float32, m*n)
		b.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, false)
		res["MatMul"] = out
		out = make([]float32, 5*n)
		b.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, 5, false) // the direct (decode) path
		res["MatMulDirect"] = out
		out = make([]float32, m*k)
		b.MatMulNN(kernels.HostF32(out), kernels.HostF32(dy), w, m, false)
		res["MatMulNN"] = out
		out = make([]float32, n*k)
		b.MatMulTN(kernels.HostF32(out), kernels.HostF32(dy), kernels.HostF32(x), m, n, k)
		res["MatMulTN"] = out
		s := kernels.OneSeq(q, make([]float32, T*heads*d), make([]float32, T*heads), kk, v, T, start)
		b.Attention(s, heads, kvh, d, 0.125)
		res["Attention"], res["AttentionLSE"] = s.Out.F32(), s.LSE.F32()
		lp, h := make([]float32, rows), make([]float32, rows)
		b.LogSoftmaxGather(kernels.HostF32(lp), kernels.HostF32(h), kernels.HostF32(logits), kernels.HostI32(targets), rows, vocab)
		res["LogSoftmaxGather"], res["Entropy"] = lp, h
		return res
	}
	want := run(bs[0])
	for _, b := range bs[1:] {
		got := run(b)
		for name, w := range want {
			t.Run(fmt.Sprintf("%s_threads%d", name, b.Threads()), func(t *testing.T) {
				kerneltest.CheckExact(t, name, got[name], w)
			})
		}
	}
}
