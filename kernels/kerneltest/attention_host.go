package kerneltest

import "github.com/x/kernels"

// hostSeq is an AttentionSeq of host slices, as the tests build and read
// them; seqBufs wraps a batch for a Backend (no copies).
type hostSeq struct {
	Out, Q, K, V, LSE []float32
	Paged             kernels.PagedKV
	T, Start          int
}

// seqBufs wraps each sequence's slices as host Buffers (nil and empty
// slices become empty Buffers: no LSE, no contiguous K/V).
func seqBufs(seqs []hostSeq) []kernels.AttentionSeq {
	out := make([]kernels.AttentionSeq, len(seqs))
	for i, s := range seqs {
		out[i] = kernels.AttentionSeq{Out: kernels.HostF32(s.Out), Q: kernels.HostF32(s.Q), K: kernels.HostF32(s.K),
			V: kernels.HostF32(s.V), LSE: kernels.HostF32(s.LSE), Paged: s.Paged, T: s.T, Start: s.Start}
	}
	return out
}

// hostGradSeq is an AttentionGradSeq of host slices (K and V empty when
// Paged is set); gradBufs wraps a batch.
type hostGradSeq struct {
	DOut, Q, K, V, Out, LSE, DQ, DK, DV []float32
	Paged                               kernels.PagedKV
	T, Start                            int
}

// gradBufs wraps each sequence's slices as host Buffers.
func gradBufs(seqs []hostGradSeq) []kernels.AttentionGradSeq {
	out := make([]kernels.AttentionGradSeq, len(seqs))
	for i, s := range seqs {
		out[i] = kernels.AttentionGradSeq{DOut: kernels.HostF32(s.DOut), Q: kernels.HostF32(s.Q), K: kernels.HostF32(s.K),
			V: kernels.HostF32(s.V), Out: kernels.HostF32(s.Out), LSE: kernels.HostF32(s.LSE), DQ: kernels.HostF32(s.DQ),
			DK: kernels.HostF32(s.DK), DV: kernels.HostF32(s.DV), Paged: s.Paged, T: s.T, Start: s.Start}
	}
	return out
}
