//go:build cudahost

package cuda

/*
#cgo CXXFLAGS: -std=c++17 -O2 -Wall
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"math"
	"runtime"
	"unsafe"

	"github.com/x/kernels"
)

// Host is a kernels.Backend that runs this package's CUDA kernels on the CPU
// through the SIMT shim (simt.h), with the launch configurations of the
// device launcher. It exists to test the kernels without a GPU; it is slow
// (every CUDA thread is a fiber) and not meant for training.
//
// Launch errors (a deadlock, a warp collective with the wrong mask) are
// kernel bugs and panic with the shim's message, as shape errors do.
// A Host holds no state besides its worker count; it is safe for use by
// one goroutine at a time.
type Host struct {
	kernels.HostMemory
	workers int
	// splitBlocks is the block count below which the attention forward
	// splits rows' keys over blocks (attnTargetBlocks; tests set it to 0
	// or to a huge count to force either launch).
	splitBlocks int
}

// NewHost returns a host backend running blocks on workers OS threads
// (runtime.NumCPU() if workers ≤ 0).
func NewHost(workers int) *Host {
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	return &Host{workers: workers, splitBlocks: attnTargetBlocks}
}

// launched panics with the shim's error message, if any.
func launched(op string, msg *C.char) {
	if msg == nil {
		return
	}
	s := C.GoString(msg)
	C.free(unsafe.Pointer(msg))
	panic("kernels/cuda: " + op + ": host launch: " + s)
}

func f32p(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

func i32p(s []int32) *C.int32_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&s[0]))
}

func u16p(s []uint16) *C.uint16_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.uint16_t)(unsafe.Pointer(&s[0]))
}

// f32b and i32b return an F32 or I32 host Buffer's first element, nil
// when it is empty (an absent optional argument).
func f32b(b kernels.Buffer) *C.float {
	if b.Len() == 0 {
		return nil
	}
	return f32p(b.F32())
}

func i32b(b kernels.Buffer) *C.int32_t {
	if b.Len() == 0 {
		return nil
	}
	return i32p(b.I32())
}

// matData returns w's storage and dtype code for the kernels.
func matData(w kernels.Mat) unsafe.Pointer {
	if w.DType == kernels.F32 {
		return unsafe.Pointer(f32p(w.F32()))
	}
	return unsafe.Pointer(u16p(w.U16()))
}

func (h *Host) w() C.int { return C.int(h.workers) }

// MatMul is out[M,N] (=, +=) x[M,K]·wᵀ: bf16 weights on the (emulated)
// tensor cores, f32 and f16 weights on CUDA cores.
func (h *Host) MatMul(out, x kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	const op = "MatMul"
	kernels.CheckMatMul(out, x, w, m)
	n, k := w.Rows, w.Cols
	h.gemmW(op, out.F32(), x.F32(), w, m, n, k, true, accumulate)
}

// MatMulNN is out[M,K] (=, +=) dy[M,N]·w[N,K].
func (h *Host) MatMulNN(out, dy kernels.Buffer, w kernels.Mat, m int, accumulate bool) {
	const op = "MatMulNN"
	kernels.CheckMatMulNN(out, dy, w, m)
	n, k := w.Rows, w.Cols
	h.gemmW(op, out.F32(), dy.F32(), w, m, k, n, false, accumulate)
}

// gemmW is out[I,J] (=, +=) a[I,R]·B with B = wᵀ (wt, w is [J,R]) or w
// (w is [R,J]).
func (h *Host) gemmW(op string, out, a []float32, w kernels.Mat, i, j, r int, wt, accumulate bool) {
	if i == 0 || j == 0 {
		return
	}
	acc := C.int(0)
	if accumulate {
		acc = 1
	}
	if w.DType == kernels.BF16 {
		d := gemmBF16Plan(i, j)
		if wt {
			launched(op, C.host_gemm_bf16_wt(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
				f32p(out), f32p(a), u16p(w.U16()), C.int(i), C.int(j), C.int(r), acc))
			return
		}
		launched(op, C.host_gemm_bf16_wn(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
			f32p(out), f32p(a), u16p(w.U16()), C.int(i), C.int(j), C.int(r), acc))
		return
	}
	sbr, sbj := j, 1 // w is [R,J]: B(r, j) = w[r·J + j]
	if wt {
		sbr, sbj = 1, r // w is [J,R]: B(r, j) = w[j·R + r]
	}
	h.gemmF32(op, out, a, r, 1, matData(w), int(w.DType), sbr, sbj, i, j, r, acc)
}

func (h *Host) gemmF32(op string, out, a []float32, sai, sar int, b unsafe.Pointer, bdt, sbr, sbj, i, j, r int, acc C.int) {
	d := gemmF32Plan(i, j)
	launched(op, C.host_gemm_f32(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(out), f32p(a), C.long(sai), C.long(sar), b, C.int(bdt), C.long(sbr), C.long(sbj), C.int(i), C.int(j), C.int(r), acc))
}

// MatMulTN is dw[N,K] += dy[M,N]ᵀ·x[M,K].
func (h *Host) MatMulTN(dw, dy, x kernels.Buffer, m, n, k int) {
	const op = "MatMulTN"
	kernels.CheckMatMulTN(dw, dy, x, m, n, k)
	if n == 0 || k == 0 {
		return
	}
	h.gemmF32(op, dw.F32(), dy.F32(), 1, n, unsafe.Pointer(f32p(x.F32())), int(kernels.F32), k, 1, n, k, m, 1)
}

// Embedding is out[T,C] = table[ids[t], :].
func (h *Host) Embedding(out kernels.Buffer, table kernels.Mat, ids kernels.Buffer) {
	const op = "Embedding"
	kernels.CheckEmbedding(out, table, ids)
	t, c := ids.Len(), table.Cols
	if t == 0 || c == 0 {
		return
	}
	d := rowPlan(t, 256)
	launched(op, C.host_embedding_forward(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(out.F32()), matData(table), C.int(table.DType), i32p(ids.I32()), C.int(t), C.int(c)))
}

// EmbeddingBackward is dtable[V,C] row ids[t] += dout[t, :].
func (h *Host) EmbeddingBackward(dtable, dout, ids kernels.Buffer, c int) {
	const op = "EmbeddingBackward"
	kernels.CheckEmbeddingBackward(dtable, dout, ids, c)
	t := ids.Len()
	if t == 0 {
		return
	}
	d := columnPlan(c)
	launched(op, C.host_embedding_backward(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(dtable.F32()), f32p(dout.F32()), i32p(ids.I32()), C.int(t), C.int(c)))
}

// RMSNorm is out[R,C] = w·x/√(mean(x²)+eps) per row.
func (h *Host) RMSNorm(out, x, w kernels.Buffer, rows, cols int, eps float32) {
	const op = "RMSNorm"
	kernels.CheckRMSNorm(out, x, w, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	d := rowPlan(rows, 256)
	launched(op, C.host_rmsnorm_forward(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(out.F32()), f32p(x.F32()), f32p(w.F32()), C.int(rows), C.int(cols), C.float(eps)))
}

// RMSNormBackward writes dx[R,C] and accumulates dw[C].
func (h *Host) RMSNormBackward(dx, dw, dout, x, w kernels.Buffer, rows, cols int, eps float32) {
	const op = "RMSNormBackward"
	kernels.CheckRMSNormBackward(dx, dw, dout, x, w, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	rstd := make([]float32, rows)
	d := rowPlan(rows, 256)
	launched(op, C.host_rmsnorm_backward_dx(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(dx.F32()), f32p(rstd), f32p(dout.F32()), f32p(x.F32()), f32p(w.F32()), C.int(rows), C.int(cols), C.float(eps)))
	d = columnPlan(cols)
	launched(op, C.host_rmsnorm_backward_dw(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(dw.F32()), f32p(dout.F32()), f32p(x.F32()), f32p(rstd), C.int(rows), C.int(cols)))
}

// RoPE rotates x[T,H,D] in place (rotate-half convention).
func (h *Host) RoPE(x, pos kernels.Buffer, heads, headDim int, theta float64) {
	h.rope("RoPE", x, pos, heads, headDim, theta, 1)
}

// RoPEBackward applies the inverse rotation to dx[T,H,D] in place.
func (h *Host) RoPEBackward(dx, pos kernels.Buffer, heads, headDim int, theta float64) {
	h.rope("RoPEBackward", dx, pos, heads, headDim, theta, -1)
}

func (h *Host) rope(op string, x, pos kernels.Buffer, heads, headDim int, theta, sign float64) {
	kernels.CheckRoPE(op, x, pos, heads, headDim)
	t := pos.Len()
	if t == 0 || heads == 0 || headDim == 0 {
		return
	}
	d := columnPlan(t * headDim / 2)
	launched(op, C.host_rope_f32(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(x.F32()), i32p(pos.I32()), C.int(t), C.int(heads), C.int(headDim), C.double(theta), C.double(sign)))
}

// hostKV is the KVSrc arguments (attention_kv.cuh) of a batch of host
// Buffers: the paged pool and tables, or contiguous K, V and KStart.
type hostKV struct {
	pool                       unsafe.Pointer
	dtype                      C.int
	tab                        *C.int32_t
	tstride, bs                C.int
	stride, koff, voff, blocks C.long
	k, v                       *C.float
	kstart                     *C.int32_t
}

// kvOf returns the KVSrc arguments of p (paged) or of the contiguous k, v
// and kstart.
func kvOf(p *kernels.PagedKV, k, v, kstart kernels.Buffer) hostKV {
	h := hostKV{k: f32b(k), v: f32b(v), kstart: i32b(kstart)}
	if p.BlockSize > 0 {
		h.dtype, h.tab, h.tstride, h.bs = C.int(p.Pool.DType()), i32p(p.Tables.I32()), C.int(p.TableStride), C.int(p.BlockSize)
		h.stride, h.koff, h.voff, h.blocks = C.long(p.BlockStride), C.long(p.KOff), C.long(p.VOff), C.long(p.Blocks())
		if p.Pool.DType() == kernels.F32 {
			h.pool = unsafe.Pointer(f32p(p.Pool.F32()))
		} else {
			h.pool = unsafe.Pointer(u16p(p.Pool.BF16()))
		}
	}
	return h
}

// Attention is causal GQA attention over a batch of sequences, with K and V
// contiguous or in a paged KV cache (f32 or bf16 pool).
func (h *Host) Attention(a kernels.AttentionBatch, heads, kvHeads, headDim int, scale float32) {
	const op = "Attention"
	kernels.CheckAttention(&a, heads, kvHeads, headDim)
	checkHeads(op, heads, kvHeads, headDim) // the kernels' head-dim limit
	l := &a.Layout
	if l.N == 0 || l.MaxT == 0 {
		return
	}
	kv := kvOf(&a.Paged, a.K, a.V, a.KStart)
	if useAttnMMA(headDim) {
		h.attentionMMA(op, &a, kv, heads, kvHeads, headDim, scale)
		return
	}
	d := warpRowsPlan(l.MaxT*heads, l.B)
	launched(op, C.host_attention_forward(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(a.Q.F32()), f32p(a.Out.F32()), f32b(a.LSE), i32p(l.QStart.I32()), i32p(l.Pos.I32()),
		kv.pool, kv.dtype, kv.tab, kv.tstride, kv.bs, kv.stride, kv.koff, kv.voff, kv.blocks, kv.k, kv.v, kv.kstart,
		C.int(heads), C.int(kvHeads), C.int(headDim), C.float(scale)))
}

// attentionMMA runs the tensor-core forward (attention_fwd.cu) and, for a
// split launch, attention_combine over host scratch for the partials.
func (h *Host) attentionMMA(op string, a *kernels.AttentionBatch, kv hostKV, heads, kvHeads, headDim int, scale float32) {
	l := &a.Layout
	p := attnFwdPlan(l.B, kvHeads, heads/kvHeads, l.MaxT, l.MaxLen, h.splitBlocks)
	var partO, partML []float32
	if p.nsplit > 1 {
		partO, partML = make([]float32, l.N*heads*p.maxChunks*headDim), make([]float32, l.N*heads*p.maxChunks*2)
	}
	d := p.d
	if p.kernel == "attention_fwd1" {
		launched(op, C.host_attention_fwd1(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
			f32p(a.Q.F32()), f32p(a.Out.F32()), f32b(a.LSE), i32p(l.QStart.I32()), i32p(l.Pos.I32()),
			kv.pool, kv.dtype, kv.tab, kv.tstride, kv.bs, kv.stride, kv.koff, kv.voff, kv.blocks, kv.k, kv.v, kv.kstart,
			C.int(heads), C.int(kvHeads), C.int(headDim), C.float(scale), C.int(p.nsplit), C.int(p.cps), f32p(partO), f32p(partML), C.int(p.maxChunks)))
	} else {
		launched(op, C.host_attention_fwd4(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
			f32p(a.Q.F32()), f32p(a.Out.F32()), f32b(a.LSE), i32p(l.QStart.I32()), i32p(l.Pos.I32()),
			kv.pool, kv.dtype, kv.tab, kv.tstride, kv.bs, kv.stride, kv.koff, kv.voff, kv.blocks, kv.k, kv.v, kv.kstart,
			C.int(heads), C.int(kvHeads), C.int(headDim), C.float(scale), C.int(p.nsplit), C.int(p.cps), f32p(partO), f32p(partML), C.int(p.maxChunks)))
	}
	if p.nsplit == 1 {
		return
	}
	d = warpRowsPlan(l.MaxT*heads, l.B)
	launched(op, C.host_attention_combine(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(a.Out.F32()), f32b(a.LSE), i32p(l.QStart.I32()), i32p(l.Pos.I32()), f32p(partO), f32p(partML), C.int(heads), C.int(headDim), C.int(p.maxChunks)))
}

// AttentionBackward writes DQ and accumulates DK, DV for each sequence,
// with K and V contiguous or in a paged KV cache (f32 or bf16 pool).
func (h *Host) AttentionBackward(g kernels.AttentionGradBatch, heads, kvHeads, headDim int, scale float32) {
	const op = "AttentionBackward"
	kernels.CheckAttentionBackward(&g, heads, kvHeads, headDim)
	checkHeads(op, heads, kvHeads, headDim) // the kernels' head-dim limit
	l := &g.Layout
	if l.N == 0 || l.MaxT == 0 {
		return
	}
	kv := kvOf(&g.Paged, g.K, g.V, g.KStart)
	di := make([]float32, l.N*heads)
	if useAttnMMA(headDim) {
		dq, dkdv := attnBwdPlans(l.B, kvHeads, heads/kvHeads, l.MaxT, l.MaxLen)
		launched(op, C.host_attention_bwd_dq(C.uint(dq.gx), C.uint(dq.gy), C.uint(dq.gz), C.uint(dq.bx), C.uint(dq.by), C.uint(dq.bz), h.w(),
			f32p(g.DOut.F32()), f32p(g.Q.F32()), f32p(g.Out.F32()), f32p(g.LSE.F32()), f32p(g.DQ.F32()), f32p(di),
			i32p(l.QStart.I32()), i32p(l.Pos.I32()), kv.pool, kv.dtype, kv.tab, kv.tstride, kv.bs, kv.stride, kv.koff, kv.voff, kv.blocks, kv.k, kv.v, kv.kstart,
			C.int(heads), C.int(kvHeads), C.int(headDim), C.float(scale)))
		launched(op, C.host_attention_bwd_dkdv(C.uint(dkdv.gx), C.uint(dkdv.gy), C.uint(dkdv.gz), C.uint(dkdv.bx), C.uint(dkdv.by), C.uint(dkdv.bz), h.w(),
			f32p(g.DOut.F32()), f32p(g.Q.F32()), f32p(g.LSE.F32()), f32p(di), f32p(g.DK.F32()), f32p(g.DV.F32()),
			i32p(l.QStart.I32()), i32p(l.Pos.I32()), kv.pool, kv.dtype, kv.tab, kv.tstride, kv.bs, kv.stride, kv.koff, kv.voff, kv.blocks, kv.k, kv.v, kv.kstart,
			C.int(heads), C.int(kvHeads), C.int(headDim), C.float(scale)))
		return
	}
	d := warpRowsPlan(l.MaxT*heads, l.B)
	launched(op, C.host_attention_backward_dq(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(g.DOut.F32()), f32p(g.Q.F32()), f32p(g.Out.F32()), f32p(g.LSE.F32()), f32p(g.DQ.F32()), f32p(di),
		i32p(l.QStart.I32()), i32p(l.Pos.I32()),
		kv.pool, kv.dtype, kv.tab, kv.tstride, kv.bs, kv.stride, kv.koff, kv.voff, kv.blocks, kv.k, kv.v, kv.kstart,
		C.int(heads), C.int(kvHeads), C.int(headDim), C.float(scale)))
	d = warpRowsPlan(l.MaxLen*kvHeads, l.B)
	launched(op, C.host_attention_backward_dkdv(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(g.DOut.F32()), f32p(g.Q.F32()), f32p(g.LSE.F32()), f32p(di), f32p(g.DK.F32()), f32p(g.DV.F32()),
		i32p(l.QStart.I32()), i32p(l.Pos.I32()),
		kv.pool, kv.dtype, kv.tab, kv.tstride, kv.bs, kv.stride, kv.koff, kv.voff, kv.blocks, kv.k, kv.v, kv.kstart,
		C.int(heads), C.int(kvHeads), C.int(headDim), C.float(scale)))
}

// AttentionBatchInvariant reports true (kernels.AttentionInvariant): see
// attention.cu.
func (h *Host) AttentionBatchInvariant() bool { return true }

// WriteKV stores the batch's new K and V rows in the paged pool.
func (h *Host) WriteKV(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvHeads, headDim int) {
	const op = "WriteKV"
	kernels.CheckWriteKV(&kv, &l, k, v, kvHeads, headDim)
	n := l.N * kvHeads * headDim
	if n == 0 {
		return
	}
	p := kvOf(&kv, kernels.Buffer{}, kernels.Buffer{}, kernels.Buffer{})
	d := elementwiseGrid(n)
	launched(op, C.host_write_kv(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		p.pool, p.dtype, p.tab, p.tstride, p.bs, p.stride, p.koff, p.voff, p.blocks,
		i32p(l.QStart.I32()), i32p(l.Pos.I32()), C.int(l.B), f32p(k.F32()), f32p(v.F32()), C.long(l.N), C.int(kvHeads*headDim)))
}

// WriteKVRoPE rotates k in place (RoPE at the layout's positions) and
// stores the rotated keys and v in the paged pool, in one launch
// (kernels.RoPEKVWriter).
func (h *Host) WriteKVRoPE(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvHeads, headDim int, theta float64) {
	const op = "WriteKVRoPE"
	kernels.CheckWriteKV(&kv, &l, k, v, kvHeads, headDim)
	kernels.CheckRoPE(op, k.Slice(0, l.N*kvHeads*headDim), l.Pos.Slice(0, l.N), kvHeads, headDim)
	n := l.N * kvHeads * headDim / 2
	if n == 0 {
		return
	}
	p := kvOf(&kv, kernels.Buffer{}, kernels.Buffer{}, kernels.Buffer{})
	d := elementwiseGrid(n)
	launched(op, C.host_write_kv_rope(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		p.pool, p.dtype, p.tab, p.tstride, p.bs, p.stride, p.koff, p.voff, p.blocks,
		i32p(l.QStart.I32()), i32p(l.Pos.I32()), C.int(l.B), f32p(k.F32()), f32p(v.F32()), C.long(l.N), C.int(kvHeads), C.int(headDim), C.double(theta)))
}

// AddRMSNorm is x += res, out = RMSNorm(x) in one launch
// (kernels.AddRMSNormer).
func (h *Host) AddRMSNorm(out, x, res, w kernels.Buffer, rows, cols int, eps float32) {
	const op = "AddRMSNorm"
	kernels.CheckAddRMSNorm(out, x, res, w, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	d := rowPlan(rows, 256)
	launched(op, C.host_add_rmsnorm(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(out.F32()), f32p(x.F32()), f32p(res.F32()), f32p(w.F32()), C.int(rows), C.int(cols), C.float(eps)))
}

// SwiGLU is out[N] = silu(gate)·up.
func (h *Host) SwiGLU(out, gate, up kernels.Buffer) {
	const op = "SwiGLU"
	kernels.CheckSwiGLU(out, gate, up)
	n := out.Len()
	if n == 0 {
		return
	}
	d := elementwisePlan(n)
	launched(op, C.host_swiglu_forward(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(out.F32()), f32p(gate.F32()), f32p(up.F32()), C.long(n)))
}

// SwiGLUBackward writes dgate[N] and dup[N].
func (h *Host) SwiGLUBackward(dgate, dup, dout, gate, up kernels.Buffer) {
	const op = "SwiGLUBackward"
	kernels.CheckSwiGLUBackward(dgate, dup, dout, gate, up)
	n := dout.Len()
	if n == 0 {
		return
	}
	d := elementwisePlan(n)
	launched(op, C.host_swiglu_backward(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(dgate.F32()), f32p(dup.F32()), f32p(dout.F32()), f32p(gate.F32()), f32p(up.F32()), C.long(n)))
}

// Add is dst[N] += src[N].
func (h *Host) Add(dst, src kernels.Buffer) {
	const op = "Add"
	kernels.CheckAdd(dst, src)
	n := dst.Len()
	if n == 0 {
		return
	}
	d := elementwisePlan(n)
	launched(op, C.host_add_f32(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(dst.F32()), f32p(src.F32()), C.long(n)))
}

// Scale is x[N] *= s.
func (h *Host) Scale(x kernels.Buffer, s float32) {
	kernels.CheckScale(x)
	n := x.Len()
	if n == 0 {
		return
	}
	d := elementwisePlan(n)
	launched("Scale", C.host_scale_f32(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(x.F32()), C.float(s), C.long(n)))
}

// LogSoftmaxGather writes logp[R] (and entropy[R] if not empty).
func (h *Host) LogSoftmaxGather(logp, entropy, logits, targets kernels.Buffer, rows, v int) {
	const op = "LogSoftmaxGather"
	kernels.CheckLogSoftmaxGather(logp, entropy, logits, targets, rows, v)
	if rows == 0 {
		return
	}
	d := rowPlan(rows, logitsRowThreads)
	launched(op, C.host_logsoftmax_gather(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(logp.F32()), f32p(entropy.F32()), f32p(logits.F32()), i32p(targets.I32()), C.int(rows), C.int(v)))
}

// LogSoftmaxGatherBackward writes dlogits[R,V], with the entropy term when
// dentropy is not empty.
func (h *Host) LogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy kernels.Buffer, rows, v int) {
	const op = "LogSoftmaxGatherBackward"
	kernels.CheckLogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy, rows, v)
	if rows == 0 {
		return
	}
	d := rowPlan(rows, logitsRowThreads)
	launched(op, C.host_logsoftmax_gather_backward(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(dlogits.F32()), f32p(logits.F32()), i32p(targets.I32()), f32p(dlogp.F32()), f32p(dentropy.F32()), C.int(rows), C.int(v)))
}

// Softmax replaces each row of x[R,V] by its softmax.
func (h *Host) Softmax(x kernels.Buffer, rows, v int) {
	const op = "Softmax"
	kernels.CheckSoftmax(x, rows, v)
	if rows == 0 || v == 0 {
		return
	}
	d := rowPlan(rows, logitsRowThreads)
	launched(op, C.host_softmax_rows(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(x.F32()), C.int(rows), C.int(v)))
}

// Argmax returns the first index of the largest value of x.
func (h *Host) Argmax(x kernels.Buffer) (int32, error) {
	kernels.CheckArgmax(x)
	var out [1]int32
	d := singleBlockPlan()
	launched("Argmax", C.host_argmax_f32(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		i32p(out[:]), f32p(x.F32()), C.int(x.Len())))
	return out[0], nil
}

// SampleRows draws one token per row of logits[R,V] (see kernels.Backend).
func (h *Host) SampleRows(ids, logp, fullLogp, logits kernels.Buffer, params []kernels.SamplingParams, u []float64, rows, v int) {
	const op = "SampleRows"
	kernels.CheckSampleRows(ids, logp, fullLogp, logits, params, u, rows, v)
	if rows == 0 {
		return
	}
	prm := sampleParamsOf(op, params, logits, rows, v)
	d := rowPlan(rows, 512)
	launched(op, C.host_sample_rows(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		i32p(ids.I32()), f32p(logp.F32()), f32p(fullLogp.F32()), f32p(logits.F32()), unsafe.Pointer(&prm[0]), (*C.double)(unsafe.Pointer(&u[0])), C.int(rows), C.int(v)))
}

// AdamW updates param[N], m[N], v[N] in place from grad[N].
func (h *Host) AdamW(param, grad, m, v kernels.Buffer, p kernels.AdamWParams, step int) {
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
	d := elementwisePlan(n)
	launched(op, C.host_adamw_f32(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		f32p(param.F32()), f32p(grad.F32()), f32p(m.F32()), f32p(v.F32()), C.float(p.Beta1), C.float(p.Beta2), C.float(p.Eps), C.float(decay),
		C.float(stepSize), C.float(bc2sqrt), C.long(n)))
}
