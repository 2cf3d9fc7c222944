package cpu

import "github.com/x/kernels"

// The matrix-vector product of decode at batch 1 (MatMul with M = 1). It
// is bound by reading the weights from memory: each weight is used once,
// and a token reads them all (about 1.2 GB at Qwen3-0.6B in bf16). The
// gemv2 kernels (asm/gen.go) walk one weight row at a time front to back,
// so each core reads a single sequential stream that the hardware
// prefetchers follow; the cores split the rows in guided chunks. Both
// SIMD paths run the AVX2 kernels: on Zen 4 they read 20–30% more weight
// bytes per CPU-second than the same loop on 512-bit registers (see
// BENCHMARKS.md; not measured on an Intel AVX-512 CPU).

// gemvLine is the elements of one line of a gemv kernel (a 64-byte cache
// line of bf16 or f16 weights); gemvHalf is the block of x that gemv2's
// bf16 kernel takes deinterleaved (gemvPermute): 2·8 elements.
//
// gemvRows is the fewest weight rows a core claims at a time: the cores
// split the rows in guided chunks (parallelForGuided), long contiguous
// ranges first and chunks of gemvRows rows at the end, so that on two
// cores the one that finishes first waits for at most a few microseconds.
const (
	gemvRows = 16
	gemvLine = 32
	gemvHalf = 8
)

// matVec sets out[N] (=, or += if accumulate) to w·x for x[K]; w.Cols ≥ 1.
func (b *Backend) matVec(kn mmKernels, out, x []float32, w kernels.Mat, accumulate bool) {
	n, k := w.Rows, w.Cols
	dt, es := dtIndex(w.DType), w.DType.Size()
	lines := k / gemvLine
	xs := x
	if w.DType == kernels.BF16 && lines > 0 {
		xs = b.gemvVec(lines * gemvLine)
		gemvPermute(xs, x[:lines*gemvLine], gemvHalf)
	}
	acc := b2i(accumulate)
	b.parallelForGuided(n, gemvRows, func(j0, j1 int) {
		kn.gemv(dt, &xs[0], rowPtr(w, j0, 0), k*es, lines, &out[j0], j1-j0, acc)
		if lines*gemvLine < k {
			dotTail(out, x, w, 0, 1, j0, j1-j0, lines*gemvLine, k)
		}
	})
}

// gemvPermute writes x deinterleaved per block of 2·half elements (the
// block's even elements, then its odd ones), the order in which the bf16
// gemv2 kernel widens a weight row: a 32-bit lane holds a bf16 pair, and
// shifting or masking it gives the even or the odd weight. len(x) is a
// multiple of 2·half.
func gemvPermute(dst, x []float32, half int) {
	for b := 0; b < len(x); b += 2 * half {
		for i := 0; i < half; i++ {
			dst[b+i] = x[b+2*i]
			dst[b+half+i] = x[b+2*i+1]
		}
	}
}

// gemvVec returns the Backend's buffer for matVec's permuted x, with n
// elements (grown as needed, reused across calls).
func (b *Backend) gemvVec(n int) []float32 {
	if len(b.vecX) < n {
		b.vecX = make([]float32, n)
	}
	return b.vecX[:n]
}
