package cuda

import "github.com/x/kernels"

// blockTables uploads the block tables of p's blocks that hold n positions
// of rowLen elements (device addresses, K then V) and returns their
// addresses. The addresses are computed on the host from the Buffers; no
// data crosses.
func blockTables(s *session, p *kernels.PagedKV, n, rowLen int) (kb, vb uintptr) {
	blocks, size := ceilDiv(n, p.BlockSize), p.BlockSize*rowLen
	kt, vt := make([]uint64, max(blocks, 1)), make([]uint64, max(blocks, 1))
	for b := range blocks {
		kt[b], vt[b] = uint64(s.in(p.K[b].Slice(0, size))), uint64(s.in(p.V[b].Slice(0, size)))
	}
	return uintptr(s.value(bytesOf(kt))), uintptr(s.value(bytesOf(vt)))
}

// Attention is causal GQA attention over a batch of sequences, with K and V
// contiguous or in a paged KV cache (f32 or bf16 blocks).
func (d *Device) Attention(seqs []kernels.AttentionSeq, heads, kvHeads, headDim int, scale float32) {
	const op = "Attention"
	kernels.CheckAttention(seqs, heads, kvHeads, headDim)
	checkHeads(op, heads, kvHeads, headDim) // the kernels' head-dim limit
	maxT := 0
	for _, sq := range seqs {
		maxT = max(maxT, sq.T)
	}
	if maxT == 0 || heads == 0 || headDim == 0 {
		return
	}
	s := d.begin(op)
	desc := make([]attnSeq, len(seqs))
	for i, sq := range seqs {
		th, n := sq.T*heads*headDim, sq.Start+sq.T
		desc[i] = attnSeq{q: uintptr(s.in(sq.Q.Slice(0, th))), out: uintptr(s.inout(sq.Out.Slice(0, th))), t: int64(sq.T), start: int64(sq.Start)}
		if sq.LSE.Len() > 0 {
			desc[i].lse = uintptr(s.inout(sq.LSE.Slice(0, sq.T*heads)))
		}
		if sq.Paged.BlockSize > 0 {
			desc[i].kb, desc[i].vb = blockTables(s, &sq.Paged, n, kvHeads*headDim)
			desc[i].blockSize, desc[i].dtype = int64(sq.Paged.BlockSize), int64(sq.Paged.DType)
		} else {
			nk := n * kvHeads * headDim
			desc[i].k, desc[i].v = uintptr(s.in(sq.K.Slice(0, nk))), uintptr(s.in(sq.V.Slice(0, nk)))
		}
	}
	pd := s.value(bytesOf(desc))
	s.launch("attention_forward", warpRowsPlan(maxT*heads, len(seqs)), argsOf().ptr(pd).i32(heads).i32(kvHeads).i32(headDim).f32(scale))
	s.end()
}

// AttentionBackward writes DQ and accumulates DK, DV for each sequence,
// with K and V contiguous or in a paged KV cache (f32 or bf16 blocks).
func (d *Device) AttentionBackward(seqs []kernels.AttentionGradSeq, heads, kvHeads, headDim int, scale float32) {
	const op = "AttentionBackward"
	kernels.CheckAttentionBackward(seqs, heads, kvHeads, headDim)
	checkHeads(op, heads, kvHeads, headDim) // the kernels' head-dim limit
	maxT, maxS := 0, 0
	for _, sq := range seqs {
		maxT, maxS = max(maxT, sq.T), max(maxS, sq.Start+sq.T)
	}
	if maxT == 0 || heads == 0 || headDim == 0 {
		return
	}
	s := d.begin(op)
	desc := make([]attnGradSeq, len(seqs))
	in := func(b kernels.Buffer, n int) uintptr { return uintptr(s.in(b.Slice(0, n))) }
	acc := func(b kernels.Buffer, n int) uintptr { return uintptr(s.inout(b.Slice(0, n))) }
	for i, sq := range seqs {
		n := sq.Start + sq.T
		th, nk := sq.T*heads*headDim, n*kvHeads*headDim
		desc[i] = attnGradSeq{dout: in(sq.DOut, th), q: in(sq.Q, th), out: in(sq.Out, th),
			lse: in(sq.LSE, sq.T*heads), dq: acc(sq.DQ, th), dk: acc(sq.DK, nk), dv: acc(sq.DV, nk),
			di: uintptr(s.scratch(int64(sq.T*heads) * 4)), t: int64(sq.T), start: int64(sq.Start)}
		if sq.Paged.BlockSize > 0 {
			desc[i].kb, desc[i].vb = blockTables(s, &sq.Paged, n, kvHeads*headDim)
			desc[i].blockSize, desc[i].dtype = int64(sq.Paged.BlockSize), int64(sq.Paged.DType)
		} else {
			desc[i].k, desc[i].v = in(sq.K, nk), in(sq.V, nk)
		}
	}
	pd := s.value(bytesOf(desc))
	a := func() *args { return argsOf().ptr(pd).i32(heads).i32(kvHeads).i32(headDim).f32(scale) }
	s.launch("attention_backward_dq", warpRowsPlan(maxT*heads, len(seqs)), a())
	s.launch("attention_backward_dkdv", warpRowsPlan(maxS*kvHeads, len(seqs)), a())
	s.end()
}
