// Package cpu is the fast CPU Backend: the kernels of kernels/ref computed
// in float32 with SIMD (Go assembly for AVX-512 and for AVX2 + FMA, the
// best the CPU has chosen at run time) and spread over the machine's cores
// by a pool of persistent workers. Without either (or off amd64) every
// kernel runs a portable pure-Go version of itself. All three paths pass
// the same conformance suite (kernels/kerneltest); the tests force each
// path the CPU has.
//
// Conventions (as in kernels.Backend): buffers are row-major float32, the
// shape of each is written next to it, activation gradients are written (=)
// and parameter gradients accumulated (+=). Forward ops live in one file per
// family (matmul.go, rmsnorm.go, ...), backward ops in *_backward.go.
package cpu

import (
	"runtime"

	"github.com/x/kernels"
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
	vecX    []float32   // matVec's permuted x, see gemvVec
	vecExp  bool        // expRowAVX2 equals math.Exp here, see rowExps
	prec    kernels.MatMulPrecision
	xBF16   []float32 // MatMul's x rounded to bf16 under MatMulBF16, see roundedX
	xH      []uint16  // the same as bf16 bits in VDPBF16PS's layout, see bf16Rows
	// invariant is SetBatchInvariant's mode; padX and padOut are its
	// padded last row group.
	invariant    bool
	padX, padOut []float32
}

// New returns a Backend that runs each kernel on threads goroutines (the
// caller's and threads−1 workers it owns); threads ≤ 0 means
// runtime.NumCPU().
func New(threads int) *Backend {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	return &Backend{threads: threads, pool: newPool(threads - 1), simd: detect(), bufs: make([][]float32, threads), vecExp: vecExpExact()}
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

// SIMD names the instruction set the kernels use, the best the CPU has:
// "avx512" (AVX-512 F/BW/VL/DQ), "avx2" (AVX2 + FMA + F16C) or "generic"
// (portable Go throughout, and every non-amd64 machine). On both SIMD paths
// the matmuls, attention's inner loops and the elementwise and backward
// helpers are assembly; the AVX-512 path also has a tiled forward
// attention and a one-pass log-sum-exp that the AVX2 path runs as the
// row-at-a-time loop over its helpers. All three pass the same
// conformance suite. To run a lower path on a machine that has a higher
// one (to measure or debug it), start the program with
// GODEBUG=cpu.avx512f=off (AVX2) or GODEBUG=cpu.avx2=off (generic);
// GODEBUG=cpu.avx512bf16=off keeps kernels.MatMulBF16 off VDPBF16PS (the Go
// runtime then prints "GODEBUG: unknown cpu feature", as the name is not
// one of its own; golang.org/x/sys/cpu, which detect reads, honours it).
func (b *Backend) SIMD() string {
	return b.simd.isa().String()
}

// opt is the host slice of an optional F32 Buffer: nil when it is empty.
func opt(b kernels.Buffer) []float32 {
	if b.Len() == 0 {
		return nil
	}
	return b.F32()
}
