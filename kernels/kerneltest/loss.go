package kerneltest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// lossCase is one PolicyLoss configuration of the suite.
type lossCase struct {
	name   string
	p      kernels.LossParams
	old    bool // OldLogP given (else on-policy)
	seqAdv bool // one advantage per sequence
	mask   bool // a Mask with zeros
	is     bool // an ISRatio
	emask  bool // an EntropyMask with zeros
	samp   bool // SamplingLogP given (else the off-policy mask reads OldLogP)
	ew     bool // an EntropyWeight (the entropy bonus's own weights)
}

func lossCases() []lossCase {
	clipped := kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.28}
	var cs []lossCase
	add := func(name string, p kernels.LossParams, old, seqAdv, mask bool) {
		cs = append(cs, lossCase{name: name, p: p, old: old, seqAdv: seqAdv, mask: mask})
	}
	add("clipped_onpolicy", clipped, false, true, false)
	add("clipped", clipped, true, false, false)
	d := clipped
	d.Delta = 1.5
	add("clipped_delta", d, true, false, false)
	kl := clipped
	kl.Beta, kl.EntropyCoef = 0.04, 0.01
	add("clipped_kl_entropy", kl, true, true, false)
	gspo := clipped
	gspo.SequenceRatio, gspo.Beta = true, 0.1
	add("gspo", gspo, true, true, true)
	add("gspo_onpolicy", gspo, false, false, false)
	cispo := kernels.LossParams{Objective: kernels.ObjectiveCISPO, EpsHigh: 1.1, Beta: 0.02}
	add("cispo", cispo, true, false, false)
	sapo := kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 1.05, EntropyCoef: -0.02}
	add("sapo", sapo, true, false, false)
	vespo := kernels.LossParams{Objective: kernels.ObjectiveVESPO, VESPOKPos: 2, VESPOLambdaPos: 3, VESPOKNeg: 3, VESPOLambdaNeg: 2}
	add("vespo", vespo, true, true, true)
	add("pg", kernels.LossParams{Objective: kernels.ObjectivePG}, false, false, false)
	// Every objective at sequence level (TRL's importance_sampling_level
	// "sequence"), with the bias-corrected KL through the sequence ratio.
	for _, c := range []struct {
		name string
		p    kernels.LossParams
	}{{"cispo_seq", cispo}, {"sapo_seq", sapo}, {"vespo_seq", vespo}} {
		p := c.p
		p.SequenceRatio, p.Beta, p.UseBiasCorrectionKL = true, 0.05, true
		add(c.name, p, true, c.name != "cispo_seq", true)
	}
	// TRL's vLLM IS correction and the bias-corrected KL.
	bias := kl
	bias.UseBiasCorrectionKL = true
	cs = append(cs, lossCase{name: "clipped_is_biaskl", p: bias, old: true, is: true})
	gspoBias := gspo
	gspoBias.UseBiasCorrectionKL = true
	cs = append(cs, lossCase{name: "gspo_is_biaskl", p: gspoBias, old: true, seqAdv: true, mask: true, is: true})
	vespoIS := vespo
	vespoIS.Beta = 0.1
	cs = append(cs, lossCase{name: "vespo_is", p: vespoIS, old: true, mask: true, is: true})
	// The entropy mask (with the entropy bonus it also masks) and the
	// off-policy sequence mask, from sampling log-probs or from OldLogP.
	ent := kl
	ent.EntropyCoef = 0.05
	cs = append(cs, lossCase{name: "clipped_entropy_mask", p: ent, old: true, is: true, emask: true})
	vespoEnt := vespo
	vespoEnt.EntropyCoef = 0.05
	cs = append(cs, lossCase{name: "vespo_entropy_mask", p: vespoEnt, old: true, seqAdv: true, is: true, emask: true})
	off := clipped
	off.OffPolicyMask, off.OffPolicyMaskThreshold, off.Beta = true, 0.05, 0.1
	cs = append(cs, lossCase{name: "offpolicy_sampling", p: off, old: true, seqAdv: true, mask: true, samp: true})
	cs = append(cs, lossCase{name: "offpolicy_old", p: off, old: true, emask: true})
	offSeq := off
	offSeq.SequenceRatio = true
	cs = append(cs, lossCase{name: "offpolicy_gspo_is", p: offSeq, old: true, seqAdv: true, is: true, samp: true})
	cs = append(cs, lossCase{name: "offpolicy_onpolicy", p: off, seqAdv: true})
	// The entropy bonus weighted apart from the policy term (TRL's mean
	// over the tokens the entropy mask keeps), with and without the mask.
	cs = append(cs, lossCase{name: "entropy_weight", p: ent, old: true, emask: true, ew: true})
	gspoEnt := gspo
	gspoEnt.EntropyCoef = -0.03
	cs = append(cs, lossCase{name: "gspo_entropy_weight", p: gspoEnt, old: true, seqAdv: true, mask: true, ew: true})
	return cs
}

// lossInputs makes a batch of segs sequences with lengths in [0, 40]
// (empty ones included): log-probs in (−6, 0], old log-probs within ±0.5
// of them (ratios in about [0.6, 1.65], both sides of every clip), advantages
// of both signs and zero.
func lossInputs(rng *rand.Rand, c lossCase, segs int) (kernels.HostLossInput, int) {
	in := kernels.HostLossInput{Seg: []int32{0}}
	n := 0
	for s := range segs {
		l := rng.IntN(41)
		if s == 1 {
			l = 0
		}
		n += l
		in.Seg = append(in.Seg, int32(n))
	}
	f := func(g func() float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(g())
		}
		return x
	}
	in.LogP = f(func() float64 { return -6 * rng.Float64() })
	in.Entropy = f(func() float64 { return 3 * rng.Float64() })
	if c.old {
		in.OldLogP = make([]float32, n)
		for i := range n {
			in.OldLogP[i] = in.LogP[i] + float32(rng.Float64()-0.5)
		}
	}
	in.RefLogP = make([]float32, n)
	for i := range n {
		in.RefLogP[i] = in.LogP[i] + float32(rng.Float64()-0.5)
	}
	adv := func() float32 {
		switch rng.IntN(5) {
		case 0:
			return 0
		default:
			return float32(2 * (rng.Float64() - 0.5))
		}
	}
	if c.seqAdv {
		in.SeqAdv = make([]float32, segs)
		for s := range in.SeqAdv {
			in.SeqAdv[s] = adv()
		}
	} else {
		in.Adv = make([]float32, n)
		for i := range in.Adv {
			in.Adv[i] = adv()
		}
	}
	in.Weight = f(func() float64 { return rng.Float64() / 50 })
	if c.is {
		in.ISRatio = f(func() float64 { return 0.5 + rng.Float64() })
	}
	if c.emask {
		in.EntropyMask = f(func() float64 { return float64(rng.IntN(3) / 2) }) // a third 1
	}
	if c.ew {
		in.EntropyWeight = f(func() float64 { return rng.Float64() / 20 })
	}
	if c.samp {
		// Mean sampling − logp per sequence around the threshold 0.05:
		// both sides of it.
		in.SamplingLogP = make([]float32, n)
		for i := range n {
			in.SamplingLogP[i] = in.LogP[i] + float32(0.3*(rng.Float64()-0.4))
		}
	}
	if c.mask {
		in.Mask = make([]float32, n)
		for i := range in.Mask {
			if rng.IntN(4) != 0 {
				in.Mask[i] = 1
			} else {
				in.Weight[i] = 0
				if in.EntropyWeight != nil {
					in.EntropyWeight[i] = 0
				}
			}
		}
	}
	return in, n
}

func newLossOutput(n int) kernels.HostLossOutput {
	nan := func() []float32 { return bwNaNs(n)[:n] }
	clip := make([]uint8, n)
	for i := range clip {
		clip[i] = 0xff
	}
	return kernels.HostLossOutput{Loss: nan(), DLogP: nan(), DEntropy: nan(), Ratio: nan(), KL: nan(), Clip: clip, Phi: nan()}
}

// PolicyLoss checks every output of PolicyLoss against the reference, for
// each objective at token and sequence level, on- and off-policy,
// per-token and per-sequence advantages, with KL and entropy terms, with a
// mask, with an IS correction and the bias-corrected KL, with the entropy
// mask and the off-policy sequence mask, on batches with empty sequences;
// clip flags exactly. It also checks
// that a token-level loss over a batch equals the loss over any split of it
// into chunks (what the model relies on to evaluate it chunk by chunk).
func PolicyLoss(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	tol := Tolerance("PolicyLoss")
	for _, c := range lossCases() {
		for _, segs := range []int{1, 7} {
			name := fmt.Sprintf("%s_S%d", c.name, segs)
			t.Run(name, func(t *testing.T) {
				in, n := lossInputs(newRNG("loss"+name), c, segs)
				want, got := newLossOutput(n), newLossOutput(n)
				r.PolicyLoss(want.Buffers(), in.Buffers(), c.p, n)
				b.PolicyLoss(got.Buffers(), in.Buffers(), c.p, n)
				CheckClose(t, "Loss", got.Loss, want.Loss, tol)
				CheckClose(t, "DLogP", got.DLogP, want.DLogP, tol)
				CheckClose(t, "DEntropy", got.DEntropy, want.DEntropy, tol)
				CheckClose(t, "Ratio", got.Ratio, want.Ratio, tol)
				CheckClose(t, "KL", got.KL, want.KL, tol)
				CheckClose(t, "Phi", got.Phi, want.Phi, tol)
				assert.Equal(t, want.Clip, got.Clip, "clip flags")
				if c.p.NeedsSegments() || in.SeqAdv != nil || n < 3 {
					return
				}
				// Token level: two chunks give the same per-token values.
				in2 := in
				in2.Seg = nil
				split := n / 3
				chunk := newLossOutput(n)
				for _, lh := range [][2]int{{0, split}, {split, n}} {
					lo, hi := lh[0], lh[1]
					sub := kernels.HostLossInput{LogP: in.LogP[lo:hi], Entropy: in.Entropy[lo:hi], RefLogP: in.RefLogP[lo:hi],
						Adv: in.Adv[lo:hi], Weight: in.Weight[lo:hi]}
					if in.OldLogP != nil {
						sub.OldLogP = in.OldLogP[lo:hi]
					}
					if in.ISRatio != nil {
						sub.ISRatio = in.ISRatio[lo:hi]
					}
					if in.EntropyMask != nil {
						sub.EntropyMask = in.EntropyMask[lo:hi]
					}
					if in.EntropyWeight != nil {
						sub.EntropyWeight = in.EntropyWeight[lo:hi]
					}
					o := kernels.HostLossOutput{Loss: chunk.Loss[lo:hi], DLogP: chunk.DLogP[lo:hi], DEntropy: chunk.DEntropy[lo:hi],
						Ratio: chunk.Ratio[lo:hi], KL: chunk.KL[lo:hi], Clip: chunk.Clip[lo:hi], Phi: chunk.Phi[lo:hi]}
					b.PolicyLoss(o.Buffers(), sub.Buffers(), c.p, hi-lo)
				}
				CheckExact(t, "chunked Loss", chunk.Loss, got.Loss)
				CheckExact(t, "chunked DLogP", chunk.DLogP, got.DLogP)
			})
		}
	}
}
