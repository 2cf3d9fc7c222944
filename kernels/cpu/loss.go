package cpu

import (
	"math"

	"github.com/x/kernels"
)

// PolicyLoss evaluates kernels.LossParams' loss sequence by sequence in one
// or two passes without allocating: a sequence's sums (GSPO's ratio,
// VESPO's φ, the off-policy mask's mean log-ratio) first when needed, then
// every token in float64, then (GSPO) the ratio's gradient spread over the
// sequence. It is O(N) work with a few exps per
// token, so it runs on the calling goroutine.
func (b *Backend) PolicyLoss(out kernels.LossOutput, in kernels.LossInput, p kernels.LossParams, n int) {
	kernels.CheckPolicyLoss(out, in, p, n)
	b.policyLoss(out.Host(), in.Host(), p, n)
}

// policyLoss is PolicyLoss on host slices (nil: absent).
func (b *Backend) policyLoss(out kernels.HostLossOutput, in kernels.HostLossInput, p kernels.LossParams, n int) {
	if in.Seg == nil {
		policyLossSeq(out, in, &p, 0, n, -1)
		return
	}
	for s := 0; s+1 < len(in.Seg); s++ {
		policyLossSeq(out, in, &p, int(in.Seg[s]), int(in.Seg[s+1]), s)
	}
}

// policyLossSeq handles tokens [lo, hi), sequence s (−1: no segments).
func policyLossSeq(out kernels.HostLossOutput, in kernels.HostLossInput, p *kernels.LossParams, lo, hi, s int) {
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
	adv := func(t int) float64 {
		if in.Adv != nil {
			return float64(in.Adv[t])
		}
		return float64(in.SeqAdv[s])
	}
	var seqLogW, cnt, vespoLogW, offAvg float64
	if p.NeedsSegments() {
		var sum, clamped, off float64
		samp := in.SamplingLogP
		if samp == nil {
			samp = in.OldLogP
		}
		for t := lo; t < hi; t++ {
			m, d := mask(t), delta(t)
			sum += m * d
			clamped += m * math.Min(math.Max(d, -20), 20)
			if in.ISRatio != nil {
				clamped += m * math.Min(math.Max(math.Log(float64(in.ISRatio[t])), math.Log(1e-8)), 20)
			}
			if samp != nil {
				off += m * (float64(samp[t]) - float64(in.LogP[t]))
			}
			cnt += m
		}
		seqLogW = sum / math.Max(cnt, 1)
		vespoLogW = math.Min(math.Max(clamped, math.Log(1e-8)), 20)
		offAvg = off / math.Max(cnt, 1)
	}
	epsLo, epsHi := 1-float64(p.EpsLow), 1+float64(p.EpsHigh)
	beta, coef := float64(p.Beta), float64(p.EntropyCoef)
	var g float64 // GSPO: Σ_t Weight·dℓ/dw·w over the sequence
	for t := lo; t < hi; t++ {
		a, wt, lp := adv(t), float64(in.Weight[t]), float64(in.LogP[t])
		logw := delta(t)
		if p.SequenceRatio {
			logw = seqLogW
		}
		w := math.Exp(logw)
		var l, dw, direct float64
		ratio, phi := w, 1.0
		var clip uint8
		switch p.Objective {
		case kernels.ObjectiveClipped:
			wc, capped := w, p.Delta > 0 && w > float64(p.Delta)
			if capped {
				wc = float64(p.Delta)
			}
			c := min(max(w, epsLo), epsHi)
			switch {
			case wc*a <= c*a:
				l = -wc * a
				if !capped {
					dw = -a
				}
			default:
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
			sg := 1 / (1 + math.Exp(-tau*(w-1)))
			l, dw = -(4/tau)*sg*a, -4*sg*(1-sg)*a
		case kernels.ObjectiveVESPO:
			k, lam := float64(p.VESPOKPos), float64(p.VESPOLambdaPos)
			if a < 0 {
				k, lam = float64(p.VESPOKNeg), float64(p.VESPOLambdaNeg)
			}
			lam = math.Max(lam, 1e-4)
			phi = math.Exp(lam + k*vespoLogW - lam*math.Exp(vespoLogW))
			if math.IsNaN(phi) || math.IsInf(phi, 0) {
				phi = 0
			}
			l, direct, ratio = -phi*a*lp, -phi*a, math.Exp(vespoLogW)
		case kernels.ObjectivePG:
			l, direct = -a*lp, -a
		}
		// The policy term's factor f = O·E·ρ.
		f, e := 1.0, 1.0
		if p.OffPolicyMask && a < 0 && offAvg > float64(p.OffPolicyMaskThreshold) {
			f = 0
		}
		if in.EntropyMask != nil {
			e = float64(in.EntropyMask[t])
			f *= e
		}
		if in.ISRatio != nil && p.Objective != kernels.ObjectiveVESPO {
			f *= float64(in.ISRatio[t])
		}
		l, dw, direct = f*l, f*dw, f*direct
		var kl float64
		if beta != 0 {
			x := float64(in.RefLogP[t]) - lp
			ex := math.Exp(x)
			kl = ex - x - 1
			dkl := 1 - ex
			if p.UseBiasCorrectionKL {
				dw += beta * kl
				kl, dkl = w*kl, w*dkl
			}
			direct += beta * dkl
		}
		var h float64
		if coef != 0 {
			h = float64(in.Entropy[t])
		}
		wh := wt // the entropy bonus's weight
		if in.EntropyWeight != nil {
			wh = float64(in.EntropyWeight[t])
		}
		out.Loss[t] = float32(wt*(l+beta*kl) - coef*wh*e*h)
		if p.SequenceRatio {
			g += wt * dw * w
			out.DLogP[t] = float32(wt * direct)
		} else {
			out.DLogP[t] = float32(wt*direct + wt*dw*w)
		}
		if out.DEntropy != nil {
			out.DEntropy[t] = float32(-coef * wh * e)
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
	if p.SequenceRatio {
		for t := lo; t < hi; t++ {
			out.DLogP[t] = float32(float64(out.DLogP[t]) + g*mask(t)/math.Max(cnt, 1))
		}
	}
}
