package cpu

import (
	"math"

	"github.com/x/kernels"
)

// adamwChunk is the number of elements per task of AdamW.
const adamwChunk = 1 << 14

// AdamW applies one step of PyTorch's AdamW (see ref.Backend.AdamW) in
// float32, vectorized, over parallel chunks. The per-step scalars
// (bias corrections, step size) are computed once in float64. Every
// element depends only on its own inputs, so the result is deterministic
// and independent of the thread count.
func (b *Backend) AdamW(param, grad, m, v kernels.Buffer, p kernels.AdamWParams, step int) {
	kernels.CheckAdamW(param, grad, m, v, step)
	b.adamW(param.F32(), grad.F32(), m.F32(), v.F32(), p, step)
}

// adamW is AdamW on host slices.
func (b *Backend) adamW(param, grad, m, v []float32, p kernels.AdamWParams, step int) {
	n := len(param)
	b1, b2 := float64(p.Beta1), float64(p.Beta2)
	c := &adamwConsts{
		beta1: p.Beta1, oneMinusBeta1: float32(1 - b1),
		beta2: p.Beta2, oneMinusBeta2: float32(1 - b2),
		decay:      float32(1 - float64(p.LR)*float64(p.WeightDecay)),
		stepSize:   float32(float64(p.LR) / (1 - math.Pow(b1, float64(step)))),
		invSqrtBC2: float32(1 / math.Sqrt(1-math.Pow(b2, float64(step)))),
		eps:        p.Eps,
	}
	avx := b.simd.isa()
	run := func(lo, hi int) {
		i0, i1 := lo*adamwChunk, min(n, hi*adamwChunk)
		bwAdamW(avx, param[i0:i1], grad[i0:i1], m[i0:i1], v[i0:i1], c)
	}
	chunks := (n + adamwChunk - 1) / adamwChunk
	if chunks <= 1 {
		run(0, chunks)
		return
	}
	b.parallelFor(chunks, run)
}
