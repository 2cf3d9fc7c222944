package ref

import (
	"math"

	"github.com/x/kernels"
)

// PolicyLoss is the specification of kernels.Backend.PolicyLoss, token by
// token in float64 with the formulas of kernels.LossParams written out.
func (Backend) PolicyLoss(out kernels.LossOutput, in kernels.LossInput, p kernels.LossParams, n int) {
	kernels.CheckPolicyLoss(out, in, p, n)
	policyLoss(out.Host(), in.Host(), p, n)
}

// policyLoss is PolicyLoss on host slices (nil: absent).
func policyLoss(out kernels.HostLossOutput, in kernels.HostLossInput, p kernels.LossParams, n int) {
	mask := func(t int) float64 {
		if in.Mask == nil {
			return 1
		}
		return float64(in.Mask[t])
	}
	delta := func(t int) float64 {
		if in.OldLogP == nil {
			return 0
		}
		return float64(in.LogP[t]) - float64(in.OldLogP[t])
	}
	// Per-token ratio logs, or one per sequence.
	logw := make([]float64, n)
	phi := make([]float64, n)
	for t := range n {
		logw[t], phi[t] = delta(t), 1
	}
	segs := [][2]int{{0, n}}
	if in.Seg != nil {
		segs = segs[:0]
		for s := 0; s+1 < len(in.Seg); s++ {
			segs = append(segs, [2]int{int(in.Seg[s]), int(in.Seg[s+1])})
		}
	}
	adv := func(t int) float64 {
		if in.Adv != nil {
			return float64(in.Adv[t])
		}
		for s, sg := range segs {
			if t >= sg[0] && t < sg[1] {
				return float64(in.SeqAdv[s])
			}
		}
		panic("unreachable: token outside every segment")
	}
	if p.SequenceRatio {
		for _, sg := range segs {
			var sum, cnt float64
			for t := sg[0]; t < sg[1]; t++ {
				sum += mask(t) * delta(t)
				cnt += mask(t)
			}
			for t := sg[0]; t < sg[1]; t++ {
				logw[t] = sum / math.Max(cnt, 1)
			}
		}
	}
	vespoW := make([]float64, n) // VESPO's sequence ratio
	if p.Objective == kernels.ObjectiveVESPO {
		for _, sg := range segs {
			var sum float64
			for t := sg[0]; t < sg[1]; t++ {
				sum += mask(t) * math.Min(math.Max(delta(t), -20), 20)
				if in.ISRatio != nil {
					sum += mask(t) * math.Min(math.Max(math.Log(float64(in.ISRatio[t])), math.Log(1e-8)), 20)
				}
			}
			lw := math.Min(math.Max(sum, math.Log(1e-8)), 20)
			w := math.Exp(lw)
			for t := sg[0]; t < sg[1]; t++ {
				k, lam := float64(p.VESPOKPos), float64(p.VESPOLambdaPos)
				if adv(t) < 0 {
					k, lam = float64(p.VESPOKNeg), float64(p.VESPOLambdaNeg)
				}
				lam = math.Max(lam, 1e-4)
				f := math.Exp(lam + k*lw - lam*w)
				if math.IsNaN(f) || math.IsInf(f, 0) {
					f = 0
				}
				vespoW[t], phi[t] = w, f
			}
		}
	}
	// dldw[t] = Weight_t · d(loss_t)/dw (for the ratio's chain rule); dlogp
	// collects the direct terms.
	dldw := make([]float64, n)
	dlogp := make([]float64, n)
	epsLo, epsHi := 1-float64(p.EpsLow), 1+float64(p.EpsHigh)
	for t := range n {
		a, wt, lp := adv(t), float64(in.Weight[t]), float64(in.LogP[t])
		w := math.Exp(logw[t])
		var l, dw, direct float64 // ℓ, dℓ/dw and ∂ℓ/∂logp at fixed w
		ratio := w
		var clip uint8
		switch p.Objective {
		case kernels.ObjectiveClipped:
			wc, capped := w, false
			if p.Delta > 0 && w > float64(p.Delta) {
				wc, capped = float64(p.Delta), true
			}
			c := math.Min(math.Max(w, epsLo), epsHi)
			if wc*a <= c*a {
				l = -wc * a
				if !capped {
					dw = -a
				}
			} else {
				l = -c * a
				if w >= epsLo && w <= epsHi {
					dw = -a
				}
			}
			ratio = wc
			if wc < epsLo && a < 0 {
				clip |= kernels.ClipLow
			}
			if wc > epsHi && a > 0 {
				clip |= kernels.ClipHigh
			}
		case kernels.ObjectiveCISPO:
			c := math.Min(w, float64(p.EpsHigh))
			l, direct = -c*a*lp, -c*a
			if w > float64(p.EpsHigh) && a > 0 {
				clip |= kernels.ClipHigh
			}
		case kernels.ObjectiveSAPO:
			tau := float64(p.SAPOTauNeg)
			if a > 0 {
				tau = float64(p.SAPOTauPos)
			}
			sg := 1 / (1 + math.Exp(-tau*(w-1)))
			l = -(4 / tau) * sg * a
			dw = -4 * sg * (1 - sg) * a
		case kernels.ObjectiveVESPO:
			l, direct = -phi[t]*a*lp, -phi[t]*a
		case kernels.ObjectivePG:
			l, direct = -a*lp, -a
		}
		if in.ISRatio != nil && p.Objective != kernels.ObjectiveVESPO {
			rho := float64(in.ISRatio[t])
			l, dw, direct = l*rho, dw*rho, direct*rho
		}
		var kl float64
		if p.Beta != 0 {
			x := float64(in.RefLogP[t]) - lp
			kl = math.Exp(x) - x - 1
			dkl := 1 - math.Exp(x)
			if p.KLBiasCorrection { // β·w·KL: through KL at fixed w, and through w
				dw += float64(p.Beta) * kl
				kl, dkl = w*kl, w*dkl
			}
			direct += float64(p.Beta) * dkl
		}
		dlogp[t] += wt * direct
		var h float64
		if p.EntropyCoef != 0 {
			h = float64(in.Entropy[t])
		}
		out.Loss[t] = float32(wt * (l + float64(p.Beta)*kl - float64(p.EntropyCoef)*h))
		dldw[t] = wt * dw
		if out.DEntropy != nil {
			out.DEntropy[t] = float32(-float64(p.EntropyCoef) * wt)
		}
		if out.Ratio != nil {
			if p.Objective == kernels.ObjectiveVESPO {
				ratio = vespoW[t]
			}
			out.Ratio[t] = float32(ratio)
		}
		if out.KL != nil {
			out.KL[t] = float32(kl)
		}
		if out.Clip != nil {
			out.Clip[t] = clip
		}
		if out.Phi != nil {
			out.Phi[t] = float32(phi[t])
		}
	}
	// The ratio's gradient: w = exp(logw); token level d logw_t/d logp_t = 1;
	// sequence level d logw/d logp_u = mask_u / max(Σ mask, 1) for every u
	// of the sequence. Without OldLogP the ratio is exp(logp − sg(logp)).
	if p.SequenceRatio {
		for _, sg := range segs {
			var g, cnt float64
			for t := sg[0]; t < sg[1]; t++ {
				g += dldw[t] * math.Exp(logw[t])
				cnt += mask(t)
			}
			for t := sg[0]; t < sg[1]; t++ {
				dlogp[t] += g * mask(t) / math.Max(cnt, 1)
			}
		}
	} else {
		for t := range n {
			dlogp[t] += dldw[t] * math.Exp(logw[t])
		}
	}
	for t := range n {
		out.DLogP[t] = float32(dlogp[t])
	}
}
