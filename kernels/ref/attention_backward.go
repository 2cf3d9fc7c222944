package ref

import (
	"math"

	"github.com/x/kernels"
)

// AttentionBackward computes the gradients of causal grouped-query
// attention from the forward's Out and LSE, row by row in float64:
//
//	P[t,j]  = exp(scale·q_t·k_j − LSE[t])   for j ≤ Start+t
//	D[t]    = Σ dOut_t ∘ Out_t
//	dS[t,j] = P[t,j]·(dOut_t·v_j − D[t])
//	dQ_t    = scale·Σ_j dS[t,j]·k_j                 (=)
//	dK_j   += scale·Σ_t dS[t,j]·q_t                 (+=, summed over the query heads of the kv head)
//	dV_j   += Σ_t P[t,j]·dOut_t                     (+=)
//
// Query head h uses kv head h/(heads/kvHeads). DK and DV are summed in
// float64 over the whole sequence and added once. Paged K/V (bf16 widened
// exactly) are read as the contiguous layout they stand for.
func (Backend) AttentionBackward(g kernels.AttentionGradBatch, heads, kvHeads, headDim int, scale float32) {
	kernels.CheckAttentionBackward(&g, heads, kvHeads, headDim)
	group := heads / kvHeads
	d := headDim
	sc := float64(scale)
	for _, s := range g.Host(heads, kvHeads, headDim) {
		nkv := (s.Start + s.T) * kvHeads * d
		s.K, s.V = contiguous(&s, s.Start+s.T, kvHeads, d)

		dk := make([]float64, nkv)
		dv := make([]float64, nkv)
		dq := make([]float64, d)
		for t := range s.T {
			for h := range heads {
				g := h / group
				qo := (t*heads + h) * d
				q, do, out := s.Q[qo:qo+d], s.DOut[qo:qo+d], s.Out[qo:qo+d]
				var dsum float64
				for i := range d {
					dsum += float64(do[i]) * float64(out[i])
				}
				lse := float64(s.LSE[t*heads+h])
				clear(dq)
				for j := 0; j <= s.Start+t; j++ {
					ko := (j*kvHeads + g) * d
					k, v := s.K[ko:ko+d], s.V[ko:ko+d]
					var qk, dov float64
					for i := range d {
						qk += float64(q[i]) * float64(k[i])
						dov += float64(do[i]) * float64(v[i])
					}
					p := math.Exp(sc*qk - lse)
					ds := p * (dov - dsum)
					for i := range d {
						dq[i] += sc * ds * float64(k[i])
						dk[ko+i] += sc * ds * float64(q[i])
						dv[ko+i] += p * float64(do[i])
					}
				}
				for i := range d {
					s.DQ[qo+i] = float32(dq[i])
				}
			}
		}
		for i := range nkv {
			s.DK[i] = float32(float64(s.DK[i]) + dk[i])
			s.DV[i] = float32(float64(s.DV[i]) + dv[i])
		}
	}
}
