package cpu

//go:generate go run ./asm -s matmul_amd64.s -go matmul_amd64.go

import (
	"unsafe"

	"github.com/x/kernels"
)

// Matmul tiling. The AVX-512 kernels (asm/gen.go) compute register blocks
// of mr×nr outputs (dotNT: x rows × weight rows, dot-product form, for
// MatMul's torch-Linear layout) or mr×64 outputs (axpy: outer-product form
// for MatMulNN and MatMulTN); the AVX2 kernels do the same with 3-row
// blocks of 8 lanes (see mmKernels). Around them:
//
//   - MatMul with M = 1 (decode at batch 1) is matVec (gemv.go): one
//     weight row at a time, front to back; the cores split N.
//   - MatMul with 1 < M < mBig (batched decode), and on AVX-512 up to
//     M < mDirect (where packing starts to pay for itself), streams
//     bf16/f16/f32 weights straight into the kernel, widening in
//     registers: each weight is read once per group of up to 6 rows of x,
//     and the kernels prefetch the next block's weight rows into L2 (on
//     AVX-512 every group's dotNT; on AVX2 matMulDirect2, dotNT2's blocks
//     plus a prefetch by the first group, whose sums equal dotNT2's bit
//     for bit); the cores split N.
//   - Under kernels.MatMulBF16 with bf16 weights, on a CPU with AVX512_BF16,
//     MatMul with 1 < M < mBig instead rounds x to bf16 once and runs the
//     dpNT kernels (matmul_dp_direct.go): VDPBF16PS straight from the bf16
//     weight rows, blocks of up to dpMR = 8 rows of x × dpNR = 3 weight
//     rows, each weight read once per step of up to 8 sequences; the cores
//     split N in tasks of nbDP rows.
//   - MatMul with M ≥ mBig (AVX2) or M ≥ mDirect (AVX-512) (prefill,
//     training) transposes a block of nbNT weight rows × kc columns into
//     K-major float32 panels once (per worker scratch, L2-resident), then
//     runs the outer-product (axpy) kernel over
//     every row group of its M block; tasks are (N block, M block) pairs
//     (matmul_packed.go). Under kernels.MatMulBF16 on a CPU with AVX512_BF16 the
//     same blocking runs on VDPBF16PS instead: x rounded to bf16 pairs,
//     weight blocks of nbNT rows × dpkc columns packed as bf16
//     K-pair-interleaved panels, the dpaxpy kernels (matmul_dp_packed.go).
//   - MatMulNN and MatMulTN cut the output into (row block, 64-column)
//     tiles and reduce in chunks of pc; each chunk's panel of the second
//     operand (and for TN the dy columns) is first packed contiguous and
//     widened to float32, so it streams from L2 without the L1 aliasing of
//     rows 4 KiB apart.
//
// Every output element's summation order depends only on these constants,
// never on scheduling, so results are deterministic run to run; it does
// depend on M's path (and the size of a row's group), so a row multiplied
// with others can differ in its last bits from the same row alone. In
// batch-invariant mode (SetBatchInvariant, invariant.go) every M runs the
// direct path over groups of exactly mr rows, the last one padded, and a
// row's result depends on the row alone.
// mr, cols and vecSz are the AVX-512 block (attention uses them directly).
const (
	mr      = 6    // rows of x (or dy, or dw) per register block
	nr      = 4    // weight rows per dotNT register block
	nbNT    = 64   // weight rows per MatMul task
	mbNT    = 240  // x rows per MatMul task on the blocked path (a multiple of mr)
	kc      = 1024 // K columns per widened weight block (a multiple of 16)
	mBig    = 16   // M from which the AVX2 path packs weight blocks (MatMulBF16's VDPBF16PS path too)
	mDirect = 112  // on AVX-512, M from which MatMul packs weight blocks (below: the direct dotNT path)
	cols    = 64   // output columns per axpy block (4 zmm)
	pc      = 512  // reduction chunk of MatMulNN and MatMulTN
	mbAx    = 96   // output rows per MatMulNN / MatMulTN task (a multiple of mr)
	cgAx    = 8    // most column blocks per MatMulNN task (they share each dy chunk)
	vecSz   = 16   // float32 lanes per zmm
)

// mmKernels is one instruction set's matmul kernels and block shape.
type mmKernels struct {
	vec  int // float32 lanes per vector
	mr   int // rows per register block
	cols int // columns per axpy block (4 vectors)
	dot  func(dt int, mr, nr int, x *float32, ldx int, w unsafe.Pointer, ldw int, steps int, out *float32, ldo int, acc int)
	axpy func(dt int, mr, nv int, a *float32, sai int, sap int, b unsafe.Pointer, ldb int, steps int, c *float32, ldc int, acc int)
	gemv func(dt int, x *float32, w unsafe.Pointer, ldw int, lines int, out *float32, rows int, acc int) // M = 1, see gemv.go (gemv2 on both paths)
	cvt  [3]func(dst *float32, src *uint16, n int)                                                       // by dtIndex; [0] unused
}

// mm returns the matmul kernels of the best instruction set this Backend
// may use: AVX-512 (6-row blocks of 16 lanes) or AVX2+FMA+F16C (3-row
// blocks of 8 lanes); ok is false when only the portable Go remains.
func (b *Backend) mm() (k mmKernels, ok bool) {
	switch {
	case b.simd.avx512:
		return mmKernels{vec: 16, mr: 6, cols: 64, dot: dotNTAsm, axpy: axpyAsm, gemv: gemv2Asm, cvt: [3]func(*float32, *uint16, int){nil, cvt_bf16, cvt_f16}}, true
	case b.simd.avx2:
		return mmKernels{vec: 8, mr: 3, cols: 32, dot: dotNT2Asm, axpy: axpy2Asm, gemv: gemv2Asm, cvt: [3]func(*float32, *uint16, int){nil, cvt2_bf16, cvt2_f16}}, true
	}
	return mmKernels{}, false
}

// dtIndex is the kernel-table index of a weight dtype.
func dtIndex(d kernels.DType) int {
	switch d {
	case kernels.BF16:
		return 1
	case kernels.F16:
		return 2
	}
	return 0
}

// hostMat panics unless w's data is host memory: the kernels read it
// through unchecked addresses (rowPtr), and a panic inside a worker
// goroutine could not be recovered by the caller, so a device Mat (another
// backend's) is refused here, on the caller's goroutine, naming op.
func hostMat(op string, w kernels.Mat) {
	if !w.Data.Host() {
		panic("kernels/cpu: " + op + ": weight data is device memory, not host memory")
	}
}

// rowPtr points at element (row, col) of w's storage (a host Mat its op
// has checked with hostMat).
func rowPtr(w kernels.Mat, row, col int) unsafe.Pointer {
	return unsafe.Add(w.Data.HostPtr(), (row*w.Cols+col)*w.DType.Size())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// MatMul: out[M,N] (=, or += if accumulate) x[M,K] · wᵀ, w [N,K].
func (b *Backend) MatMul(out, x kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	kernels.CheckMatMul(out, x, w, m)
	hostMat("MatMul", w)
	b.matMul(out.F32(), x.F32(), w, m, accumulate)
}

// matMul is MatMul on host slices.
func (b *Backend) matMul(out, x []float32, w kernels.Mat, m int, accumulate bool) {
	n, k := w.Rows, w.Cols
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		if !accumulate {
			clear(out[:m*n])
		}
		return
	}
	if b.invariant {
		kn, ok := b.mm()
		if b.roundsX(w) {
			x = b.roundedX(x[:m*k])
		}
		if !ok {
			b.matMulGeneric(out, x, w, m, accumulate) // one row at a time: invariant as it is
			return
		}
		b.matMulInvariant(kn, out, x, w, m, accumulate)
		return
	}
	if b.dpDirect(w, m) {
		b.matMulDPDirect(out, x, w, m, accumulate)
		return
	}
	kn, ok := b.mm()
	if b.dpPacked(w, m) {
		b.matMulDPPacked(kn, out, x, w, m, accumulate)
		return
	}
	if b.roundsX(w) {
		x = b.roundedX(x[:m*k])
	}
	switch {
	case !ok:
		b.matMulGeneric(out, x, w, m, accumulate)
	case m == 1:
		b.matVec(kn, out, x, w, accumulate)
	case m < mBig && kn.vec == 8:
		b.matMulDirect2(kn, out, x, w, m, accumulate)
	case m < mBig || (kn.vec == 16 && m < mDirect):
		b.matMulDirect(kn, out, x, w, m, accumulate)
	default:
		b.matMulPacked(kn, out, x, w, m, accumulate)
	}
}

// matMulDirect streams the weights through the widening kernels; the cores
// split N into blocks of nbNT rows.
func (b *Backend) matMulDirect(kn mmKernels, out, x []float32, w kernels.Mat, m int, accumulate bool) {
	n, k := w.Rows, w.Cols
	dt, es := dtIndex(w.DType), w.DType.Size()
	steps := k / kn.vec
	acc := b2i(accumulate)
	blocks := (n + nbNT - 1) / nbNT
	groups := (m + kn.mr - 1) / kn.mr
	b.parallelFor(blocks, func(lo, hi int) {
		for j0 := lo * nbNT; j0 < min(hi*nbNT, n); j0 += nr {
			nrr := min(nr, n-j0)
			for g := 0; g < groups; g++ {
				// Balanced row groups (8 rows as 4+4, not 6+2): the weights
				// are widened once per group, so a thin group wastes them.
				i0 := g * m / groups
				mrr := (g+1)*m/groups - i0
				kn.dot(dt, mrr, nrr, &x[i0*k], k*4, rowPtr(w, j0, 0), k*es, steps, &out[i0*n+j0], n*4, acc)
				if steps*kn.vec < k {
					dotTail(out, x, w, i0, mrr, j0, nrr, steps*kn.vec, k)
				}
			}
		}
	})
}

// widen decodes w[n0:n1, k0:k0+kl] into dst as [n1−n0, kl] float32; kl is
// a multiple of kn.vec.
func widen(kn mmKernels, dst []float32, w kernels.Mat, n0, n1, k0, kl int) {
	if kl == 0 {
		return
	}
	cvt := kn.cvt[dtIndex(w.DType)]
	for j := n0; j < n1; j++ {
		cvt(&dst[(j-n0)*kl], &w.U16()[j*w.Cols+k0], kl)
	}
}

// packPanel copies w[p0:p0+pl, c0:c0+width] into dst as [pl, kn.cols]
// float32 (widening bf16/f16), so the axpy kernel streams a contiguous
// panel instead of rows a power-of-two stride apart (which alias in L1).
func packPanel(kn mmKernels, dst []float32, w kernels.Mat, p0, pl, c0, width int) {
	cvt := kn.cvt[dtIndex(w.DType)]
	for p := 0; p < pl; p++ {
		d := dst[p*kn.cols : p*kn.cols+width]
		if w.DType == kernels.F32 {
			copy(d, w.F32()[(p0+p)*w.Cols+c0:])
		} else {
			cvt(&d[0], &w.U16()[(p0+p)*w.Cols+c0], width)
		}
	}
}

// dotTail adds Σ_{p ∈ [p0,p1)} x[i,p]·w[j,p] to the mr×nr block at (i0, j0).
func dotTail(out, x []float32, w kernels.Mat, i0, mrr, j0, nrr, p0, p1 int) {
	n, k := w.Rows, w.Cols
	for i := i0; i < i0+mrr; i++ {
		for j := j0; j < j0+nrr; j++ {
			var s float32
			for p := p0; p < p1; p++ {
				s += x[i*k+p] * w.At(j, p)
			}
			out[i*n+j] += s
		}
	}
}

// MatMulNN: out[M,K] (=, or += if accumulate) dy[M,N] · w[N,K].
func (b *Backend) MatMulNN(out, dy kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	kernels.CheckMatMulNN(out, dy, w, m)
	hostMat("MatMulNN", w)
	b.matMulNN(out.F32(), dy.F32(), w, m, accumulate)
}

// matMulNN is MatMulNN on host slices.
func (b *Backend) matMulNN(out, dy []float32, w kernels.Mat, m int, accumulate bool) {
	n, k := w.Rows, w.Cols
	if m == 0 || k == 0 {
		return
	}
	if n == 0 {
		if !accumulate {
			clear(out[:m*k])
		}
		return
	}
	kn, ok := b.mm()
	if !ok {
		b.matMulNNGeneric(out, dy, w, m, accumulate)
		return
	}
	k16 := k &^ (kn.vec - 1)
	colBlocks := (k16 + kn.cols - 1) / kn.cols
	mBlocks := (m + mbAx - 1) / mbAx
	// Up to cgAx column blocks per task, but at least 2 tasks per thread.
	cg := max(1, min(cgAx, colBlocks*mBlocks/(2*b.threads)))
	groups := (colBlocks + cg - 1) / cg
	b.parallelForWorker(groups*mBlocks, func(wk, lo, hi int) {
		bp := b.scratch(wk, pc*kn.cols) // the packed, widened panel w[p0:p0+pl, c0:c0+vec·nv]
		for task := lo; task < hi; task++ {
			g0, m0 := (task/mBlocks)*cg*kn.cols, (task%mBlocks)*mbAx
			g1 := min(g0+cg*kn.cols, k16)
			m1 := min(m0+mbAx, m)
			for p0 := 0; p0 < n; p0 += pc {
				pl := min(pc, n-p0)
				acc := b2i(accumulate || p0 > 0)
				// The column blocks of the group reuse this chunk of dy
				// rows from L2; each output element still sums p0 chunks
				// in order, so the grouping leaves results unchanged.
				for c0 := g0; c0 < g1; c0 += kn.cols {
					nv := (min(c0+kn.cols, k16) - c0) / kn.vec
					packPanel(kn, bp, w, p0, pl, c0, nv*kn.vec)
					for i0 := m0; i0 < m1; i0 += kn.mr {
						kn.axpy(0, min(kn.mr, m1-i0), nv, &dy[i0*n+p0], n*4, 4, unsafe.Pointer(&bp[0]), kn.cols*4, pl, &out[i0*k+c0], k*4, acc)
					}
				}
			}
		}
	})
	if k16 < k { // columns past the last full vector
		b.parallelFor(m, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				for c := k16; c < k; c++ {
					var s float32
					for p := 0; p < n; p++ {
						s += dy[i*n+p] * w.At(p, c)
					}
					if accumulate {
						s += out[i*k+c]
					}
					out[i*k+c] = s
				}
			}
		})
	}
}

// MatMulTN: dw[N,K] += dy[M,N]ᵀ · x[M,K].
func (b *Backend) MatMulTN(dw, dy, x kernels.Buffer, m, n, k int) {
	kernels.CheckMatMulTN(dw, dy, x, m, n, k)
	b.matMulTN(dw.F32(), dy.F32(), x.F32(), m, n, k)
}

// matMulTN is MatMulTN on host slices.
func (b *Backend) matMulTN(dw, dy, x []float32, m, n, k int) {
	if m == 0 || n == 0 || k == 0 {
		return
	}
	kn, ok := b.mm()
	if !ok {
		b.matMulTNGeneric(dw, dy, x, m, n, k)
		return
	}
	k16 := k &^ (kn.vec - 1)
	colBlocks := (k16 + kn.cols - 1) / kn.cols
	nBlocks := (n + mbAx - 1) / mbAx
	xm := kernels.MatF32(x, m, k)
	b.parallelForWorker(colBlocks*nBlocks, func(wk, lo, hi int) {
		buf := b.scratch(wk, pc*kn.cols+pc*mbAx)
		bp, ap := buf[:pc*kn.cols], buf[pc*kn.cols:] // packed x[p0:p0+pl, c0:c0+vec·nv] and dy[p0:p0+pl, n0:n1]
		for task := lo; task < hi; task++ {
			c0, n0 := (task/nBlocks)*kn.cols, (task%nBlocks)*mbAx
			nv := (min(c0+kn.cols, k16) - c0) / kn.vec
			n1 := min(n0+mbAx, n)
			nb := n1 - n0
			for p0 := 0; p0 < m; p0 += pc {
				pl := min(pc, m-p0)
				packPanel(kn, bp, xm, p0, pl, c0, nv*kn.vec)
				for p := 0; p < pl; p++ {
					copy(ap[p*nb:(p+1)*nb], dy[(p0+p)*n+n0:(p0+p)*n+n1])
				}
				for j0 := n0; j0 < n1; j0 += kn.mr {
					kn.axpy(0, min(kn.mr, n1-j0), nv, &ap[j0-n0], 4, nb*4, unsafe.Pointer(&bp[0]), kn.cols*4, pl, &dw[j0*k+c0], k*4, 1)
				}
			}
		}
	})
	if k16 < k {
		b.parallelFor(n, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				for c := k16; c < k; c++ {
					var s float32
					for p := 0; p < m; p++ {
						s += dy[p*n+j] * x[p*k+c]
					}
					dw[j*k+c] += s
				}
			}
		})
	}
}
