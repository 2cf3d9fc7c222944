package cuda

import "github.com/x/kernels"

// PolicyLoss evaluates the per-token policy loss and its gradients (see
// kernels.LossParams). Device segment offsets that do not run from 0 to n
// are reported by the kernel at the next sync point.
func (d *Device) PolicyLoss(out kernels.LossOutput, in kernels.LossInput, p kernels.LossParams, n int) {
	const op = "PolicyLoss"
	kernels.CheckPolicyLoss(out, in, p, n)
	if n == 0 {
		return
	}
	segs := in.Seg.Len() - 1
	var chunks []int32 // without Seg: chunks of lossChunk tokens
	if in.Seg.Len() == 0 {
		for t := 0; t < n; t += lossChunk {
			chunks = append(chunks, int32(t))
		}
		chunks = append(chunks, int32(n))
		segs = len(chunks) - 1
	}
	s := d.begin(op)
	up := func(x kernels.Buffer) uintptr { return uintptr(s.in(x)) }
	o := func(x kernels.Buffer) uintptr { return uintptr(s.inout(x)) }
	pseg := s.in(in.Seg)
	if chunks != nil {
		pseg = s.value(bytesOf(chunks))
	}
	a := []lossArgs{{
		logp: up(in.LogP), entropy: up(in.Entropy), oldLogP: up(in.OldLogP), refLogP: up(in.RefLogP),
		adv: up(in.Adv), seqAdv: up(in.SeqAdv), mask: up(in.Mask), isRatio: up(in.ISRatio), weight: up(in.Weight),
		entropyMask: up(in.EntropyMask), samplingLogP: up(in.SamplingLogP), entropyWeight: up(in.EntropyWeight),
		seg:  uintptr(pseg),
		loss: o(out.Loss), dlogp: o(out.DLogP), dentropy: o(out.DEntropy), ratio: o(out.Ratio), kl: o(out.KL),
		clip: o(out.Clip), phi: o(out.Phi),
		objective: int32(p.Objective), sequenceRatio: flag(p.SequenceRatio), klBias: flag(p.UseBiasCorrectionKL), offPolicy: flag(p.OffPolicyMask),
		epsLow: p.EpsLow, epsHigh: p.EpsHigh, delta: p.Delta, tauPos: p.SAPOTemperaturePos, tauNeg: p.SAPOTemperatureNeg,
		kPos: p.VESPOKPos, lamPos: p.VESPOLambdaPos, kNeg: p.VESPOKNeg, lamNeg: p.VESPOLambdaNeg,
		beta: p.Beta, entropyCoef: p.EntropyCoef, offPolicyThreshold: p.OffPolicyMaskThreshold,
	}}
	pa := s.value(bytesOf(a))
	s.launch("policy_loss", rowPlan(segs, 256), argsOf().ptr(pa).i32(n).ptr(d.slot(stPolicyLoss)))
	s.end()
}
