//go:build cudahost

package cuda

/*
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/x/kernels"
)

func pinned[T any](p *runtime.Pinner, s []T) uintptr {
	if len(s) == 0 {
		return 0
	}
	p.Pin(&s[0])
	return uintptr(unsafe.Pointer(&s[0]))
}

// PolicyLoss evaluates the per-token policy loss and its gradients (see
// kernels.LossParams).
func (h *Host) PolicyLoss(out kernels.LossOutput, in kernels.LossInput, p kernels.LossParams, n int) {
	const op = "PolicyLoss"
	kernels.CheckPolicyLoss(out, in, p, n)
	if n == 0 {
		return
	}
	hi, ho := in.Host(), out.Host()
	seg := hi.Seg
	if seg == nil {
		for t := 0; t < n; t += lossChunk {
			seg = append(seg, int32(t))
		}
		seg = append(seg, int32(n))
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	a := lossArgs{
		logp: pinned(&pin, hi.LogP), entropy: pinned(&pin, hi.Entropy), oldLogP: pinned(&pin, hi.OldLogP),
		refLogP: pinned(&pin, hi.RefLogP), adv: pinned(&pin, hi.Adv), seqAdv: pinned(&pin, hi.SeqAdv),
		mask: pinned(&pin, hi.Mask), isRatio: pinned(&pin, hi.ISRatio), weight: pinned(&pin, hi.Weight),
		entropyMask: pinned(&pin, hi.EntropyMask), samplingLogP: pinned(&pin, hi.SamplingLogP), seg: pinned(&pin, seg),
		loss: pinned(&pin, ho.Loss), dlogp: pinned(&pin, ho.DLogP), dentropy: pinned(&pin, ho.DEntropy),
		ratio: pinned(&pin, ho.Ratio), kl: pinned(&pin, ho.KL), clip: pinned(&pin, ho.Clip), phi: pinned(&pin, ho.Phi),
		objective: int32(p.Objective), sequenceRatio: flag(p.SequenceRatio), klBias: flag(p.UseBiasCorrectionKL), offPolicy: flag(p.OffPolicyMask),
		epsLow: p.EpsLow, epsHigh: p.EpsHigh, delta: p.Delta, tauPos: p.SAPOTemperaturePos, tauNeg: p.SAPOTemperatureNeg,
		kPos: p.VESPOKPos, lamPos: p.VESPOLambdaPos, kNeg: p.VESPOKNeg, lamNeg: p.VESPOLambdaNeg,
		beta: p.Beta, entropyCoef: p.EntropyCoef, offPolicyThreshold: p.OffPolicyMaskThreshold,
	}
	d := rowPlan(len(seg)-1, 256)
	launched(op, C.host_policy_loss(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		unsafe.Pointer(&a)))
}
