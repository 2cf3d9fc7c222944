package ref

import (
	"math"

	"github.com/x/kernels"
)

// Attention is causal grouped-query attention, one (sequence, token, head)
// row at a time: scores in float64, a two-pass softmax, no masking beyond
// causality. Paged K/V (bf16 widened exactly) are read as the contiguous
// layout they stand for.
func (Backend) Attention(a kernels.AttentionBatch, heads, kvHeads, headDim int, scale float32) {
	kernels.CheckAttention(&a, heads, kvHeads, headDim)
	group := heads / kvHeads
	for _, s := range a.Host(heads, kvHeads, headDim) {
		n := s.Start + s.T
		k, v := contiguous(&s, n, kvHeads, headDim)
		scores := make([]float64, n)
		acc := make([]float64, headDim)
		for t := 0; t < s.T; t++ {
			for h := 0; h < heads; h++ {
				q := s.Q[(t*heads+h)*headDim : (t*heads+h+1)*headDim]
				kvh := h / group
				last := s.Start + t // inclusive
				mx := math.Inf(-1)
				for j := 0; j <= last; j++ {
					kr := k[(j*kvHeads+kvh)*headDim : (j*kvHeads+kvh+1)*headDim]
					var d float64
					for i := range q {
						d += float64(q[i]) * float64(kr[i])
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
					vr := v[(j*kvHeads+kvh)*headDim : (j*kvHeads+kvh+1)*headDim]
					p := scores[j] / sum
					for i := range acc {
						acc[i] += p * float64(vr[i])
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

// contiguous returns the n positions of s's K and V as contiguous [n, KVH,
// D] arrays: s's own when they are contiguous, else copies of the paged
// rows (bf16 widened exactly).
func contiguous(s *kernels.HostSeq, n, kvHeads, headDim int) (k, v []float32) {
	if s.Paged.BlockSize == 0 {
		return s.K, s.V
	}
	k = make([]float32, n*kvHeads*headDim)
	v = make([]float32, n*kvHeads*headDim)
	for j := range n {
		for h := range kvHeads {
			o := (j*kvHeads + h) * headDim
			copy(k[o:o+headDim], s.Paged.Row(k[o:o+headDim], false, j, h, kvHeads, headDim))
			copy(v[o:o+headDim], s.Paged.Row(v[o:o+headDim], true, j, h, kvHeads, headDim))
		}
	}
	return k, v
}

// WriteKV stores each row of k and v at its position in the paged cache,
// rounding to bf16 for a BF16 pool.
func (Backend) WriteKV(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvHeads, headDim int) {
	kernels.CheckWriteKV(&kv, &l, k, v, kvHeads, headDim)
	rl := kvHeads * headDim
	qs, pos, tab := l.QStart.I32(), l.Pos.I32(), kv.Tables.I32()
	for s := range l.B {
		for i := int(qs[s]); i < int(qs[s+1]); i++ {
			p := int(pos[i])
			base := int(tab[s*kv.TableStride+p/kv.BlockSize])*kv.BlockStride + (p%kv.BlockSize)*rl
			for _, w := range [2]struct {
				off int
				src []float32
			}{{kv.KOff, k.F32()[i*rl : (i+1)*rl]}, {kv.VOff, v.F32()[i*rl : (i+1)*rl]}} {
				o := base + w.off
				if kv.Pool.DType() == kernels.F32 {
					copy(kv.Pool.F32()[o:o+rl], w.src)
					continue
				}
				d := kv.Pool.BF16()[o : o+rl]
				for j, x := range w.src {
					d[j] = kernels.F32ToBF16(x)
				}
			}
		}
	}
}

// AttentionBatchInvariant reports true: every row is computed on its own,
// in float64, the same way whatever the batch (kernels.AttentionInvariant).
func (Backend) AttentionBatchInvariant() bool { return true }
