package cuda

import (
	"math"

	"github.com/x/kernels"
)

// The compute ops of Device. Each one, in the same shape:
//
//	func (d *Device) Op(...) {
//		const op = "Op"
//		kernels.CheckOp(...)            // the shared shape rules (panic)
//		if <nothing to do> { return }
//		s := d.begin(op)                // skipped if the Device has failed
//		p := s.in(x), s.inout(out) ...  // device addresses (host Buffers staged)
//		s.launch("kernel", plan(...), argsOf().ptr(p).i32(n)...)
//		s.end()                         // staged outputs back, scratch freed, error recorded
//	}
//
// Adding a kernel: write it in its family's .cu file (KERNEL, conventions
// comment at the top), add it to host.cc's kernel table (HOST_KERNEL),
// give it a plan in plan.go if none fits, launch it from its op as above
// with the arguments in the order of its C signature, and run `make
// cuda-kernels`. The argument chain is checked against the signature
// twice: statically by TestKernelABI (every go test), and at every launch
// by the host twin (make cudahost). Kernels that index with data take a
// status slot (status.go) and report bad indices there instead of reading
// out of bounds.

// Embedding is out[T,C] = table[ids[t], :]; device ids out of range are
// reported at the next sync point.
func (d *Device) Embedding(out kernels.Buffer, table kernels.Mat, ids kernels.Buffer) {
	const op = "Embedding"
	kernels.CheckEmbedding(out, table, ids)
	t, c := ids.Len(), table.Cols
	if t == 0 || c == 0 {
		return
	}
	s := d.begin(op)
	po, pt, pi := s.inout(out.Slice(0, t*c)), s.mat(table), s.in(ids)
	s.launch("embedding_forward", rowPlan(t, 256), argsOf().ptr(po).ptr(pt).i32(int(table.DType)).ptr(pi).
		i32(t).i32(c).i32(table.Rows).ptr(d.slot(stEmbedding)))
	s.end()
}

// EmbeddingBackward is dtable[V,C] row ids[t] += dout[t, :].
func (d *Device) EmbeddingBackward(dtable, dout, ids kernels.Buffer, c int) {
	const op = "EmbeddingBackward"
	kernels.CheckEmbeddingBackward(dtable, dout, ids, c)
	t := ids.Len()
	if t == 0 {
		return
	}
	s := d.begin(op)
	pt, po, pi := s.inout(dtable), s.in(dout.Slice(0, t*c)), s.in(ids)
	s.launch("embedding_backward", columnPlan(c), argsOf().ptr(pt).ptr(po).ptr(pi).i32(t).i32(c).i32(dtable.Len()/c).
		ptr(d.slot(stEmbeddingBackward)))
	s.end()
}

// RMSNorm is out[R,C] = w·x/√(mean(x²)+eps) per row.
func (d *Device) RMSNorm(out, x, w kernels.Buffer, rows, cols int, eps float32) {
	const op = "RMSNorm"
	kernels.CheckRMSNorm(out, x, w, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	s := d.begin(op)
	px, pw := s.in(x.Slice(0, rows*cols)), s.in(w.Slice(0, cols))
	po := s.inout(out.Slice(0, rows*cols))
	s.launch("rmsnorm_forward", rowPlan(rows, 256), argsOf().ptr(po).ptr(px).ptr(pw).i32(rows).i32(cols).f32(eps))
	s.end()
}

// RMSNormBackward writes dx[R,C] and accumulates dw[C].
func (d *Device) RMSNormBackward(dx, dw, dout, x, w kernels.Buffer, rows, cols int, eps float32) {
	const op = "RMSNormBackward"
	kernels.CheckRMSNormBackward(dx, dw, dout, x, w, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	rc := rows * cols
	s := d.begin(op)
	pdout, px, pw := s.in(dout.Slice(0, rc)), s.in(x.Slice(0, rc)), s.in(w.Slice(0, cols))
	pdx, pdw := s.inout(dx.Slice(0, rc)), s.inout(dw.Slice(0, cols))
	rstd := s.scratch(int64(rows) * 4)
	s.launch("rmsnorm_backward_dx", rowPlan(rows, 256), argsOf().ptr(pdx).ptr(rstd).ptr(pdout).ptr(px).ptr(pw).i32(rows).i32(cols).f32(eps))
	s.launch("rmsnorm_backward_dw", columnPlan(cols), argsOf().ptr(pdw).ptr(pdout).ptr(px).ptr(rstd).i32(rows).i32(cols))
	s.end()
}

// RoPE rotates x[T,H,D] in place (rotate-half convention).
func (d *Device) RoPE(x, pos kernels.Buffer, heads, headDim int, theta float64) {
	d.rope("RoPE", x, pos, heads, headDim, theta, 1)
}

// RoPEBackward applies the inverse rotation to dx[T,H,D] in place.
func (d *Device) RoPEBackward(dx, pos kernels.Buffer, heads, headDim int, theta float64) {
	d.rope("RoPEBackward", dx, pos, heads, headDim, theta, -1)
}

func (d *Device) rope(op string, x, pos kernels.Buffer, heads, headDim int, theta, sign float64) {
	kernels.CheckRoPE(op, x, pos, heads, headDim)
	t := pos.Len()
	if t == 0 || heads == 0 || headDim == 0 {
		return
	}
	s := d.begin(op)
	px, pp := s.inout(x.Slice(0, t*heads*headDim)), s.in(pos)
	s.launch("rope_f32", columnPlan(t*headDim/2), argsOf().ptr(px).ptr(pp).i32(t).i32(heads).i32(headDim).f64(theta).f64(sign))
	s.end()
}

// SwiGLU is out[N] = silu(gate)·up.
func (d *Device) SwiGLU(out, gate, up kernels.Buffer) {
	const op = "SwiGLU"
	kernels.CheckSwiGLU(out, gate, up)
	n := out.Len()
	if n == 0 {
		return
	}
	s := d.begin(op)
	pg, pu := s.in(gate.Slice(0, n)), s.in(up.Slice(0, n))
	po := s.inout(out)
	s.launch("swiglu_forward", elementwisePlan(n), argsOf().ptr(po).ptr(pg).ptr(pu).i64(n))
	s.end()
}

// SwiGLUBackward writes dgate[N] and dup[N].
func (d *Device) SwiGLUBackward(dgate, dup, dout, gate, up kernels.Buffer) {
	const op = "SwiGLUBackward"
	kernels.CheckSwiGLUBackward(dgate, dup, dout, gate, up)
	n := dout.Len()
	if n == 0 {
		return
	}
	s := d.begin(op)
	pdo, pg, pu := s.in(dout), s.in(gate.Slice(0, n)), s.in(up.Slice(0, n))
	pdg, pdu := s.inout(dgate.Slice(0, n)), s.inout(dup.Slice(0, n))
	s.launch("swiglu_backward", elementwisePlan(n), argsOf().ptr(pdg).ptr(pdu).ptr(pdo).ptr(pg).ptr(pu).i64(n))
	s.end()
}

// Add is dst[N] += src[N].
func (d *Device) Add(dst, src kernels.Buffer) {
	const op = "Add"
	kernels.CheckAdd(dst, src)
	n := dst.Len()
	if n == 0 {
		return
	}
	s := d.begin(op)
	pd, ps := s.inout(dst), s.in(src.Slice(0, n))
	s.launch("add_f32", elementwisePlan(n), argsOf().ptr(pd).ptr(ps).i64(n))
	s.end()
}

// Scale is x[N] *= s.
func (d *Device) Scale(x kernels.Buffer, sc float32) {
	const op = "Scale"
	kernels.CheckScale(x)
	n := x.Len()
	if n == 0 {
		return
	}
	s := d.begin(op)
	s.launch("scale_f32", elementwisePlan(n), argsOf().ptr(s.inout(x)).f32(sc).i64(n))
	s.end()
}

// AdamW updates param[N], m[N], v[N] in place from grad[N].
func (d *Device) AdamW(param, grad, m, v kernels.Buffer, p kernels.AdamWParams, step int) {
	const op = "AdamW"
	kernels.CheckAdamW(param, grad, m, v, step)
	n := param.Len()
	if n == 0 {
		return
	}
	lr, b1, b2 := float64(p.LR), float64(p.Beta1), float64(p.Beta2)
	stepSize := lr / (1 - math.Pow(b1, float64(step)))
	bc2sqrt := math.Sqrt(1 - math.Pow(b2, float64(step)))
	decay := 1 - lr*float64(p.WeightDecay)
	s := d.begin(op)
	pp, pg, pm, pv := s.inout(param), s.in(grad.Slice(0, n)), s.inout(m.Slice(0, n)), s.inout(v.Slice(0, n))
	s.launch("adamw_f32", elementwisePlan(n), argsOf().ptr(pp).ptr(pg).ptr(pm).ptr(pv).f32(p.Beta1).f32(p.Beta2).f32(p.Eps).
		f32(float32(decay)).f32(float32(stepSize)).f32(float32(bc2sqrt)).i64(n))
	s.end()
}
