package cuda

import (
	"fmt"

	"github.com/x/kernels"
)

// The attention ops read a batch's layout, block tables and KV pool in
// place (device Buffers: nothing is uploaded per call, so a decode step's
// launches have fixed arguments); host Buffers are staged like any op's.

// kvArgs is the KVSrc arguments (attention_kv.cuh) of a batch: the paged
// pool and tables, or contiguous K, V and KStart.
type kvArgs struct {
	pool, tab, k, v, kstart    devptr
	dtype, tstride, bs         int
	stride, koff, voff, blocks int
}

// kvOf resolves p (paged), or the contiguous k, v (rows of rowLen) and
// kstart of b sequences, for s.
func kvOf(s *session, p *kernels.PagedKV, k, v, kstart kernels.Buffer, b, rows, rowLen int) kvArgs {
	if p.BlockSize > 0 {
		return kvArgs{pool: s.in(p.Pool.Slice(0, p.Blocks()*p.BlockStride)), tab: s.in(p.Tables.Slice(0, b*p.TableStride)),
			dtype: int(p.Pool.DType()), tstride: p.TableStride, bs: p.BlockSize, stride: p.BlockStride, koff: p.KOff, voff: p.VOff,
			blocks: p.Blocks()}
	}
	return kvArgs{k: s.in(k.Slice(0, rows*rowLen)), v: s.in(v.Slice(0, rows*rowLen)), kstart: s.in(kstart.Slice(0, b+1))}
}

// kvRows is the number of contiguous K/V (or DK/DV) rows of n elements a
// batch places: KStart[B] where KStart is host memory, else every row the
// Buffer holds.
func kvRows(kstart kernels.Buffer, b int, buf kernels.Buffer, rowLen int) int {
	if kstart.Host() && kstart.Len() > b {
		return int(kstart.I32()[b])
	}
	return buf.Len() / rowLen
}

// Attention is causal GQA attention over a batch of sequences, with K and V
// contiguous or in a paged KV cache (f32 or bf16 pool): the tensor-core
// forward (attention_fwd.cu, split over blocks and combined when the batch
// would not fill the GPU) for head dims 16..128 in steps of 16, one warp
// per row (attention.cu) for the others.
func (d *Device) Attention(a kernels.AttentionBatch, heads, kvHeads, headDim int, scale float32) {
	const op = "Attention"
	kernels.CheckAttention(&a, heads, kvHeads, headDim)
	checkHeads(op, heads, kvHeads, headDim) // the kernels' head-dim limit
	l := &a.Layout
	if l.N == 0 || l.MaxT == 0 {
		return
	}
	nq, rl := l.N*heads*headDim, kvHeads*headDim
	s := d.begin(op)
	q, out := s.in(a.Q.Slice(0, nq)), s.inout(a.Out.Slice(0, nq))
	var lse devptr
	if a.LSE.Len() > 0 {
		lse = s.inout(a.LSE.Slice(0, l.N*heads))
	}
	qs, pos := s.in(l.QStart.Slice(0, l.B+1)), s.in(l.Pos.Slice(0, l.N))
	rows := 0
	if a.Paged.BlockSize == 0 {
		rows = kvRows(a.KStart, l.B, a.K, rl)
	}
	kv := kvOf(s, &a.Paged, a.K, a.V, a.KStart, l.B, rows, rl)
	if !useAttnMMA(headDim) {
		s.launch("attention_forward", warpRowsPlan(l.MaxT*heads, l.B), argsOf().ptr(q).ptr(out).ptr(lse).ptr(qs).ptr(pos).
			ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
			ptr(kv.k).ptr(kv.v).ptr(kv.kstart).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
		s.end()
		return
	}
	p := attnFwdPlan(l.B, kvHeads, heads/kvHeads, l.MaxT, l.MaxLen, d.splitBlocks)
	var partO, partML devptr
	if p.nsplit > 1 {
		n := int64(l.N * heads * p.maxChunks)
		if partO = s.attnPartials(n * int64(headDim+2) * 4); partO != 0 {
			partML = partO + devptr(n*int64(headDim)*4)
		}
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
	s.end()
}

// attnPartials returns n bytes for a split launch's partials: the Device's
// own buffer, grown (in stream order) when it is too small, and kept, so a
// graph captured after a first step replays with its address; growing it
// while capturing is refused, as allocation is.
func (s *session) attnPartials(n int64) devptr {
	d := s.d
	if s.err != nil || n <= d.attnPartN {
		if d.graph != nil && d.attnPart != 0 {
			d.graph.use(d.attnPart)
		}
		return d.attnPart
	}
	if d.graph != nil {
		s.fail(fmt.Errorf("attention partials of %d bytes: %w", n, errCapturing))
		return 0
	}
	if d.attnPart != 0 {
		d.sh.invalidate(d.attnPart)
		if err := d.sh.mem.free(d.attnPart, d.stream); err != nil {
			s.fail(err)
			return 0
		}
		d.attnPart, d.attnPartN = 0, 0
	}
	p, err := d.sh.mem.alloc(n, d.stream)
	if err != nil {
		s.fail(fmt.Errorf("attention partials of %d bytes: %w", n, err))
		return 0
	}
	d.attnPart, d.attnPartN = p, n
	return p
}

// AttentionBackward writes DQ and accumulates DK, DV for each sequence,
// with K and V contiguous or in a paged KV cache (f32 or bf16 pool): the
// tensor-core kernels (attention_bwd.cu) for head dims 16..128 in steps of
// 16, one warp per row or key (attention.cu) for the others.
func (d *Device) AttentionBackward(g kernels.AttentionGradBatch, heads, kvHeads, headDim int, scale float32) {
	const op = "AttentionBackward"
	kernels.CheckAttentionBackward(&g, heads, kvHeads, headDim)
	checkHeads(op, heads, kvHeads, headDim) // the kernels' head-dim limit
	l := &g.Layout
	if l.N == 0 || l.MaxT == 0 {
		return
	}
	nq, rl := l.N*heads*headDim, kvHeads*headDim
	rows := kvRows(g.KStart, l.B, g.DK, rl)
	s := d.begin(op)
	dout, q, out, lse := s.in(g.DOut.Slice(0, nq)), s.in(g.Q.Slice(0, nq)), s.in(g.Out.Slice(0, nq)), s.in(g.LSE.Slice(0, l.N*heads))
	dq := s.out(g.DQ.Slice(0, nq))
	dk, dv := s.inout(g.DK.Slice(0, rows*rl)), s.inout(g.DV.Slice(0, rows*rl))
	di := s.scratch(int64(l.N*heads) * 4)
	qs, pos, ks := s.in(l.QStart.Slice(0, l.B+1)), s.in(l.Pos.Slice(0, l.N)), s.in(g.KStart.Slice(0, l.B+1))
	kv := kvOf(s, &g.Paged, g.K, g.V, g.KStart, l.B, rows, rl)
	if useAttnMMA(headDim) {
		pdq, pdkdv := attnBwdPlans(l.B, kvHeads, heads/kvHeads, l.MaxT, l.MaxLen)
		s.launch("attention_bwd_dq", pdq, argsOf().ptr(dout).ptr(q).ptr(out).ptr(lse).ptr(dq).ptr(di).
			ptr(qs).ptr(pos).ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
			ptr(kv.k).ptr(kv.v).ptr(kv.kstart).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
		s.launch("attention_bwd_dkdv", pdkdv, argsOf().ptr(dout).ptr(q).ptr(lse).ptr(di).ptr(dk).ptr(dv).
			ptr(qs).ptr(pos).ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
			ptr(kv.k).ptr(kv.v).ptr(ks).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
		s.end()
		return
	}
	s.launch("attention_backward_dq", warpRowsPlan(l.MaxT*heads, l.B), argsOf().ptr(dout).ptr(q).ptr(out).ptr(lse).ptr(dq).ptr(di).
		ptr(qs).ptr(pos).ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
		ptr(kv.k).ptr(kv.v).ptr(kv.kstart).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
	s.launch("attention_backward_dkdv", warpRowsPlan(l.MaxLen*kvHeads, l.B), argsOf().ptr(dout).ptr(q).ptr(lse).ptr(di).ptr(dk).ptr(dv).
		ptr(qs).ptr(pos).ptr(kv.pool).i32(kv.dtype).ptr(kv.tab).i32(kv.tstride).i32(kv.bs).i64(kv.stride).i64(kv.koff).i64(kv.voff).i64(kv.blocks).
		ptr(kv.k).ptr(kv.v).ptr(ks).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
	s.end()
}

// AttentionBatchInvariant reports true (kernels.AttentionInvariant): each
// row's arithmetic is fixed by its query and keys (attention_fwd.cu).
func (d *Device) AttentionBatchInvariant() bool { return true }

// MaxAttentionHeadDim is the largest head dim the attention kernels take
// (kernels.AttentionHeadDimLimiter): model.Load refuses a config beyond it.
func (d *Device) MaxAttentionHeadDim() int { return maxHeadDim }

var _ kernels.AttentionHeadDimLimiter = (*Device)(nil)

// WriteKV stores the batch's new K and V rows in the paged pool (one
// launch).
func (d *Device) WriteKV(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvHeads, headDim int) {
	const op = "WriteKV"
	kernels.CheckWriteKV(&kv, &l, k, v, kvHeads, headDim)
	rl := kvHeads * headDim
	if l.N*rl == 0 {
		return
	}
	s := d.begin(op)
	pool := s.inout(kv.Pool.Slice(0, kv.Blocks()*kv.BlockStride))
	tab, qs, pos := s.in(kv.Tables.Slice(0, l.B*kv.TableStride)), s.in(l.QStart.Slice(0, l.B+1)), s.in(l.Pos.Slice(0, l.N))
	pk, pv := s.in(k.Slice(0, l.N*rl)), s.in(v.Slice(0, l.N*rl))
	s.launch("write_kv", elementwiseGrid(l.N*rl), argsOf().ptr(pool).i32(int(kv.Pool.DType())).ptr(tab).i32(kv.TableStride).i32(kv.BlockSize).
		i64(kv.BlockStride).i64(kv.KOff).i64(kv.VOff).i64(kv.Blocks()).ptr(qs).ptr(pos).i32(l.B).ptr(pk).ptr(pv).i64(l.N).i32(rl))
	s.end()
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
	s := d.begin(op)
	pool := s.inout(kv.Pool.Slice(0, kv.Blocks()*kv.BlockStride))
	tab, qs, pos := s.in(kv.Tables.Slice(0, l.B*kv.TableStride)), s.in(l.QStart.Slice(0, l.B+1)), s.in(l.Pos.Slice(0, l.N))
	pk, pv := s.inout(k.Slice(0, l.N*rl)), s.in(v.Slice(0, l.N*rl))
	s.launch("write_kv_rope", elementwiseGrid(l.N*rl/2), argsOf().ptr(pool).i32(int(kv.Pool.DType())).ptr(tab).i32(kv.TableStride).i32(kv.BlockSize).
		i64(kv.BlockStride).i64(kv.KOff).i64(kv.VOff).i64(kv.Blocks()).ptr(qs).ptr(pos).i32(l.B).ptr(pk).ptr(pv).i64(l.N).i32(kvHeads).i32(headDim).f64(theta))
	s.end()
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
	s := d.begin(op)
	px, pr, pw := s.inout(x.Slice(0, n)), s.in(res.Slice(0, n)), s.in(w.Slice(0, cols))
	po := s.out(out.Slice(0, n))
	s.launch("add_rmsnorm", rowPlan(rows, 256), argsOf().ptr(po).ptr(px).ptr(pr).ptr(pw).i32(rows).i32(cols).f32(eps))
	s.end()
}
