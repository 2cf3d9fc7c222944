package kernels

// Attention's arguments: a batch of sequences described by Buffers only
// (the token layout, the block tables and the KV pool are I32/F32/BF16
// Buffers in the backend's memory), so that a device runs a decode step
// from fixed addresses with nothing uploaded per op.

// BatchLayout places a batch's new tokens. Sequence s has T_s = QStart[s+1]
// − QStart[s] new tokens, rows QStart[s] .. QStart[s+1]−1 of the batch's
// [N, ...] arrays, at positions Start_s, Start_s+1, ..., where Start_s =
// Pos[QStart[s]]: Pos[QStart[s]+t] = Start_s + t. Keys and values of
// sequence s cover positions 0 .. Start_s+T_s−1, and query t attends to
// positions 0 .. Start_s+t (causal). A sequence may have no new tokens
// (T_s = 0).
//
// QStart and Pos are I32 Buffers (the layout flash-attention's varlen API
// calls cu_seqlens_q, plus positions, which RoPE reads too), so one upload
// per step sets them for every op of the step. MaxT and MaxLen are host
// bounds that a device backend sizes its launches by: they must be at
// least every T_s and every Start_s+T_s, and may be larger (a decode step
// keeps them fixed per batch-size bucket so that its launches repeat).
// When the layout is host memory every value is checked; a device checks
// device-resident values in its kernels.
type BatchLayout struct {
	QStart Buffer // I32 [B+1]: QStart[0] = 0, nondecreasing, QStart[B] = N
	Pos    Buffer // I32 [N]: each row's position
	B, N   int
	MaxT   int // ≥ every T_s
	MaxLen int // ≥ every Start_s + T_s
}

// PagedKV is a paged KV cache as attention reads it: every block lives in
// one Buffer (the pool), and sequences name their blocks by id in block
// tables, so blocks can be shared between sequences (a common prompt) and
// a batch's addresses stay fixed while the pool does not grow.
//
// Block id b occupies Pool[b·BlockStride, (b+1)·BlockStride); inside it
// one layer's keys are [BlockSize, KVH, D] at KOff and its values at VOff.
// Position j of sequence s is row j mod BlockSize of block
// Tables[s·TableStride + j/BlockSize]. A model keeps every layer of a block
// together (layer l's K at 2l·BlockSize·KVH·D), so a copy on write moves a
// whole block with one Copy. The pool is F32 or BF16 (widened exactly to
// float32 before any arithmetic).
type PagedKV struct {
	Pool        Buffer // F32 or BF16 [blocks · BlockStride]
	BlockSize   int    // positions per block; 0: not paged
	BlockStride int    // elements from one block to the next
	KOff, VOff  int    // offsets of this layer's K and V inside a block
	Tables      Buffer // I32 [B, TableStride] block ids
	TableStride int    // entries per sequence in Tables
}

// Blocks is the number of whole blocks in the pool.
func (p *PagedKV) Blocks() int {
	if p.BlockStride <= 0 {
		return 0
	}
	return p.Pool.n / p.BlockStride
}

// AttentionBatch is the argument of Attention: the queries of a batch of
// sequences (Layout), and their keys and values, paged (Paged.BlockSize >
// 0: K, V and KStart are not read) or contiguous (sequence s's positions
// 0 .. Start_s+T_s−1 are rows KStart[s] .. of K and V). A backend reads
// the same floats in the same order from either layout, so paged attention
// equals contiguous attention bit for bit when the blocks hold the same
// values (bf16 blocks: the values rounded to bf16).
type AttentionBatch struct {
	Layout BatchLayout
	Q      Buffer // F32 [N, H, D] (RoPE applied)
	Out    Buffer // F32 [N, H, D] written
	LSE    Buffer // F32 [N, H]: if not empty, the log-sum-exp of each row's scaled scores
	Paged  PagedKV
	K, V   Buffer // F32 [rows, KVH, D] (contiguous layout)
	// KStart (I32 [B+1], nondecreasing, KStart[s] + Start_s + T_s ≤
	// KStart[s+1]) places each sequence's rows in K and V, and in
	// AttentionBackward's DK and DV.
	KStart Buffer
}

// AttentionGradBatch is the argument of AttentionBackward: the forward's
// batch (Out and LSE are the forward's outputs here; LSE is required), the
// gradient of the output, and the gradients written: DQ (=) and DK, DV
// (+=). DK and DV are contiguous whatever the K/V layout, rows KStart[s] ..
// KStart[s]+Start_s+T_s−1 for sequence s: the gradients of the sequence's
// own keys and values (which the model maps back through RoPE and the
// projections), even where blocks are shared.
type AttentionGradBatch struct {
	AttentionBatch
	DOut Buffer // F32 [N, H, D]
	DQ   Buffer // F32 [N, H, D] =
	DK   Buffer // F32 [KStart[B], KVH, D] +=
	DV   Buffer // F32 [KStart[B], KVH, D] +=
}

// HostSeq is one sequence of an attention batch in host memory, as a CPU
// backend's kernels read it: slices of the sequence's own rows (nil where
// the batch has no such array), K and V contiguous (nil when paged).
type HostSeq struct {
	Q, Out, LSE, DOut, DQ []float32 // [T, H, D] rows ([T, H] for LSE)
	K, V, DK, DV          []float32 // [Start+T, KVH, D]
	Paged                 HostPaged
	T, Start              int
}

// HostPaged is a sequence's paged K/V in host memory: the pool and the
// sequence's row of the block table.
type HostPaged struct {
	BlockSize, Stride, KOff, VOff int
	DType                         DType
	F32                           []float32 // the pool, F32
	BF16                          []uint16  // the pool, BF16
	Table                         []int32   // the sequence's block ids
}

// Offset returns the pool offset of position j of kv head kvh of K (v
// false) or V.
func (p *HostPaged) Offset(v bool, j, kvh, kvHeads, d int) int {
	off := p.KOff
	if v {
		off = p.VOff
	}
	return int(p.Table[j/p.BlockSize])*p.Stride + off + ((j%p.BlockSize)*kvHeads+kvh)*d
}

// Row returns position j of kv head kvh of K (v false) or V, D elements:
// a view of an F32 pool, or a BF16 pool's row widened exactly into dst.
func (p *HostPaged) Row(dst []float32, v bool, j, kvh, kvHeads, d int) []float32 {
	o := p.Offset(v, j, kvh, kvHeads, d)
	if p.DType == F32 {
		return p.F32[o : o+d]
	}
	dst = dst[:d]
	for i, u := range p.BF16[o : o+d] {
		dst[i] = BF16ToF32(u)
	}
	return dst
}

// KV returns position j of kv head kvh of K (v false) or V, D elements: a
// view of the contiguous K or V, or a paged row (see HostPaged.Row).
func (s *HostSeq) KV(dst []float32, v bool, j, kvh, kvHeads, d int) []float32 {
	if s.Paged.BlockSize > 0 {
		return s.Paged.Row(dst, v, j, kvh, kvHeads, d)
	}
	src := s.K
	if v {
		src = s.V
	}
	off := (j*kvHeads + kvh) * d
	return src[off : off+d]
}

// Host returns a's sequences as host slices. It panics for device
// memory; call CheckAttention first.
func (a *AttentionBatch) Host(heads, kvHeads, headDim int) []HostSeq {
	return a.host(heads, kvHeads, headDim, nil)
}

// Host returns g's sequences as host slices, gradients included. It panics
// for device memory; call CheckAttentionBackward first.
func (g *AttentionGradBatch) Host(heads, kvHeads, headDim int) []HostSeq {
	return g.AttentionBatch.host(heads, kvHeads, headDim, g)
}

func (a *AttentionBatch) host(heads, kvHeads, headDim int, g *AttentionGradBatch) []HostSeq {
	l := &a.Layout
	qs, pos := l.QStart.I32(), l.Pos.I32()
	nq, rl := heads*headDim, kvHeads*headDim
	rows := func(b Buffer, q0, q1, w int) []float32 {
		if b.n == 0 {
			return nil
		}
		return b.F32()[q0*w : q1*w]
	}
	var ks []int32
	if a.Paged.BlockSize == 0 || g != nil {
		ks = a.KStart.I32()
	}
	var hp HostPaged
	if p := &a.Paged; p.BlockSize > 0 {
		hp = HostPaged{BlockSize: p.BlockSize, Stride: p.BlockStride, KOff: p.KOff, VOff: p.VOff, DType: p.Pool.dtype}
		if hp.DType == F32 {
			hp.F32 = p.Pool.F32()
		} else {
			hp.BF16 = p.Pool.BF16()
		}
	}
	tables := func(s, n int) []int32 {
		w := a.Paged.TableStride
		return a.Paged.Tables.I32()[s*w : s*w+(n+a.Paged.BlockSize-1)/a.Paged.BlockSize]
	}
	out := make([]HostSeq, l.B)
	for s := range out {
		q0, q1 := int(qs[s]), int(qs[s+1])
		h := HostSeq{T: q1 - q0}
		if h.T > 0 {
			h.Start = int(pos[q0])
		}
		n := h.Start + h.T
		h.Q, h.Out, h.LSE = rows(a.Q, q0, q1, nq), rows(a.Out, q0, q1, nq), rows(a.LSE, q0, q1, heads)
		if a.Paged.BlockSize > 0 {
			h.Paged = hp
			h.Paged.Table = tables(s, n)
		} else {
			h.K, h.V = a.K.F32()[int(ks[s])*rl:(int(ks[s])+n)*rl], a.V.F32()[int(ks[s])*rl:(int(ks[s])+n)*rl]
		}
		if g != nil {
			h.DOut, h.DQ = rows(g.DOut, q0, q1, nq), rows(g.DQ, q0, q1, nq)
			h.DK, h.DV = g.DK.F32()[int(ks[s])*rl:(int(ks[s])+n)*rl], g.DV.F32()[int(ks[s])*rl:(int(ks[s])+n)*rl]
		}
		out[s] = h
	}
	return out
}

// Span is one sequence's place in a batch: T new tokens from position
// Start.
type Span struct{ T, Start int }

// AppendLayout appends the I32 layout of spans to dst, QStart [B+1] then
// Pos [N] (see BatchLayout), and returns it with the layout's N, MaxT and
// MaxLen.
func AppendLayout(dst []int32, spans []Span) (out []int32, n, maxT, maxLen int) {
	for _, s := range spans {
		dst = append(dst, int32(n))
		n += s.T
		maxT, maxLen = max(maxT, s.T), max(maxLen, s.Start+s.T)
	}
	dst = append(dst, int32(n))
	for _, s := range spans {
		for t := range s.T {
			dst = append(dst, int32(s.Start+t))
		}
	}
	return dst, n, maxT, maxLen
}

// OneSeq returns the AttentionBatch of one sequence in host memory, K and V
// contiguous: t new tokens from position start, q and out [t, H, D], lse
// [t, H] or nil, k and v [start+t, KVH, D]. Nothing is copied. It is for
// tests and small tools; a model builds its batches in backend memory.
func OneSeq(q, out, lse, k, v []float32, t, start int) AttentionBatch {
	lay, n, _, _ := AppendLayout(nil, []Span{{T: t, Start: start}})
	return AttentionBatch{
		Layout: BatchLayout{QStart: HostI32(lay[:2]), Pos: HostI32(lay[2:]), B: 1, N: n, MaxT: t, MaxLen: start + t},
		Q:      HostF32(q), Out: HostF32(out), LSE: HostF32(lse), K: HostF32(k), V: HostF32(v),
		KStart: HostI32([]int32{0, int32(start + t)}),
	}
}

// AttentionInvariant is implemented by a Backend that says whether its
// Attention is batch-invariant: each query row's output and LSE are the
// same bits whatever else is in the batch, however its sequence's tokens
// are split into calls (a whole prefill, chunks, one decode step at a
// time), with or without the LSE, and whichever kernel variant its shape
// selects. Sampling needs it for the log-probs it records to equal the
// training forward's exactly (the rest of the model must be invariant
// too). kerneltest.AttentionInvariance checks a backend that says so.
type AttentionInvariant interface {
	AttentionBatchInvariant() bool
}

// AttentionHeadDimLimiter is implemented by a backend whose attention
// kernels take head dims up to a bound (kernels/cuda: 256), so that a
// model whose config.json asks for more is refused when it is loaded,
// with its head_dim named, instead of panicking at its first forward.
type AttentionHeadDimLimiter interface {
	MaxAttentionHeadDim() int
}
