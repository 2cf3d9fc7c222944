package model

import "github.com/x/kernels"

// Forward computes out[M, Out] = x[M, In]·Wᵀ, plus Scaling·(x·Aᵀ)·Bᵀ when
// a LoRA adapter is attached and adapters is true. tmp holds x·Aᵀ, [M, R];
// it is allocated when nil or short (pass it to keep a loop allocation-free).
// It is linearForward, the path every forward takes.
func (l *Linear) Forward(b kernels.Backend, out, x []float32, m int, adapters bool, tmp []float32) {
	linearForward(b, l, out, x, m, adapters, &tmp, nil)
}
