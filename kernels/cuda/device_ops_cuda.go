//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"gorgonia.org/cu"

	"github.com/x/kernels"
)

// The kernels.Backend methods of Device: the same checks, kernels and
// launch plans as Host (host.go), with device memory in place of host
// pointers. Outputs are copied in before the launch as well as out after
// it (output(..., true)), so that elements a kernel leaves alone (a
// slice's tail past the shape, a loss output a mode does not write) keep
// their values as on the host; only the GEMM output, whose every element
// one thread writes, skips the copy in.
//
// Index arguments (ids, targets, PolicyLoss's Seg) that are device Buffers
// are downloaded and checked before the launch (checkIndices), as
// GatherRows does: the kernels index with them unguarded, and kernels'
// Check functions range-check host indices only.

var _ kernels.Backend = (*Device)(nil)

func dp(p cu.DevicePtr) uintptr { return uintptr(p) }

// MatMul is out[M,N] (=, +=) x[M,K]·wᵀ (bf16 weights on tensor cores).
func (d *Device) MatMul(out, x kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	const op = "MatMul"
	kernels.CheckMatMul(out, x, w, m)
	n, k := w.Rows, w.Cols
	d.gemmW(op, out.Slice(0, m*n), x.Slice(0, m*k), w, m, n, k, true, accumulate)
}

// MatMulNN is out[M,K] (=, +=) dy[M,N]·w[N,K].
func (d *Device) MatMulNN(out, dy kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	const op = "MatMulNN"
	kernels.CheckMatMulNN(out, dy, w, m)
	n, k := w.Rows, w.Cols
	d.gemmW(op, out.Slice(0, m*k), dy.Slice(0, m*n), w, m, k, n, false, accumulate)
}

func (d *Device) gemmW(op string, out, a kernels.Buffer, w kernels.Mat, i, j, r int, wt, accumulate bool) {
	if i == 0 || j == 0 {
		return
	}
	acc := 0
	if accumulate {
		acc = 1
	}
	d.launchOp(op, func(s *session) {
		po, pa, pw := s.out(op, out, accumulate), s.buf(op, a, false), s.mat(op, w) // every element written
		if w.DType == kernels.BF16 {
			name := "gemm_bf16_wn"
			if wt {
				name = "gemm_bf16_wt"
			}
			s.launch(name, gemmBF16Plan(i, j), argsOf().ptr(po).ptr(pa).ptr(pw).i32(i).i32(j).i32(r).i32(acc))
			return
		}
		sbr, sbj := j, 1
		if wt {
			sbr, sbj = 1, r
		}
		s.launch("gemm_f32", gemmF32Plan(i, j), argsOf().ptr(po).ptr(pa).i64(r).i64(1).ptr(pw).i32(int(w.DType)).
			i64(sbr).i64(sbj).i32(i).i32(j).i32(r).i32(acc))
	})
}

// MatMulTN is dw[N,K] += dy[M,N]ᵀ·x[M,K].
func (d *Device) MatMulTN(dw, dy, x kernels.Buffer, m, n, k int) {
	const op = "MatMulTN"
	kernels.CheckMatMulTN(dw, dy, x, m, n, k)
	if n == 0 || k == 0 {
		return
	}
	d.launchOp(op, func(s *session) {
		pdw, pdy, px := s.buf(op, dw.Slice(0, n*k), true), s.buf(op, dy.Slice(0, m*n), false), s.buf(op, x.Slice(0, m*k), false)
		s.launch("gemm_f32", gemmF32Plan(n, k), argsOf().ptr(pdw).ptr(pdy).i64(1).i64(n).ptr(px).i32(int(kernels.F32)).
			i64(k).i64(1).i32(n).i32(k).i32(m).i32(1))
	})
}

// Embedding is out[T,C] = table[ids[t], :].
func (d *Device) Embedding(out kernels.Buffer, table kernels.Mat, ids kernels.Buffer) {
	const op = "Embedding"
	kernels.CheckEmbedding(out, table, ids)
	t, c := ids.Len(), table.Cols
	if t == 0 || c == 0 {
		return
	}
	d.checkIndices(op, ids, table.Rows)
	d.launchOp(op, func(s *session) {
		po, pt, pi := s.buf(op, out.Slice(0, t*c), true), s.mat(op, table), s.buf(op, ids, false)
		s.launch("embedding_forward", rowPlan(t, 256), argsOf().ptr(po).ptr(pt).i32(int(table.DType)).ptr(pi).i32(t).i32(c))
	})
}

// EmbeddingBackward is dtable[V,C] row ids[t] += dout[t, :].
func (d *Device) EmbeddingBackward(dtable, dout, ids kernels.Buffer, c int) {
	const op = "EmbeddingBackward"
	kernels.CheckEmbeddingBackward(dtable, dout, ids, c)
	t := ids.Len()
	if t == 0 {
		return
	}
	d.checkIndices(op, ids, dtable.Len()/c)
	d.launchOp(op, func(s *session) {
		pt, po, pi := s.buf(op, dtable, true), s.buf(op, dout.Slice(0, t*c), false), s.buf(op, ids, false)
		s.launch("embedding_backward", columnPlan(c), argsOf().ptr(pt).ptr(po).ptr(pi).i32(t).i32(c))
	})
}

// RMSNorm is out[R,C] = w·x/√(mean(x²)+eps) per row.
func (d *Device) RMSNorm(out, x, w kernels.Buffer, rows, cols int, eps float32) {
	const op = "RMSNorm"
	kernels.CheckRMSNorm(out, x, w, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	d.launchOp(op, func(s *session) {
		px, pw := s.buf(op, x.Slice(0, rows*cols), false), s.buf(op, w.Slice(0, cols), false)
		po := s.buf(op, out.Slice(0, rows*cols), true)
		s.launch("rmsnorm_forward", rowPlan(rows, 256), argsOf().ptr(po).ptr(px).ptr(pw).i32(rows).i32(cols).f32(eps))
	})
}

// RMSNormBackward writes dx[R,C] and accumulates dw[C].
func (d *Device) RMSNormBackward(dx, dw, dout, x, w kernels.Buffer, rows, cols int, eps float32) {
	const op = "RMSNormBackward"
	kernels.CheckRMSNormBackward(dx, dw, dout, x, w, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	rc := rows * cols
	d.launchOp(op, func(s *session) {
		pdout, px, pw := s.buf(op, dout.Slice(0, rc), false), s.buf(op, x.Slice(0, rc), false), s.buf(op, w.Slice(0, cols), false)
		pdx, pdw := s.buf(op, dx.Slice(0, rc), true), s.buf(op, dw.Slice(0, cols), true)
		rstd := s.alloc(int64(rows) * 4)
		s.launch("rmsnorm_backward_dx", rowPlan(rows, 256), argsOf().ptr(pdx).ptr(rstd).ptr(pdout).ptr(px).ptr(pw).i32(rows).i32(cols).f32(eps))
		s.launch("rmsnorm_backward_dw", columnPlan(cols), argsOf().ptr(pdw).ptr(pdout).ptr(px).ptr(rstd).i32(rows).i32(cols))
	})
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
	d.launchOp(op, func(s *session) {
		px, pp := s.buf(op, x.Slice(0, t*heads*headDim), true), s.buf(op, pos, false)
		s.launch("rope_f32", columnPlan(t*headDim/2), argsOf().ptr(px).ptr(pp).i32(t).i32(heads).i32(headDim).f64(theta).f64(sign))
	})
}

// devKV is the KVSrc arguments (attention_kv.cuh) of a batch on the
// device: the paged pool and tables, or contiguous K, V and KStart.
type devKV struct {
	pool, tab, k, v, kstart    cu.DevicePtr
	dtype, tstride, bs         int
	stride, koff, voff, blocks int
}

// kvArgs returns the device addresses and settings of p (paged), or of the
// contiguous k, v (n rows of rowLen) and kstart for b sequences.
func kvArgs(s *session, op string, p *kernels.PagedKV, k, v, kstart kernels.Buffer, b, rows, rowLen int) devKV {
	if p.BlockSize > 0 {
		return devKV{pool: s.buf(op, p.Pool.Slice(0, p.Blocks()*p.BlockStride), false), tab: s.buf(op, p.Tables.Slice(0, b*p.TableStride), false),
			dtype: int(p.Pool.DType()), tstride: p.TableStride, bs: p.BlockSize, stride: p.BlockStride, koff: p.KOff, voff: p.VOff, blocks: p.Blocks()}
	}
	return devKV{k: s.buf(op, k.Slice(0, rows*rowLen), false), v: s.buf(op, v.Slice(0, rows*rowLen), false), kstart: s.buf(op, kstart.Slice(0, b+1), false)}
}

// kvRows is the number of contiguous K/V rows a batch places (KStart[B]
// where KStart is host memory, else every row the Buffer holds).
func kvRows(a *kernels.AttentionBatch, rowLen int) int {
	if a.Paged.BlockSize > 0 {
		return 0
	}
	if a.KStart.Host() {
		return int(a.KStart.I32()[a.Layout.B])
	}
	return a.K.Len() / rowLen
}

// Attention is causal GQA attention over a batch of sequences, with K and V
// contiguous or in a paged KV cache (f32 or bf16 pool). The layout and the
// block tables are read in place: nothing is uploaded when they are
// device Buffers.
func (d *Device) Attention(a kernels.AttentionBatch, heads, kvHeads, headDim int, scale float32) {
	const op = "Attention"
	kernels.CheckAttention(&a, heads, kvHeads, headDim)
	checkHeads(op, heads, kvHeads, headDim) // the kernels' head-dim limit
	l := &a.Layout
	if l.N == 0 || l.MaxT == 0 {
		return
	}
	nq, rl := l.N*heads*headDim, kvHeads*headDim
	d.launchOp(op, func(s *session) {
		q, out := s.buf(op, a.Q.Slice(0, nq), false), s.buf(op, a.Out.Slice(0, nq), true)
		var lse cu.DevicePtr
		if a.LSE.Len() > 0 {
			lse = s.buf(op, a.LSE.Slice(0, l.N*heads), true)
		}
		qs, pos := s.buf(op, l.QStart.Slice(0, l.B+1), false), s.buf(op, l.Pos.Slice(0, l.N), false)
		kv := kvArgs(s, op, &a.Paged, a.K, a.V, a.KStart, l.B, kvRows(&a, rl), rl)
		if !useAttnMMA(headDim) {
			s.launch("attention_forward", warpRowsPlan(l.MaxT*heads, l.B), argsOf().ptr(q).ptr(out).ptr(lse).ptr(qs).ptr(pos).
				ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
				ptr(kv.k).ptr(kv.v).ptr(kv.kstart).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
			return
		}
		p := attnFwdPlan(l.B, kvHeads, heads/kvHeads, l.MaxT, l.MaxLen, attnTargetBlocks)
		var partO, partML cu.DevicePtr
		if p.nsplit > 1 {
			rows := int64(l.N * heads * p.maxChunks)
			partO, partML = s.alloc(rows*int64(headDim)*4), s.alloc(rows*2*4)
		}
		if p.kernel == "attention_fwd1" {
			s.launch("attention_fwd1", p.d, argsOf().ptr(q).ptr(out).ptr(lse).ptr(qs).ptr(pos).
				ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
				ptr(kv.k).ptr(kv.v).ptr(kv.kstart).i32(heads).i32(kvHeads).i32(headDim).f32(scale).
				i32(p.nsplit).i32(p.cps).ptr(partO).ptr(partML).i32(p.maxChunks))
		} else {
			s.launch("attention_fwd4", p.d, argsOf().ptr(q).ptr(out).ptr(lse).ptr(qs).ptr(pos).
				ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
				ptr(kv.k).ptr(kv.v).ptr(kv.kstart).i32(heads).i32(kvHeads).i32(headDim).f32(scale).
				i32(p.nsplit).i32(p.cps).ptr(partO).ptr(partML).i32(p.maxChunks))
		}
		if p.nsplit > 1 {
			s.launch("attention_combine", warpRowsPlan(l.MaxT*heads, l.B), argsOf().ptr(out).ptr(lse).ptr(qs).ptr(pos).
				ptr(partO).ptr(partML).i32(heads).i32(headDim).i32(p.maxChunks))
		}
	})
}

// AttentionBackward writes DQ and accumulates DK, DV for each sequence,
// with K and V contiguous or in a paged KV cache (f32 or bf16 pool).
func (d *Device) AttentionBackward(g kernels.AttentionGradBatch, heads, kvHeads, headDim int, scale float32) {
	const op = "AttentionBackward"
	kernels.CheckAttentionBackward(&g, heads, kvHeads, headDim)
	checkHeads(op, heads, kvHeads, headDim) // the kernels' head-dim limit
	l := &g.Layout
	if l.N == 0 || l.MaxT == 0 {
		return
	}
	nq, rl := l.N*heads*headDim, kvHeads*headDim
	rows := g.DK.Len() / rl
	if g.KStart.Host() {
		rows = int(g.KStart.I32()[l.B])
	}
	d.launchOp(op, func(s *session) {
		in := func(b kernels.Buffer, n int) cu.DevicePtr { return s.buf(op, b.Slice(0, n), false) }
		dout, q, out, lse := in(g.DOut, nq), in(g.Q, nq), in(g.Out, nq), in(g.LSE, l.N*heads)
		dqp := s.buf(op, g.DQ.Slice(0, nq), true)
		dk, dv := s.buf(op, g.DK.Slice(0, rows*rl), true), s.buf(op, g.DV.Slice(0, rows*rl), true)
		di := s.alloc(int64(l.N*heads) * 4)
		qs, pos := in(l.QStart, l.B+1), in(l.Pos, l.N)
		kv := kvArgs(s, op, &g.Paged, g.K, g.V, g.KStart, l.B, rows, rl)
		if useAttnMMA(headDim) {
			dq, dkdv := attnBwdPlans(l.B, kvHeads, heads/kvHeads, l.MaxT, l.MaxLen)
			s.launch("attention_bwd_dq", dq, argsOf().ptr(dout).ptr(q).ptr(out).ptr(lse).ptr(dqp).ptr(di).
				ptr(qs).ptr(pos).ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
				ptr(kv.k).ptr(kv.v).ptr(kv.kstart).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
			s.launch("attention_bwd_dkdv", dkdv, argsOf().ptr(dout).ptr(q).ptr(lse).ptr(di).ptr(dk).ptr(dv).
				ptr(qs).ptr(pos).ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
				ptr(kv.k).ptr(kv.v).ptr(in(g.KStart, l.B+1)).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
			return
		}
		s.launch("attention_backward_dq", warpRowsPlan(l.MaxT*heads, l.B), argsOf().ptr(dout).ptr(q).ptr(out).ptr(lse).ptr(dqp).ptr(di).
			ptr(qs).ptr(pos).ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
			ptr(kv.k).ptr(kv.v).ptr(kv.kstart).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
		s.launch("attention_backward_dkdv", warpRowsPlan(l.MaxLen*kvHeads, l.B), argsOf().ptr(dout).ptr(q).ptr(lse).ptr(di).ptr(dk).ptr(dv).
			ptr(qs).ptr(pos).ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
			ptr(kv.k).ptr(kv.v).ptr(in(g.KStart, l.B+1)).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
	})
}

// AttentionBatchInvariant reports true (kernels.AttentionInvariant): see
// attention.cu.
func (d *Device) AttentionBatchInvariant() bool { return true }

// WriteKV stores the batch's new K and V rows in the paged pool (one
// launch).
func (d *Device) WriteKV(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvHeads, headDim int) {
	const op = "WriteKV"
	kernels.CheckWriteKV(&kv, &l, k, v, kvHeads, headDim)
	rl := kvHeads * headDim
	if l.N*rl == 0 {
		return
	}
	d.launchOp(op, func(s *session) {
		pool := s.buf(op, kv.Pool.Slice(0, kv.Blocks()*kv.BlockStride), true)
		tab, qs, pos := s.buf(op, kv.Tables.Slice(0, l.B*kv.TableStride), false), s.buf(op, l.QStart.Slice(0, l.B+1), false), s.buf(op, l.Pos.Slice(0, l.N), false)
		pk, pv := s.buf(op, k.Slice(0, l.N*rl), false), s.buf(op, v.Slice(0, l.N*rl), false)
		s.launch("write_kv", elementwiseGrid(l.N*rl), argsOf().ptr(pool).i32(int(kv.Pool.DType())).ptr(tab).i32(kv.TableStride).i32(kv.BlockSize).
			i64(kv.BlockStride).i64(kv.KOff).i64(kv.VOff).i64(kv.Blocks()).ptr(qs).ptr(pos).i32(l.B).ptr(pk).ptr(pv).i64(l.N).i32(rl))
	})
}

// WriteKVRoPE rotates k in place and stores the rotated keys and v in the
// paged pool, in one launch (kernels.RoPEKVWriter).
func (d *Device) WriteKVRoPE(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvHeads, headDim int, theta float64) {
	const op = "WriteKVRoPE"
	kernels.CheckWriteKV(&kv, &l, k, v, kvHeads, headDim)
	rl := kvHeads * headDim
	kernels.CheckRoPE(op, k.Slice(0, l.N*rl), l.Pos.Slice(0, l.N), kvHeads, headDim)
	if l.N*rl == 0 {
		return
	}
	d.launchOp(op, func(s *session) {
		pool := s.buf(op, kv.Pool.Slice(0, kv.Blocks()*kv.BlockStride), true)
		tab, qs, pos := s.buf(op, kv.Tables.Slice(0, l.B*kv.TableStride), false), s.buf(op, l.QStart.Slice(0, l.B+1), false), s.buf(op, l.Pos.Slice(0, l.N), false)
		pk, pv := s.buf(op, k.Slice(0, l.N*rl), true), s.buf(op, v.Slice(0, l.N*rl), false)
		s.launch("write_kv_rope", elementwiseGrid(l.N*rl/2), argsOf().ptr(pool).i32(int(kv.Pool.DType())).ptr(tab).i32(kv.TableStride).i32(kv.BlockSize).
			i64(kv.BlockStride).i64(kv.KOff).i64(kv.VOff).i64(kv.Blocks()).ptr(qs).ptr(pos).i32(l.B).ptr(pk).ptr(pv).i64(l.N).i32(kvHeads).i32(headDim).f64(theta))
	})
}

// AddRMSNorm is x += res, out = RMSNorm(x) in one launch
// (kernels.AddRMSNormer).
func (d *Device) AddRMSNorm(out, x, res, w kernels.Buffer, rows, cols int, eps float32) {
	const op = "AddRMSNorm"
	kernels.CheckAddRMSNorm(out, x, res, w, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	n := rows * cols
	d.launchOp(op, func(s *session) {
		px, pr, pw := s.buf(op, x.Slice(0, n), true), s.buf(op, res.Slice(0, n), false), s.buf(op, w.Slice(0, cols), false)
		po := s.buf(op, out.Slice(0, n), true)
		s.launch("add_rmsnorm", rowPlan(rows, 256), argsOf().ptr(po).ptr(px).ptr(pr).ptr(pw).i32(rows).i32(cols).f32(eps))
	})
}

// SwiGLU is out[N] = silu(gate)·up.
func (d *Device) SwiGLU(out, gate, up kernels.Buffer) {
	const op = "SwiGLU"
	kernels.CheckSwiGLU(out, gate, up)
	n := out.Len()
	if n == 0 {
		return
	}
	d.launchOp(op, func(s *session) {
		pg, pu := s.buf(op, gate.Slice(0, n), false), s.buf(op, up.Slice(0, n), false)
		po := s.buf(op, out, true)
		s.launch("swiglu_forward", elementwisePlan(n), argsOf().ptr(po).ptr(pg).ptr(pu).i64(n))
	})
}

// SwiGLUBackward writes dgate[N] and dup[N].
func (d *Device) SwiGLUBackward(dgate, dup, dout, gate, up kernels.Buffer) {
	const op = "SwiGLUBackward"
	kernels.CheckSwiGLUBackward(dgate, dup, dout, gate, up)
	n := dout.Len()
	if n == 0 {
		return
	}
	d.launchOp(op, func(s *session) {
		pdo, pg, pu := s.buf(op, dout, false), s.buf(op, gate.Slice(0, n), false), s.buf(op, up.Slice(0, n), false)
		pdg, pdu := s.buf(op, dgate.Slice(0, n), true), s.buf(op, dup.Slice(0, n), true)
		s.launch("swiglu_backward", elementwisePlan(n), argsOf().ptr(pdg).ptr(pdu).ptr(pdo).ptr(pg).ptr(pu).i64(n))
	})
}

// Add is dst[N] += src[N].
func (d *Device) Add(dst, src kernels.Buffer) {
	const op = "Add"
	kernels.CheckAdd(dst, src)
	n := dst.Len()
	if n == 0 {
		return
	}
	d.launchOp(op, func(s *session) {
		pd, ps := s.buf(op, dst, true), s.buf(op, src.Slice(0, n), false)
		s.launch("add_f32", elementwisePlan(n), argsOf().ptr(pd).ptr(ps).i64(n))
	})
}

// Scale is x[N] *= s.
func (d *Device) Scale(x kernels.Buffer, sc float32) {
	const op = "Scale"
	kernels.CheckScale(x)
	n := x.Len()
	if n == 0 {
		return
	}
	d.launchOp(op, func(s *session) {
		s.launch("scale_f32", elementwisePlan(n), argsOf().ptr(s.buf(op, x, true)).f32(sc).i64(n))
	})
}

// LogSoftmaxGather writes logp[R] (and entropy[R] if not empty).
func (d *Device) LogSoftmaxGather(logp, entropy, logits, targets kernels.Buffer, rows, v int) {
	const op = "LogSoftmaxGather"
	kernels.CheckLogSoftmaxGather(logp, entropy, logits, targets, rows, v)
	if rows == 0 {
		return
	}
	d.checkIndices(op, targets.Slice(0, rows), v)
	d.launchOp(op, func(s *session) {
		pl, pt := s.buf(op, logits.Slice(0, rows*v), false), s.buf(op, targets.Slice(0, rows), false)
		plp := s.buf(op, logp.Slice(0, rows), true)
		var pe cu.DevicePtr
		if entropy.Len() > 0 {
			pe = s.buf(op, entropy.Slice(0, rows), true)
		}
		s.launch("logsoftmax_gather", rowPlan(rows, logitsRowThreads), argsOf().ptr(plp).ptr(pe).ptr(pl).ptr(pt).i32(rows).i32(v))
	})
}

// LogSoftmaxGatherBackward writes dlogits[R,V], with the entropy term when
// dentropy is not empty. dlogits may alias logits (the kernel reads each
// element before its thread writes it).
func (d *Device) LogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy kernels.Buffer, rows, v int) {
	const op = "LogSoftmaxGatherBackward"
	kernels.CheckLogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy, rows, v)
	if rows == 0 {
		return
	}
	d.checkIndices(op, targets.Slice(0, rows), v)
	d.launchOp(op, func(s *session) {
		pdl, pl := s.buf(op, dlogits.Slice(0, rows*v), true), s.buf(op, logits.Slice(0, rows*v), false)
		pt, pdlp := s.buf(op, targets.Slice(0, rows), false), s.buf(op, dlogp.Slice(0, rows), false)
		var pde cu.DevicePtr
		if dentropy.Len() > 0 {
			pde = s.buf(op, dentropy.Slice(0, rows), false)
		}
		s.launch("logsoftmax_gather_backward", rowPlan(rows, logitsRowThreads),
			argsOf().ptr(pdl).ptr(pl).ptr(pt).ptr(pdlp).ptr(pde).i32(rows).i32(v))
	})
}

// Softmax replaces each row of x[R,V] by its softmax.
func (d *Device) Softmax(x kernels.Buffer, rows, v int) {
	const op = "Softmax"
	kernels.CheckSoftmax(x, rows, v)
	if rows == 0 || v == 0 {
		return
	}
	d.launchOp(op, func(s *session) {
		s.launch("softmax_rows", rowPlan(rows, logitsRowThreads), argsOf().ptr(s.buf(op, x.Slice(0, rows*v), true)).i32(rows).i32(v))
	})
}

// Argmax returns the first index of the largest value of x, waiting for
// the device (a sync point: its failure, or an earlier one, is returned).
func (d *Device) Argmax(x kernels.Buffer) (int32, error) {
	const op = "Argmax"
	kernels.CheckArgmax(x)
	if d.err != nil {
		return 0, d.err
	}
	out := make([]int32, 1)
	err := d.exec(op, func(s *session) {
		po, px := output(s, out, false), s.buf(op, x, false)
		s.launch("argmax_f32", singleBlockPlan(), argsOf().ptr(po).ptr(px).i32(x.Len()))
	})
	if err != nil {
		err = fmt.Errorf("kernels/cuda: %s: %w", op, err)
		d.fail(err)
		return 0, err
	}
	return out[0], nil
}

// SampleRows draws one token per row of logits[R,V] (see kernels.Backend).
func (d *Device) SampleRows(ids, logp, fullLogp, logits kernels.Buffer, params []kernels.SamplingParams, u []float64, rows, v int) {
	const op = "SampleRows"
	kernels.CheckSampleRows(ids, logp, fullLogp, logits, params, u, rows, v)
	if rows == 0 {
		return
	}
	prm := sampleParamsOf(op, params, logits, rows, v)
	d.launchOp(op, func(s *session) {
		pl, pp, pu := s.buf(op, logits.Slice(0, rows*v), false), upload(s, prm), upload(s, u[:rows])
		pi, plp, pf := s.buf(op, ids.Slice(0, rows), true), s.buf(op, logp.Slice(0, rows), true), s.buf(op, fullLogp.Slice(0, rows), true)
		s.launch("sample_rows", rowPlan(rows, 512), argsOf().ptr(pi).ptr(plp).ptr(pf).ptr(pl).ptr(pp).ptr(pu).i32(rows).i32(v))
	})
}

// PolicyLoss evaluates the per-token policy loss and its gradients (see
// kernels.LossParams).
func (d *Device) PolicyLoss(out kernels.LossOutput, in kernels.LossInput, p kernels.LossParams, n int) {
	const op = "PolicyLoss"
	kernels.CheckPolicyLoss(out, in, p, n)
	if n == 0 {
		return
	}
	if in.Seg.Len() > 0 && !in.Seg.Host() {
		// The kernel reads tokens seg[s]..seg[s+1] unguarded: check the
		// offsets as CheckPolicyLoss checks host ones.
		seg := make([]int32, in.Seg.Len())
		if err := d.Download(kernels.HostI32(seg), in.Seg); err != nil {
			return // recorded
		}
		hin := in
		hin.Seg = kernels.HostI32(seg)
		kernels.CheckPolicyLoss(out, hin, p, n)
	}
	segs := in.Seg.Len() - 1
	var chunks []int32 // without Seg: chunks of lossChunk tokens
	if in.Seg.Len() == 0 {
		for t := 0; t < n; t += lossChunk {
			chunks = append(chunks, int32(t))
		}
		chunks = append(chunks, int32(n))
		segs = len(chunks) - 1
	}
	d.launchOp(op, func(s *session) {
		up := func(x kernels.Buffer) uintptr { return dp(s.buf(op, x, false)) }
		o := func(x kernels.Buffer) uintptr { return dp(s.buf(op, x, true)) }
		pseg := s.buf(op, in.Seg, false)
		if chunks != nil {
			pseg = upload(s, chunks)
		}
		a := lossArgs{
			logp: up(in.LogP), entropy: up(in.Entropy), oldLogP: up(in.OldLogP), refLogP: up(in.RefLogP),
			adv: up(in.Adv), seqAdv: up(in.SeqAdv), mask: up(in.Mask), isRatio: up(in.ISRatio), weight: up(in.Weight),
			seg:  dp(pseg),
			loss: o(out.Loss), dlogp: o(out.DLogP), dentropy: o(out.DEntropy), ratio: o(out.Ratio), kl: o(out.KL),
			clip: o(out.Clip), phi: o(out.Phi),
			objective: int32(p.Objective), sequenceRatio: flag(p.SequenceRatio), klBias: flag(p.KLBiasCorrection),
			epsLow: p.EpsLow, epsHigh: p.EpsHigh, delta: p.Delta, tauPos: p.SAPOTauPos, tauNeg: p.SAPOTauNeg,
			kPos: p.VESPOKPos, lamPos: p.VESPOLambdaPos, kNeg: p.VESPOKNeg, lamNeg: p.VESPOLambdaNeg,
			beta: p.Beta, entropyCoef: p.EntropyCoef,
		}
		pa := upload(s, []lossArgs{a})
		s.launch("policy_loss", rowPlan(segs, 256), argsOf().ptr(pa))
	})
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
	d.launchOp(op, func(s *session) {
		pp, pg, pm, pv := s.buf(op, param, true), s.buf(op, grad.Slice(0, n), false), s.buf(op, m.Slice(0, n), true), s.buf(op, v.Slice(0, n), true)
		s.launch("adamw_f32", elementwisePlan(n), argsOf().ptr(pp).ptr(pg).ptr(pm).ptr(pv).f32(p.Beta1).f32(p.Beta2).f32(p.Eps).
			f32(float32(decay)).f32(float32(stepSize)).f32(float32(bc2sqrt)).i64(n))
	})
}
