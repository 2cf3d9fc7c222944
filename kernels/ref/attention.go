package ref

import (
	"math"

	"github.com/x/kernels"
)

// Attention is causal grouped-query attention, one (sequence, token, head)
// row at a time: scores in float64, a two-pass softmax, no masking beyond
// causality.
func (Backend) Attention(seqs []kernels.AttentionSeq, heads, kvHeads, headDim int, scale float32) {
	kernels.CheckAttention(seqs, heads, kvHeads, headDim)
	group := heads / kvHeads
	for _, sq := range seqs {
		n := sq.Start + sq.T
		s := hostSeq{Q: sq.Q.F32(), Out: sq.Out.F32(), LSE: sq.LSE.F32(), T: sq.T, Start: sq.Start}
		if sq.Paged.BlockSize > 0 {
			s.K, s.V = unpage(&sq.Paged, n, kvHeads, headDim)
		} else {
			s.K, s.V = sq.K.F32(), sq.V.F32()
		}
		scores := make([]float64, n)
		acc := make([]float64, headDim)
		for t := 0; t < s.T; t++ {
			for h := 0; h < heads; h++ {
				q := s.Q[(t*heads+h)*headDim : (t*heads+h+1)*headDim]
				kvh := h / group
				last := s.Start + t // inclusive
				mx := math.Inf(-1)
				for j := 0; j <= last; j++ {
					k := s.K[(j*kvHeads+kvh)*headDim : (j*kvHeads+kvh+1)*headDim]
					var d float64
					for i := range q {
						d += float64(q[i]) * float64(k[i])
					}
					scores[j] = d * float64(scale)
					mx = math.Max(mx, scores[j])
				}
				var sum float64
				for j := 0; j <= last; j++ {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				clear(acc)
				for j := 0; j <= last; j++ {
					v := s.V[(j*kvHeads+kvh)*headDim : (j*kvHeads+kvh+1)*headDim]
					p := scores[j] / sum
					for i := range acc {
						acc[i] += p * float64(v[i])
					}
				}
				o := s.Out[(t*heads+h)*headDim : (t*heads+h+1)*headDim]
				for i := range o {
					o[i] = float32(acc[i])
				}
				if s.LSE != nil {
					s.LSE[t*heads+h] = float32(mx + math.Log(sum))
				}
			}
		}
	}
}

// hostSeq is an AttentionSeq as host slices, K and V contiguous.
type hostSeq struct {
	Q, K, V, Out, LSE []float32
	T, Start          int
}

// unpage copies the n positions of a paged sequence into contiguous
// [n, KVH, D] K and V (bf16 widened exactly): the reference reads paged
// K/V as the contiguous layout it stands for (CheckAttention has checked
// the blocks).
func unpage(p *kernels.PagedKV, n, kvHeads, headDim int) (k, v []float32) {
	k = make([]float32, n*kvHeads*headDim)
	v = make([]float32, n*kvHeads*headDim)
	for j := range n {
		for h := range kvHeads {
			o := (j*kvHeads + h) * headDim
			copy(k[o:o+headDim], p.Row(k[o:o+headDim], false, j, h, kvHeads, headDim))
			copy(v[o:o+headDim], p.Row(v[o:o+headDim], true, j, h, kvHeads, headDim))
		}
	}
	return k, v
}
