package model

import (
	"fmt"

	"github.com/x/kernels"
)

// Forward computes out[M, Out] = x[M, In]·Wᵀ, plus Scaling·(x·Aᵀ)·Bᵀ when
// a LoRA adapter is attached and adapters is true. tmp holds x·Aᵀ, [M, R];
// it is allocated when nil or short (pass it to keep a loop allocation-free).
func (l *Linear) Forward(b kernels.Backend, out, x []float32, m int, adapters bool, tmp []float32) {
	b.MatMul(out, x, l.W, m, false)
	if l.LoRA == nil || !adapters {
		return
	}
	a := l.LoRA
	if len(a.A) < a.R*l.In() || len(a.B) < l.Out()*a.R {
		panic(fmt.Sprintf("model: Linear.Forward: LoRA r=%d does not fit A %d, B %d for W [%d,%d]", a.R, len(a.A), len(a.B), l.Out(), l.In()))
	}
	if len(tmp) < m*a.R {
		tmp = make([]float32, m*a.R)
	}
	tmp = tmp[:m*a.R]
	b.MatMul(tmp, x, kernels.MatF32(a.A, a.R, l.In()), m, false)
	b.Scale(tmp, a.Scaling)
	b.MatMul(out, tmp, kernels.MatF32(a.B, l.Out(), a.R), m, true)
}
