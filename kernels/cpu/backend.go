// Package cpu is the fast CPU Backend: the kernels of kernels/ref computed
// in float32 with SIMD (AVX-512 Go assembly, chosen at run time) and spread
// over the machine's cores by a pool of persistent workers. Without
// AVX-512 every kernel runs a portable pure-Go version of itself, which
// passes the same conformance suite (kernels/kerneltest); with AVX2 + FMA
// (no AVX-512) the matmuls use AVX2 assembly.
//
// Conventions (as in kernels.Backend): buffers are row-major float32, the
// shape of each is written next to it, activation gradients are written (=)
// and parameter gradients accumulated (+=). Forward ops live in one file per
// family (matmul.go, rmsnorm.go, ...), backward ops in *_backward.go.
package cpu

import (
	"runtime"

	"github.com/x/kernels"

	"golang.org/x/sys/cpu"
)

// Backend is the fast CPU implementation of kernels.Backend. Create it with
// New and release its workers with Close. Like every Backend, a value is
// for one goroutine at a time; its kernels use all of its threads inside
// each call.
type Backend struct {
	kernels.HostMemory // Buffers are host slices: views and Import copy nothing

	threads int
	pool    *pool
	simd    features
	bufs    [][]float32 // per-worker scratch, see scratch
}

// features records which SIMD paths this Backend may use.
type features struct {
	avx512 bool // AVX-512 F/BW/VL/DQ kernels (f32 FMA, bf16 and f16 widening)
	avx2   bool // AVX2 + FMA + F16C matmul kernels (the rest stays portable Go)
}

// detect reads the CPU's features.
func detect() features {
	return features{
		avx512: cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ,
		avx2:   cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C,
	}
}

// New returns a Backend that runs each kernel on threads goroutines (the
// caller's and threads−1 workers it owns); threads ≤ 0 means
// runtime.NumCPU().
func New(threads int) *Backend {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	return &Backend{threads: threads, pool: newPool(threads - 1), simd: detect(), bufs: make([][]float32, threads)}
}

// scratch returns worker w's scratch buffer with at least n elements. It is
// valid until the current parallelFor job ends; a kernel must not hold two
// scratch buffers of the same worker at once.
func (b *Backend) scratch(w, n int) []float32 {
	if len(b.bufs[w]) < n {
		b.bufs[w] = make([]float32, n)
	}
	return b.bufs[w][:n]
}

// Close stops the Backend's workers and waits for them to exit. Kernels
// called after Close still work, on the calling goroutine only.
func (b *Backend) Close() {
	b.pool.close()
}

// Threads is the number of goroutines each kernel runs on.
func (b *Backend) Threads() int { return b.threads }

// SIMD names the instruction set the kernels use: "avx512", "avx2" (the
// matmuls only; other kernels portable Go) or "generic".
func (b *Backend) SIMD() string {
	switch {
	case b.simd.avx512:
		return "avx512"
	case b.simd.avx2:
		return "avx2"
	}
	return "generic"
}
