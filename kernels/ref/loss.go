package ref

import (
	"math"

	"github.com/x/kernels"
)

// PolicyLoss is the specification of kernels.Backend.PolicyLoss, token by
// token in float64 with the formulas of kernels.LossParams written out: the
// one statement of the policy loss every backend and the trainer are held
// to.
func (Backend) PolicyLoss(out kernels.LossOutput, in kernels.LossInput, p kernels.LossParams, n int) {
	kernels.CheckPolicyLoss(out, in, p, n)
	policyLoss(out.Host(), in.Host(), p, n)
}

// lossSeq is what PolicyLoss computes once per sequence before its tokens.
type lossSeq struct {
	lo, hi int
	cnt    float64 // Σ mask
	logw   float64 // the sequence's log-ratio (SequenceRatio)
	vespoW float64 // VESPO's sequence ratio w and its log
	vespoL float64
	offAvg float64 // mean of sampling − logp over the mask (OffPolicyMask)
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
	// sampling is the off-policy mask's sampling log-prob: SamplingLogP,
	// else OldLogP, else LogP (TRL's fallbacks).
	sampling := func(t int) float64 {
		switch {
		case in.SamplingLogP != nil:
			return float64(in.SamplingLogP[t])
		case in.OldLogP != nil:
			return float64(in.OldLogP[t])
		}
		return float64(in.LogP[t])
	}
	var segs []lossSeq
	if in.Seg == nil {
		segs = []lossSeq{{lo: 0, hi: n}}
	} else {
		for s := 0; s+1 < len(in.Seg); s++ {
			segs = append(segs, lossSeq{lo: int(in.Seg[s]), hi: int(in.Seg[s+1])})
		}
	}
	// Per-sequence sums.
	for i := range segs {
		sg := &segs[i]
		var sum, vsum, off float64
		for t := sg.lo; t < sg.hi; t++ {
			m := mask(t)
			sg.cnt += m
			sum += m * delta(t)
			vsum += m * math.Min(math.Max(delta(t), -20), 20)
			if in.ISRatio != nil {
				vsum += m * math.Min(math.Max(math.Log(float64(in.ISRatio[t])), math.Log(1e-8)), 20)
			}
			off += m * (sampling(t) - float64(in.LogP[t]))
		}
		sg.logw = sum / math.Max(sg.cnt, 1)
		sg.vespoL = math.Min(math.Max(vsum, math.Log(1e-8)), 20)
		sg.vespoW = math.Exp(sg.vespoL)
		sg.offAvg = off / math.Max(sg.cnt, 1)
	}
	segOf := make([]int, n)
	for i, sg := range segs {
		for t := sg.lo; t < sg.hi; t++ {
			segOf[t] = i
		}
	}
	adv := func(t int) float64 {
		if in.Adv != nil {
			return float64(in.Adv[t])
		}
		return float64(in.SeqAdv[segOf[t]])
	}
	logw := func(t int) float64 {
		if p.SequenceRatio {
			return segs[segOf[t]].logw
		}
		return delta(t)
	}
	// dldw[t] = Weight_t · d(loss_t)/dw (for the ratio's chain rule); dlogp
	// collects the direct terms.
	dldw := make([]float64, n)
	dlogp := make([]float64, n)
	epsLo, epsHi := 1-float64(p.EpsLow), 1+float64(p.EpsHigh)
	for t := range n {
		sg := segs[segOf[t]]
		a, wt, lp := adv(t), float64(in.Weight[t]), float64(in.LogP[t])
		w := math.Exp(logw(t))
		var l, dw, direct float64 // ℓ, dℓ/dw and ∂ℓ/∂logp at fixed w
		ratio, phi := w, 1.0
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
			tau := float64(p.SAPOTemperatureNeg)
			if a > 0 {
				tau = float64(p.SAPOTemperaturePos)
			}
			s := 1 / (1 + math.Exp(-tau*(w-1)))
			l = -(4 / tau) * s * a
			dw = -4 * s * (1 - s) * a
		case kernels.ObjectiveVESPO:
			k, lam := float64(p.VESPOKPos), float64(p.VESPOLambdaPos)
			if a < 0 {
				k, lam = float64(p.VESPOKNeg), float64(p.VESPOLambdaNeg)
			}
			lam = math.Max(lam, 1e-4)
			phi = math.Exp(lam + k*sg.vespoL - lam*sg.vespoW)
			if math.IsNaN(phi) || math.IsInf(phi, 0) {
				phi = 0
			}
			l, direct, ratio = -phi*a*lp, -phi*a, sg.vespoW
		case kernels.ObjectivePG:
			l, direct = -a*lp, -a
		}
		// The policy term's factor f = O·E·ρ.
		f := 1.0
		if p.OffPolicyMask && a < 0 && sg.offAvg > float64(p.OffPolicyMaskThreshold) {
			f = 0
		}
		e := 1.0
		if in.EntropyMask != nil {
			e = float64(in.EntropyMask[t])
		}
		f *= e
		if in.ISRatio != nil && p.Objective != kernels.ObjectiveVESPO {
			f *= float64(in.ISRatio[t])
		}
		l, dw, direct = f*l, f*dw, f*direct
		var kl float64
		if p.Beta != 0 {
			x := float64(in.RefLogP[t]) - lp
			kl = math.Exp(x) - x - 1
			dkl := 1 - math.Exp(x)
			if p.UseBiasCorrectionKL { // β·w·KL: through KL at fixed w, and through w
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
		wh := wt // the entropy bonus's weight W^H
		if in.EntropyWeight != nil {
			wh = float64(in.EntropyWeight[t])
		}
		out.Loss[t] = float32(wt*(l+float64(p.Beta)*kl) - float64(p.EntropyCoef)*wh*e*h)
		dldw[t] = wt * dw
		if out.DEntropy != nil {
			out.DEntropy[t] = float32(-float64(p.EntropyCoef) * wh * e)
		}
		if out.Ratio != nil {
			out.Ratio[t] = float32(ratio)
		}
		if out.KL != nil {
			out.KL[t] = float32(kl)
		}
		if out.Clip != nil {
			out.Clip[t] = clip
		}
		if out.Phi != nil {
			out.Phi[t] = float32(phi)
		}
	}
	// The ratio's gradient: w = exp(logw); token level d logw_t/d logp_t = 1;
	// sequence level d logw/d logp_u = mask_u / max(Σ mask, 1) for every u
	// of the sequence. Without OldLogP the ratio is exp(logp − sg(logp)).
	if p.SequenceRatio {
		for _, sg := range segs {
			var g float64
			for t := sg.lo; t < sg.hi; t++ {
				g += dldw[t] * math.Exp(sg.logw)
			}
			for t := sg.lo; t < sg.hi; t++ {
				dlogp[t] += g * mask(t) / math.Max(sg.cnt, 1)
			}
		}
	} else {
		for t := range n {
			dlogp[t] += dldw[t] * math.Exp(logw(t))
		}
	}
	for t := range n {
		out.DLogP[t] = float32(dlogp[t])
	}
}
