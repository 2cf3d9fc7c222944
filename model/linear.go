package model

import "github.com/x/kernels"

// Forward computes out[M, Out] = x[M, In]·Wᵀ, plus Scaling·(x·Aᵀ)·Bᵀ when
// a LoRA adapter is attached and adapters is true. tmp holds x·Aᵀ, [M, R];
// it is allocated when nil or short (pass it to keep a loop allocation-free).
// It is linearForward, the path every forward takes, on host memory: out,
// x, tmp and the weights are passed as host Buffers (a host backend reads
// them in place; a device backend stages them per op). It reads the host
// fields W, A and B: after training on a device, call the Model's
// DownloadParams first.
func (l *Linear) Forward(b kernels.Backend, out, x []float32, m int, adapters bool, tmp []float32) {
	var u kernels.Buffer
	if a := l.LoRA; a != nil && adapters {
		u = kernels.HostF32(grow(tmp, m*a.R))
	}
	linearForward(b, hostWeights{}, l, kernels.HostF32(out), kernels.HostF32(x), m, adapters, u, kernels.Buffer{})
}
