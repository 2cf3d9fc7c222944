package cpu

import "github.com/x/kernels"

// swigluChunk is the number of elements per task of SwiGLUBackward.
const swigluChunk = 1 << 13

// SwiGLUBackward computes dgate and dup of out = silu(gate)·up (see
// ref.Backend.SwiGLUBackward), in float32 with a vector exp, in parallel
// chunks. Element i is read before it is written, so the buffers may alias
// each other element for element (dgate on gate, dup on up).
func (b *Backend) SwiGLUBackward(dgate, dup, dout, gate, up kernels.Buffer) {
	kernels.CheckSwiGLUBackward(dgate, dup, dout, gate, up)
	b.swiGLUBackward(dgate.F32(), dup.F32(), dout.F32(), gate.F32(), up.F32())
}

// swiGLUBackward is SwiGLUBackward on host slices.
func (b *Backend) swiGLUBackward(dgate, dup, dout, gate, up []float32) {
	n := len(dout)
	avx := b.simd.isa()
	chunks := (n + swigluChunk - 1) / swigluChunk
	run := func(lo, hi int) {
		i0, i1 := lo*swigluChunk, min(n, hi*swigluChunk)
		bwSwiGLU(avx, dgate[i0:i1], dup[i0:i1], dout[i0:i1], gate[i0:i1], up[i0:i1])
	}
	if chunks <= 1 {
		run(0, chunks)
		return
	}
	b.parallelFor(chunks, run)
}
