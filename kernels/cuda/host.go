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
	prec    gemmPrecision
}

// NewHost returns a host backend running blocks on workers OS threads
// (runtime.NumCPU() if workers ≤ 0).
func NewHost(workers int) *Host {
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	return &Host{workers: workers}
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

// matData returns w's storage and dtype code for the kernels.
func matData(w kernels.Mat) unsafe.Pointer {
	if w.DType == kernels.F32 {
		return unsafe.Pointer(f32p(w.F32()))
	}
	return unsafe.Pointer(u16p(w.U16()))
}

func (h *Host) w() C.int { return C.int(h.workers) }

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

// addr pins s and returns the address of its first element (0 if empty).
func addr(p *runtime.Pinner, s []float32) uintptr {
	if len(s) == 0 {
		return 0
	}
	p.Pin(&s[0])
	return uintptr(unsafe.Pointer(&s[0]))
}

// pinTables pins the blocks of p that hold n positions and block tables of
// their addresses, and returns the tables' addresses (K, V).
func pinTables(pin *runtime.Pinner, p *kernels.PagedKV, n int) (kb, vb uintptr) {
	blocks := ceilDiv(n, p.BlockSize)
	kt, vt := make([]uintptr, max(blocks, 1)), make([]uintptr, max(blocks, 1))
	for b := range blocks {
		if p.DType == kernels.F32 {
			kt[b], vt[b] = addr(pin, p.K[b].F32()), addr(pin, p.V[b].F32())
		} else {
			kt[b], vt[b] = pinned(pin, p.K[b].BF16()), pinned(pin, p.V[b].BF16())
		}
	}
	return pinned(pin, kt), pinned(pin, vt)
}

// Attention is causal GQA attention over a batch of sequences, with K and V
// contiguous or in a paged KV cache (f32 or bf16 blocks).
func (h *Host) Attention(seqs []kernels.AttentionSeq, heads, kvHeads, headDim int, scale float32) {
	const op = "Attention"
	kernels.CheckAttention(seqs, heads, kvHeads, headDim)
	checkHeads(op, heads, kvHeads, headDim) // the kernels' head-dim limit
	var pin runtime.Pinner
	defer pin.Unpin()
	desc := make([]attnSeq, len(seqs))
	maxT := 0
	for i, s := range seqs {
		n := s.Start + s.T
		desc[i] = attnSeq{q: addr(&pin, s.Q.F32()), out: addr(&pin, s.Out.F32()), lse: addr(&pin, s.LSE.F32()), t: int64(s.T), start: int64(s.Start)}
		if s.Paged.BlockSize > 0 {
			desc[i].kb, desc[i].vb = pinTables(&pin, &s.Paged, n)
			desc[i].blockSize, desc[i].dtype = int64(s.Paged.BlockSize), int64(s.Paged.DType)
		} else {
			desc[i].k, desc[i].v = addr(&pin, s.K.F32()), addr(&pin, s.V.F32())
		}
		maxT = max(maxT, s.T)
	}
	if maxT == 0 || heads == 0 || headDim == 0 {
		return
	}
	d := warpRowsPlan(maxT*heads, len(seqs))
	launched(op, C.host_attention_forward(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		unsafe.Pointer(&desc[0]), C.int(heads), C.int(kvHeads), C.int(headDim), C.float(scale)))
}

// AttentionBackward writes DQ and accumulates DK, DV for each sequence,
// with K and V contiguous or in a paged KV cache (f32 or bf16 blocks).
func (h *Host) AttentionBackward(seqs []kernels.AttentionGradSeq, heads, kvHeads, headDim int, scale float32) {
	const op = "AttentionBackward"
	kernels.CheckAttentionBackward(seqs, heads, kvHeads, headDim)
	checkHeads(op, heads, kvHeads, headDim) // the kernels' head-dim limit
	var pin runtime.Pinner
	defer pin.Unpin()
	desc := make([]attnGradSeq, len(seqs))
	maxT, maxS := 0, 0
	for i := range seqs {
		s := seqs[i].Host()
		n := s.Start + s.T
		di := make([]float32, s.T*heads)
		desc[i] = attnGradSeq{dout: addr(&pin, s.DOut), q: addr(&pin, s.Q), k: addr(&pin, s.K), v: addr(&pin, s.V),
			out: addr(&pin, s.Out), lse: addr(&pin, s.LSE), dq: addr(&pin, s.DQ), dk: addr(&pin, s.DK), dv: addr(&pin, s.DV),
			di: addr(&pin, di), t: int64(s.T), start: int64(s.Start)}
		if s.Paged.BlockSize > 0 {
			desc[i].kb, desc[i].vb = pinTables(&pin, &s.Paged, n)
			desc[i].blockSize, desc[i].dtype = int64(s.Paged.BlockSize), int64(s.Paged.DType)
		}
		maxT, maxS = max(maxT, s.T), max(maxS, n)
	}
	if maxT == 0 || heads == 0 || headDim == 0 {
		return
	}
	d := warpRowsPlan(maxT*heads, len(seqs))
	launched(op, C.host_attention_backward_dq(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		unsafe.Pointer(&desc[0]), C.int(heads), C.int(kvHeads), C.int(headDim), C.float(scale)))
	d = warpRowsPlan(maxS*kvHeads, len(seqs))
	launched(op, C.host_attention_backward_dkdv(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		unsafe.Pointer(&desc[0]), C.int(heads), C.int(kvHeads), C.int(headDim), C.float(scale)))
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
