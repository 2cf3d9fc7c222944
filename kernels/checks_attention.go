package kernels

import "fmt"

// Checks of the attention ops and the KV write. The shapes are checked
// always; the index values (the layout, KStart, the block tables) only
// where they are host memory, as for every index argument: a device
// backend's kernels guard device-resident ones.

// attnPanic panics with a message naming op.
func attnPanic(op, format string, args ...any) {
	panic(fmt.Sprintf("kernels: %s: %s", op, fmt.Sprintf(format, args...)))
}

// check panics unless l is a layout of B sequences and N rows: I32 QStart
// [B+1] and Pos [N], and where they are host memory, QStart running from 0
// to N, positions consecutive within each sequence and every T and
// Start+T within MaxT and MaxLen.
func (l *BatchLayout) check(op string) {
	if l.B < 0 || l.N < 0 || l.MaxT < 0 || l.MaxLen < 0 {
		attnPanic(op, "layout B %d, N %d, MaxT %d, MaxLen %d", l.B, l.N, l.MaxT, l.MaxLen)
	}
	needI32(op, "Layout.QStart", l.QStart, l.B+1)
	needI32(op, "Layout.Pos", l.Pos, l.N)
	if !l.QStart.Host() || !l.Pos.Host() {
		return
	}
	qs, pos := l.QStart.I32()[:l.B+1], l.Pos.I32()[:l.N]
	if qs[0] != 0 || int(qs[l.B]) != l.N {
		attnPanic(op, "Layout.QStart runs from %d to %d, want 0 to N = %d", qs[0], qs[l.B], l.N)
	}
	for s := range l.B {
		q0, q1 := int(qs[s]), int(qs[s+1])
		if q1 < q0 || q1 > l.N {
			attnPanic(op, "Layout.QStart[%d:%d] = %d, %d: not nondecreasing within [0, %d]", s, s+2, q0, q1, l.N)
		}
		if q1-q0 > l.MaxT {
			attnPanic(op, "sequence %d has %d tokens, more than MaxT %d", s, q1-q0, l.MaxT)
		}
		if q1 == q0 {
			continue
		}
		start := int(pos[q0])
		if start < 0 || start+q1-q0 > l.MaxLen {
			attnPanic(op, "sequence %d: positions %d .. %d outside [0, MaxLen %d)", s, start, start+q1-q0-1, l.MaxLen)
		}
		for t := range q1 - q0 {
			if int(pos[q0+t]) != start+t {
				attnPanic(op, "sequence %d: Layout.Pos[%d] = %d, want %d (positions are consecutive)", s, q0+t, pos[q0+t], start+t)
			}
		}
	}
}

// spans returns each sequence's T and Start from a host layout (nil for
// device memory).
func (l *BatchLayout) spans() []Span {
	if !l.QStart.Host() || !l.Pos.Host() {
		return nil
	}
	qs, pos := l.QStart.I32(), l.Pos.I32()
	out := make([]Span, l.B)
	for s := range out {
		out[s].T = int(qs[s+1] - qs[s])
		if out[s].T > 0 {
			out[s].Start = int(pos[qs[s]])
		}
	}
	return out
}

// check panics unless p is a paged KV cache for b sequences of rowLen
// (KVH·D) elements per position and up to maxLen positions: an F32 or
// BF16 pool, each layer's K and V inside a block, an I32 table of
// TableStride ≥ ⌈maxLen/BlockSize⌉ entries per sequence, and (host
// tables) every block a sequence of spans reads inside the pool.
func (p *PagedKV) check(op string, b, rowLen, maxLen int, spans []Span) {
	if p.Pool.dtype != F32 && p.Pool.dtype != BF16 {
		attnPanic(op, "paged KV pool holds %v, want F32 or BF16", p.Pool.dtype)
	}
	size := p.BlockSize * rowLen
	if p.KOff < 0 || p.VOff < 0 || p.KOff+size > p.BlockStride || p.VOff+size > p.BlockStride {
		attnPanic(op, "paged KV: K at %d and V at %d of %d elements do not fit a block stride of %d", p.KOff, p.VOff, size, p.BlockStride)
	}
	if p.TableStride*p.BlockSize < maxLen {
		attnPanic(op, "paged KV: %d table entries of %d positions hold fewer than MaxLen %d", p.TableStride, p.BlockSize, maxLen)
	}
	needI32(op, "Paged.Tables", p.Tables, b*p.TableStride)
	if !p.Tables.Host() || spans == nil {
		return
	}
	blocks, tab := p.Blocks(), p.Tables.I32()
	for s, sp := range spans {
		for i := range (sp.Start + sp.T + p.BlockSize - 1) / p.BlockSize {
			if id := tab[s*p.TableStride+i]; id < 0 || int(id) >= blocks {
				attnPanic(op, "paged KV: sequence %d block %d is id %d, outside the pool's [0, %d)", s, i, id, blocks)
			}
		}
	}
}

// namedBuf is an argument and its name, for checks.
type namedBuf struct {
	name string
	buf  Buffer
}

// checkKStart panics unless KStart (I32 [B+1]) places every sequence of
// spans in rows of rowLen elements that every buffer of bufs holds: each
// sequence's Start+T rows from KStart[s], not overlapping the next one.
func checkKStart(op string, kStart Buffer, b int, spans []Span, rowLen int, bufs []namedBuf) {
	needI32(op, "KStart", kStart, b+1)
	if !kStart.Host() || spans == nil {
		return
	}
	ks := kStart.I32()[:b+1]
	if ks[0] < 0 {
		attnPanic(op, "KStart[0] = %d", ks[0])
	}
	for s, sp := range spans {
		if int(ks[s])+sp.Start+sp.T > int(ks[s+1]) {
			attnPanic(op, "KStart[%d:%d] = %d, %d: sequence %d needs %d rows", s, s+2, ks[s], ks[s+1], s, sp.Start+sp.T)
		}
	}
	for _, nb := range bufs {
		needF32(op, nb.name, nb.buf, int(ks[b])*rowLen)
	}
}

// CheckAttention checks Attention: grouped-query head counts, a valid
// layout (BatchLayout), F32 Q and Out [N, H, D], LSE [N, H] if not empty,
// and the keys and values: paged (PagedKV) or contiguous (K and V placed by
// KStart).
func CheckAttention(a *AttentionBatch, heads, kvHeads, headDim int) {
	const op = "Attention"
	checkHeads(op, heads, kvHeads, headDim)
	a.check(op, heads, kvHeads, headDim)
	if a.Paged.BlockSize == 0 {
		checkKStart(op, a.KStart, a.Layout.B, a.Layout.spans(), kvHeads*headDim, []namedBuf{{"K", a.K}, {"V", a.V}})
	}
}

// check checks what Attention and AttentionBackward share: the layout, Q,
// Out, LSE, and paged K/V.
func (a *AttentionBatch) check(op string, heads, kvHeads, headDim int) {
	l := &a.Layout
	l.check(op)
	nq := l.N * heads * headDim
	needF32(op, "Q", a.Q, nq)
	needF32(op, "Out", a.Out, nq)
	if a.LSE.n > 0 {
		needF32(op, "LSE", a.LSE, l.N*heads)
	}
	if a.Paged.BlockSize < 0 {
		attnPanic(op, "paged KV block size %d", a.Paged.BlockSize)
	}
	if a.Paged.BlockSize > 0 {
		a.Paged.check(op, l.B, kvHeads*headDim, l.MaxLen, l.spans())
	}
}

// CheckAttentionBackward checks AttentionBackward: what CheckAttention
// checks (LSE required), F32 DOut and DQ [N, H, D], and DK and DV placed by
// KStart (with K and V too when they are contiguous).
func CheckAttentionBackward(g *AttentionGradBatch, heads, kvHeads, headDim int) {
	const op = "AttentionBackward"
	checkHeads(op, heads, kvHeads, headDim)
	g.check(op, heads, kvHeads, headDim)
	nq := g.Layout.N * heads * headDim
	needF32(op, "LSE", g.LSE, g.Layout.N*heads)
	needF32(op, "DOut", g.DOut, nq)
	needF32(op, "DQ", g.DQ, nq)
	bufs := []namedBuf{{"DK", g.DK}, {"DV", g.DV}}
	if g.Paged.BlockSize == 0 {
		bufs = append(bufs, namedBuf{"K", g.K}, namedBuf{"V", g.V})
	}
	checkKStart(op, g.KStart, g.Layout.B, g.Layout.spans(), kvHeads*headDim, bufs)
}

// CheckWriteKV checks WriteKV: a valid layout, F32 k and v [N, KVH·D], and
// a paged KV cache whose tables hold every position written.
func CheckWriteKV(kv *PagedKV, l *BatchLayout, k, v Buffer, kvHeads, headDim int) {
	const op = "WriteKV"
	if kvHeads <= 0 || headDim <= 0 {
		attnPanic(op, "kvHeads %d, headDim %d", kvHeads, headDim)
	}
	l.check(op)
	rl := kvHeads * headDim
	needF32(op, "k", k, l.N*rl)
	needF32(op, "v", v, l.N*rl)
	if kv.BlockSize <= 0 {
		attnPanic(op, "paged KV block size %d", kv.BlockSize)
	}
	kv.check(op, l.B, rl, l.MaxLen, l.spans())
}
