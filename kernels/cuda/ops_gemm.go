package cuda

import (
	"github.com/x/kernels"
)

// The GEMMs of Device: matmul.cu's kernels with the plans of plan_gemm.go.
// A split GEMM's workspace is op scratch.

// MatMul is out[M,N] (=, +=) x[M,K]·wᵀ: bf16 weights on the tensor cores at
// the Device's matmul precision (precision.go), f32 and f16 weights on
// CUDA cores. Each row's result is independent of M (matmul.cu).
func (d *Device) MatMul(out, x kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	const op = "MatMul"
	kernels.CheckMatMul(out, x, w, m)
	n, k := w.Rows, w.Cols
	d.gemmW(op, out.Slice(0, m*n), x.Slice(0, m*k), w, m, n, k, true, gemmTerms(d.prec), accumulate)
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
	s := d.begin(op)
	pdw, pdy, px := s.inout(dw.Slice(0, n*k)), s.in(dy.Slice(0, m*n)), s.in(x.Slice(0, m*k))
	p := gemmF32Plan(n, k, m, true)
	ws := s.scratch(int64(p.ws(n, k)) * 4)
	s.launch("gemm_f32", p.d, argsOf().ptr(pdw).ptr(ws).ptr(pdy).i64(1).i64(n).ptr(px).i32(int(kernels.F32)).
		i64(k).i64(1).i32(n).i32(k).i32(m).i32(1).i32(p.splits))
	s.splitkReduce(p, pdw, ws, n*k, 1)
	s.end()
}

// gemmW is out[I,J] (=, +=) a[I,R]·B with B = wᵀ (wt: w is [J,R]) or w (w
// is [R,J]), bf16 weights with terms activation terms.
func (d *Device) gemmW(op string, out, a kernels.Buffer, w kernels.Mat, i, j, r int, wt bool, terms int, accumulate bool) {
	if i == 0 || j == 0 {
		return
	}
	s := d.begin(op)
	po := s.out(out) // every element written
	if accumulate {
		po = s.inout(out)
	}
	pa, pw := s.in(a), s.mat(w)
	acc := 0
	if accumulate {
		acc = 1
	}
	if w.DType != kernels.BF16 {
		sbr, sbj := j, 1 // w is [R,J]: B(r, j) = w[r·J + j]
		if wt {
			sbr, sbj = 1, r // w is [J,R]: B(r, j) = w[j·R + r]
		}
		// Unsplit: one thread per output, r ascending, for any M. MatMulNN
		// too: the model's training forward adds a LoRA update with
		// MatMulNN (u·Bᵀ with Bᵀ [R, Out]) where inference uses MatMul
		// (u·B with B [Out, R]); both then compute the same sum.
		p := gemmF32Plan(i, j, r, false)
		ws := s.scratch(int64(p.ws(i, j)) * 4)
		s.launch("gemm_f32", p.d, argsOf().ptr(po).ptr(ws).ptr(pa).i64(r).i64(1).ptr(pw).i32(int(w.DType)).
			i64(sbr).i64(sbj).i32(i).i32(j).i32(r).i32(acc).i32(p.splits))
		s.splitkReduce(p, po, ws, i*j, acc)
		s.end()
		return
	}
	v := gemmBF16Variant(i, wt, terms)
	p := gemmBF16Plan(i, j, r, v)
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
	ws := s.scratch(int64(p.ws(i, j)) * 4)
	s.launchWith(name, p.d, p.smem, argsOf().ptr(po).ptr(ws).ptr(pa).ptr(pw).i32(i).i32(j).i32(r).i32(acc).i32(p.splits))
	s.splitkReduce(p, po, ws, i*j, acc)
	s.end()
}

// splitkReduce adds p's partials in ws into out (n floats) when p splits.
func (s *session) splitkReduce(p gemmPlan, out, ws devptr, n, acc int) {
	if p.splits == 1 {
		return
	}
	s.launch("gemm_splitk_reduce", reducePlan(n), argsOf().ptr(out).ptr(ws).i64(n).i32(p.parts).i32(acc))
}

var _ kernels.MatMulManyer = (*Device)(nil)

// MatMulMany is outs[i] = x·ws[i]ᵀ for every i (kernels.MatMulManyer): with
// bf16 weights one launch (gemm_bf16_*_multi: the GEMMs' tiles side by
// side, each output element computed as MatMul computes it), otherwise
// one MatMul per weight. The multi launch reads a descriptor of its GEMMs
// (session.value: uploaded, or while a graph is captured written by a
// store_words launch).
func (d *Device) MatMulMany(outs []kernels.Buffer, x kernels.Buffer, ws []kernels.Mat, m int) {
	const op = "MatMulMany"
	kernels.CheckMatMulMany(outs, x, ws, m)
	for _, w := range ws {
		if w.DType != kernels.BF16 {
			for i := range ws {
				d.MatMul(outs[i], x, ws[i], m, false)
			}
			return
		}
	}
	if m == 0 || len(ws) == 0 {
		return
	}
	k := ws[0].Cols
	js := make([]int, len(ws))
	width := 0
	for i, w := range ws {
		js[i] = w.Rows
		width += w.Rows
	}
	v := gemmBF16Variant(m, true, gemmTerms(d.prec))
	p, tile0 := gemmBF16MultiPlan(m, js, k, v)
	s := d.begin(op)
	pa := s.in(x.Slice(0, m*k))
	ws0 := s.scratch(int64(p.ws(m, width)) * 4)
	parts := make([]gemmPart, len(ws))
	off := 0
	for i, w := range ws {
		parts[i] = gemmPart{out: uintptr(s.out(outs[i].Slice(0, m*w.Rows))), w: uintptr(s.mat(w)), j: int64(w.Rows), tile0: int64(tile0[i])}
		if ws0 != 0 {
			parts[i].ws = uintptr(ws0) + uintptr(p.parts*m*off*4)
		}
		off += w.Rows
	}
	pp := s.value(bytesOf(parts))
	var name string
	switch v {
	case gemmVariant{large: false, wt: true, terms: termsBF16}:
		name = "gemm_bf16_s_multi_x1"
	case gemmVariant{large: false, wt: true, terms: termsExact}:
		name = "gemm_bf16_s_multi_x3"
	case gemmVariant{large: true, wt: true, terms: termsBF16}:
		name = "gemm_bf16_l_multi_x1"
	case gemmVariant{large: true, wt: true, terms: termsExact}:
		name = "gemm_bf16_l_multi_x3"
	default:
		panic("kernels/cuda: " + op + ": no gemm_bf16 kernel for this precision")
	}
	s.launchWith(name, p.d, p.smem, argsOf().ptr(pp).i32(len(parts)).ptr(pa).i32(m).i32(k).i32(p.splits))
	if p.splits > 1 {
		s.launch("gemm_splitk_reduce_multi", reducePlan(m*width), argsOf().ptr(pp).i32(len(parts)).i32(m).i32(p.parts))
	}
	s.end()
}
