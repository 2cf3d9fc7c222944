//go:build cudahost

package cuda

/*
#include "host.h"
*/
import "C"

import (
	"unsafe"

	"github.com/x/kernels"
)

// The GEMMs of Host: matmul.cu's kernels through the SIMT shim, with the
// plans of plan_gemm.go (the device launcher's, device_gemm_cuda.go).

// MatMul is out[M,N] (=, +=) x[M,K]·wᵀ: bf16 weights on the (emulated)
// tensor cores at the Host's matmul precision, f32 and f16 weights on CUDA
// cores.
func (h *Host) MatMul(out, x kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	const op = "MatMul"
	kernels.CheckMatMul(out, x, w, m)
	n, k := w.Rows, w.Cols
	h.gemmW(op, out.F32(), x.F32(), w, m, n, k, true, h.prec.terms(), accumulate)
}

// MatMulNN is out[M,K] (=, +=) dy[M,N]·w[N,K] (exact).
func (h *Host) MatMulNN(out, dy kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	const op = "MatMulNN"
	kernels.CheckMatMulNN(out, dy, w, m)
	n, k := w.Rows, w.Cols
	h.gemmW(op, out.F32(), dy.F32(), w, m, k, n, false, termsExact, accumulate)
}

// MatMulTN is dw[N,K] += dy[M,N]ᵀ·x[M,K], split over M when N·K is small
// (LoRA gradients).
func (h *Host) MatMulTN(dw, dy, x kernels.Buffer, m, n, k int) {
	const op = "MatMulTN"
	kernels.CheckMatMulTN(dw, dy, x, m, n, k)
	if n == 0 || k == 0 {
		return
	}
	p := gemmF32Plan(n, k, m, true)
	h.gemmF32(op, p, dw.F32(), dy.F32(), 1, n, unsafe.Pointer(f32p(x.F32())), int(kernels.F32), k, 1, n, k, m, 1)
}

// cbool is b as the kernels' int flag.
func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// gemmW is out[I,J] (=, +=) a[I,R]·B with B = wᵀ (wt, w is [J,R]) or w
// (w is [R,J]).
func (h *Host) gemmW(op string, out, a []float32, w kernels.Mat, i, j, r int, wt bool, terms int, accumulate bool) {
	if i == 0 || j == 0 {
		return
	}
	if w.DType != kernels.BF16 {
		sbr, sbj := j, 1 // w is [R,J]: B(r, j) = w[r·J + j]
		if wt {
			sbr, sbj = 1, r // w is [J,R]: B(r, j) = w[j·R + r]
		}
		// MatMul stays unsplit: one thread per output, r ascending, for any M.
		p := gemmF32Plan(i, j, r, !wt)
		h.gemmF32(op, p, out, a, r, 1, matData(w), int(w.DType), sbr, sbj, i, j, r, cbool(accumulate))
		return
	}
	v := gemmBF16Variant(i, wt, terms)
	p := gemmBF16Plan(i, j, r, v)
	var ws []float32
	if p.splits > 1 {
		ws = make([]float32, p.ws(i, j))
	}
	d, acc := p.d, cbool(accumulate)
	args := func(launch func(gx, gy, gz, bx, by, bz C.uint, workers C.int, out, ws, a *C.float, w *C.uint16_t, i, j, r, acc, splits C.int) *C.char) {
		launched(op, launch(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
			f32p(out), f32p(ws), f32p(a), u16p(w.U16()), C.int(i), C.int(j), C.int(r), acc, C.int(p.splits)))
	}
	switch v {
	case gemmVariant{large: false, wt: true, terms: termsBF16}:
		args(hostGemmSWtX1)
	case gemmVariant{large: false, wt: true, terms: termsExact}:
		args(hostGemmSWtX3)
	case gemmVariant{large: true, wt: true, terms: termsBF16}:
		args(hostGemmLWtX1)
	case gemmVariant{large: true, wt: true, terms: termsExact}:
		args(hostGemmLWtX3)
	case gemmVariant{large: false, wt: false, terms: termsExact}:
		args(hostGemmSWnX3)
	case gemmVariant{large: true, wt: false, terms: termsExact}:
		args(hostGemmLWnX3)
	default:
		panic("kernels/cuda: " + op + ": no gemm_bf16 kernel for this precision")
	}
	if p.splits > 1 {
		h.splitkReduce(op, out, ws, i*j, p.parts, acc)
	}
}

// The gemm_bf16_* host entries as Go functions of one signature.
func hostGemmSWtX1(gx, gy, gz, bx, by, bz C.uint, workers C.int, out, ws, a *C.float, w *C.uint16_t, i, j, r, acc, splits C.int) *C.char {
	return C.host_gemm_bf16_s_wt_x1(gx, gy, gz, bx, by, bz, workers, out, ws, a, w, i, j, r, acc, splits)
}
func hostGemmSWtX3(gx, gy, gz, bx, by, bz C.uint, workers C.int, out, ws, a *C.float, w *C.uint16_t, i, j, r, acc, splits C.int) *C.char {
	return C.host_gemm_bf16_s_wt_x3(gx, gy, gz, bx, by, bz, workers, out, ws, a, w, i, j, r, acc, splits)
}
func hostGemmLWtX1(gx, gy, gz, bx, by, bz C.uint, workers C.int, out, ws, a *C.float, w *C.uint16_t, i, j, r, acc, splits C.int) *C.char {
	return C.host_gemm_bf16_l_wt_x1(gx, gy, gz, bx, by, bz, workers, out, ws, a, w, i, j, r, acc, splits)
}
func hostGemmLWtX3(gx, gy, gz, bx, by, bz C.uint, workers C.int, out, ws, a *C.float, w *C.uint16_t, i, j, r, acc, splits C.int) *C.char {
	return C.host_gemm_bf16_l_wt_x3(gx, gy, gz, bx, by, bz, workers, out, ws, a, w, i, j, r, acc, splits)
}
func hostGemmSWnX3(gx, gy, gz, bx, by, bz C.uint, workers C.int, out, ws, a *C.float, w *C.uint16_t, i, j, r, acc, splits C.int) *C.char {
	return C.host_gemm_bf16_s_wn_x3(gx, gy, gz, bx, by, bz, workers, out, ws, a, w, i, j, r, acc, splits)
}
func hostGemmLWnX3(gx, gy, gz, bx, by, bz C.uint, workers C.int, out, ws, a *C.float, w *C.uint16_t, i, j, r, acc, splits C.int) *C.char {
	return C.host_gemm_bf16_l_wn_x3(gx, gy, gz, bx, by, bz, workers, out, ws, a, w, i, j, r, acc, splits)
}

// gemmF32 launches gemm_f32 with plan p, then the split-K reduction.
func (h *Host) gemmF32(op string, p gemmPlan, out, a []float32, sai, sar int, b unsafe.Pointer, bdt, sbr, sbj, i, j, r int, acc C.int) {
	var ws []float32
	if p.splits > 1 {
		ws = make([]float32, p.ws(i, j))
	}
	d := p.d
	launched(op, C.host_gemm_f32(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(out), f32p(ws), f32p(a), C.long(sai), C.long(sar), b, C.int(bdt), C.long(sbr), C.long(sbj), C.int(i), C.int(j), C.int(r), acc, C.int(p.splits)))
	if p.splits > 1 {
		h.splitkReduce(op, out, ws, i*j, p.parts, acc)
	}
}

// splitkReduce adds parts partials of n floats from ws into out.
func (h *Host) splitkReduce(op string, out, ws []float32, n, parts int, acc C.int) {
	d := reducePlan(n)
	launched(op, C.host_gemm_splitk_reduce(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(out), f32p(ws), C.long(n), C.int(parts), acc))
}

// gemmBF16SmemKernel is matmul.cu's TC::kSmem for v (for the check of
// plan_gemm.go's copy).
func gemmBF16SmemKernel(v gemmVariant) int {
	return int(C.host_gemm_bf16_smem(cbool(v.large), cbool(v.wt), C.int(v.terms)))
}
