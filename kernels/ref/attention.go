package ref

import (
	"fmt"
	"math"

	"github.com/x/kernels"
)

// Attention is causal grouped-query attention, one (sequence, token, head)
// row at a time: scores in float64, a two-pass softmax, no masking beyond
// causality.
func (Backend) Attention(seqs []kernels.AttentionSeq, heads, kvHeads, headDim int, scale float32) {
	const op = "Attention"
	checkHeads(op, heads, kvHeads, headDim)
	group := heads / kvHeads
	for si, s := range seqs {
		n := s.Start + s.T
		if s.Paged.BlockSize > 0 {
			s.K, s.V = unpage(op, si, &s.Paged, n, kvHeads, headDim)
		}
		checkSeq(op, si, s.Q, s.K, s.V, s.Out, s.LSE, s.T, s.Start, heads, kvHeads, headDim)
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

// checkHeads panics unless the head counts describe grouped-query attention.
func checkHeads(op string, heads, kvHeads, headDim int) {
	if heads <= 0 || kvHeads <= 0 || headDim <= 0 || heads%kvHeads != 0 {
		panic(fmt.Sprintf("kernels/ref: %s: heads %d, kvHeads %d, headDim %d: need positive sizes and heads a multiple of kvHeads",
			op, heads, kvHeads, headDim))
	}
}

// checkSeq panics unless the buffers of sequence si fit its T and Start.
func checkSeq(op string, si int, q, k, v, out, lse []float32, t, start, heads, kvHeads, headDim int) {
	if t < 0 || start < 0 {
		panic(fmt.Sprintf("kernels/ref: %s: seq %d: T %d, Start %d", op, si, t, start))
	}
	arg := func(name string) string { return fmt.Sprintf("seq %d %s", si, name) }
	need(op, arg("Q"), len(q), t*heads*headDim)
	need(op, arg("Out"), len(out), t*heads*headDim)
	need(op, arg("K"), len(k), (start+t)*kvHeads*headDim)
	need(op, arg("V"), len(v), (start+t)*kvHeads*headDim)
	if lse != nil {
		need(op, arg("LSE"), len(lse), t*heads)
	}
}

// unpage copies the n positions of a paged sequence into contiguous
// [n, KVH, D] K and V (bf16 widened exactly): the reference reads paged
// K/V as the contiguous layout it stands for.
func unpage(op string, si int, p *kernels.PagedKV, n, kvHeads, headDim int) (k, v []float32) {
	if err := p.Check(n, kvHeads*headDim); err != nil {
		panic(fmt.Sprintf("kernels/ref: %s: seq %d: %v", op, si, err))
	}
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
