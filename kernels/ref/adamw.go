package ref

import (
	"math"

	"github.com/x/kernels"
)

// AdamW applies one step of PyTorch's torch.optim.AdamW (non-amsgrad,
// non-maximize) to param[N], in float64 for each element and rounded once
// per stored value:
//
//	param ← param·(1 − lr·wd)                       (decoupled weight decay)
//	m     ← β1·m + (1−β1)·grad
//	v     ← β2·v + (1−β2)·grad²
//	param ← param − lr/(1−β1^step) · m / (sqrt(v)/sqrt(1−β2^step) + eps)
//
// step counts from 1. Each element depends only on its own inputs, so the
// result is deterministic.
func (Backend) AdamW(param, grad, m, v kernels.Buffer, p kernels.AdamWParams, step int) {
	kernels.CheckAdamW(param, grad, m, v, step)
	adamW(param.F32(), grad.F32(), m.F32(), v.F32(), p, step)
}

// adamW is AdamW on host slices.
func adamW(param, grad, m, v []float32, p kernels.AdamWParams, step int) {
	n := len(param)
	lr, b1, b2 := float64(p.LR), float64(p.Beta1), float64(p.Beta2)
	eps, wd := float64(p.Eps), float64(p.WeightDecay)
	bc1 := 1 - math.Pow(b1, float64(step))
	bc2sqrt := math.Sqrt(1 - math.Pow(b2, float64(step)))
	stepSize := lr / bc1
	decay := 1 - lr*wd
	for i := range n {
		g := float64(grad[i])
		mi := b1*float64(m[i]) + (1-b1)*g
		vi := b2*float64(v[i]) + (1-b2)*g*g
		pi := float64(param[i]) * decay
		pi -= stepSize * mi / (math.Sqrt(vi)/bc2sqrt + eps)
		m[i], v[i], param[i] = float32(mi), float32(vi), float32(pi)
	}
}
