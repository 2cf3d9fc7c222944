//go:build cuda

package cuda

import (
	"gorgonia.org/cu"

	"github.com/x/kernels"
)

// The GEMMs of Device: matmul.cu's kernels with the plans of plan_gemm.go
// (the host build's, host_gemm.go), the split-K workspace a temporary
// block of the session.

// MatMul is out[M,N] (=, +=) x[M,K]·wᵀ: bf16 weights on the tensor cores at
// the Device's matmul precision, f32 and f16 weights on CUDA cores.
func (d *Device) MatMul(out, x kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	const op = "MatMul"
	kernels.CheckMatMul(out, x, w, m)
	n, k := w.Rows, w.Cols
	d.gemmW(op, out.Slice(0, m*n), x.Slice(0, m*k), w, m, n, k, true, d.prec.terms(), accumulate)
}

// MatMulNN is out[M,K] (=, +=) dy[M,N]·w[N,K] (exact).
func (d *Device) MatMulNN(out, dy kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	const op = "MatMulNN"
	kernels.CheckMatMulNN(out, dy, w, m)
	n, k := w.Rows, w.Cols
	d.gemmW(op, out.Slice(0, m*k), dy.Slice(0, m*n), w, m, k, n, false, termsExact, accumulate)
}

// MatMulTN is dw[N,K] += dy[M,N]ᵀ·x[M,K], split over M when N·K is small
// (LoRA gradients).
func (d *Device) MatMulTN(dw, dy, x kernels.Buffer, m, n, k int) {
	const op = "MatMulTN"
	kernels.CheckMatMulTN(dw, dy, x, m, n, k)
	if n == 0 || k == 0 {
		return
	}
	p := gemmF32Plan(n, k, m, true)
	d.launchOp(op, func(s *session) {
		pdw, pdy, px := s.buf(op, dw.Slice(0, n*k), true), s.buf(op, dy.Slice(0, m*n), false), s.buf(op, x.Slice(0, m*k), false)
		s.gemmTN(p, pdw, s.alloc(int64(p.ws(n, k))*4), pdy, px, m, n, k)
	})
}

// gemmTN launches dw[N,K] += dy[M,N]ᵀ·x[M,K] on device memory with plan p
// (gemmF32Plan(n, k, m, true)) and its split-K reduction through ws.
func (s *session) gemmTN(p gemmPlan, pdw, ws, pdy, px cu.DevicePtr, m, n, k int) {
	s.launch("gemm_f32", p.d, argsOf().ptr(pdw).ptr(ws).ptr(pdy).i64(1).i64(n).ptr(px).i32(int(kernels.F32)).
		i64(k).i64(1).i32(n).i32(k).i32(m).i32(1).i32(p.splits))
	s.splitkReduce(p, pdw, ws, n*k, 1)
}

// gemmW is out[I,J] (=, +=) a[I,R]·B with B = wᵀ (wt, w is [J,R]) or w
// (w is [R,J]).
func (d *Device) gemmW(op string, out, a kernels.Buffer, w kernels.Mat, i, j, r int, wt bool, terms int, accumulate bool) {
	if i == 0 || j == 0 {
		return
	}
	acc := 0
	if accumulate {
		acc = 1
	}
	d.launchOp(op, func(s *session) {
		po, pa, pw := s.out(op, out, accumulate), s.buf(op, a, false), s.mat(op, w) // every element written
		if w.DType != kernels.BF16 {
			sbr, sbj := j, 1
			if wt {
				sbr, sbj = 1, r
			}
			// MatMul stays unsplit: one thread per output, r ascending, for any M.
			p := gemmF32Plan(i, j, r, !wt)
			ws := s.alloc(int64(p.ws(i, j)) * 4)
			s.launch("gemm_f32", p.d, argsOf().ptr(po).ptr(ws).ptr(pa).i64(r).i64(1).ptr(pw).i32(int(w.DType)).
				i64(sbr).i64(sbj).i32(i).i32(j).i32(r).i32(acc).i32(p.splits))
			s.splitkReduce(p, po, ws, i*j, acc)
			return
		}
		v := gemmBF16Variant(i, wt, terms)
		p := gemmBF16Plan(i, j, r, v)
		s.gemmBF16(op, p, v, po, s.alloc(int64(p.ws(i, j))*4), pa, pw, i, j, r, acc)
	})
}

// gemmBF16 launches the gemm_bf16 kernel of variant v with plan p for
// out[I,J] (=, += when acc is 1) a[I,R]·B on device memory, and its
// split-K reduction through ws (p.ws(i, j) floats).
func (s *session) gemmBF16(op string, p gemmPlan, v gemmVariant, po, ws, pa, pw cu.DevicePtr, i, j, r int, acc int) {
	var name string
	switch v {
	case gemmVariant{large: false, wt: true, terms: termsBF16}:
		name = "gemm_bf16_s_wt_x1"
	case gemmVariant{large: false, wt: true, terms: termsExact}:
		name = "gemm_bf16_s_wt_x3"
	case gemmVariant{large: true, wt: true, terms: termsBF16}:
		name = "gemm_bf16_l_wt_x1"
	case gemmVariant{large: true, wt: true, terms: termsExact}:
		name = "gemm_bf16_l_wt_x3"
	case gemmVariant{large: false, wt: false, terms: termsExact}:
		name = "gemm_bf16_s_wn_x3"
	case gemmVariant{large: true, wt: false, terms: termsExact}:
		name = "gemm_bf16_l_wn_x3"
	default:
		panic("kernels/cuda: " + op + ": no gemm_bf16 kernel for this precision")
	}
	s.launch(name, p.d, argsOf().ptr(po).ptr(ws).ptr(pa).ptr(pw).i32(i).i32(j).i32(r).i32(acc).i32(p.splits))
	s.splitkReduce(p, po, ws, i*j, acc)
}

// splitkReduce adds p's partials in ws into out (n floats) when p splits.
func (s *session) splitkReduce(p gemmPlan, out, ws cu.DevicePtr, n, acc int) {
	if p.splits == 1 {
		return
	}
	s.launch("gemm_splitk_reduce", reducePlan(n), argsOf().ptr(out).ptr(ws).i64(n).i32(p.parts).i32(acc))
}
