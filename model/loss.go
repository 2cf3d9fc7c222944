package model

import (
	"fmt"

	"github.com/x/kernels"
)

// Loss describes the per-token policy loss that Trainable.Accumulate
// evaluates with the backend's PolicyLoss (see kernels.LossParams for the
// objectives and the formula). The caller fills the per-token tensors once
// per batch; they are indexed [seq][i] like the scored tokens of the
// TrainSeqs (i counted from Start, len(IDs)−Start entries per sequence).
// Masked-out tokens (TrainSeq.Mask false) are not scored: their entries are
// ignored.
type Loss struct {
	kernels.LossParams
	// Adv are per-token advantages, or nil when SeqAdv gives one per
	// sequence.
	Adv    [][]float32
	SeqAdv []float32
	// Weight is each token's weight in the total loss: the caller's
	// normalisation (1/Σmask for dapo, 1/(B·len_i) for grpo, ...). Required.
	Weight [][]float32
	// OldLogP are the sampling policy's log-probs (at the training
	// temperature; Completion.FullLogProbs or an earlier
	// Trainable.LogProbs); nil means on-policy, where the ratio is 1.
	OldLogP [][]float32
	// RefLogP are the reference policy's log-probs (Trainable.RefLogProbs);
	// required when Beta > 0.
	RefLogP [][]float32
	// ISRatio, if not nil, is a per-token importance-sampling correction
	// (see kernels.LossInput.ISRatio).
	ISRatio [][]float32
	// EntropyMask, if not nil, is TRL's top_entropy_quantile mask, 1 or 0
	// per token (see kernels.LossInput.EntropyMask).
	EntropyMask [][]float32
	// SamplingLogP, if not nil, are the sampler's log-probs the
	// off-policy mask reads (see kernels.LossParams.OffPolicyMask); nil
	// falls back to OldLogP.
	SamplingLogP [][]float32
	// EntropyWeight, if not nil, is each token's weight in the entropy
	// bonus in place of Weight (see kernels.LossInput.EntropyWeight).
	EntropyWeight [][]float32
}

// LossResult is what Accumulate computed, per token [seq][i] like its
// inputs (0 at masked-out tokens).
type LossResult struct {
	Loss     float64     // Σ over scored tokens of Weight·(ℓ + β·KL) − c·EntropyWeight·H
	LogP     [][]float32 // the current policy's log-probs
	Entropy  [][]float32 // and entropies
	DLogP    [][]float32 // d Loss / d LogP
	DEntropy [][]float32 // d Loss / d Entropy
	Ratio    [][]float32 // importance ratio used by the objective
	KL       [][]float32 // k3 KL estimate (0 when Beta = 0)
	Clip     [][]uint8   // kernels.ClipLow | kernels.ClipHigh flags
	Phi      [][]float32 // VESPO's φ (1 for other objectives)
	Tokens   int         // scored tokens (after masks)
}

// SFTLoss is the mean negative log-likelihood of every scored token of
// seqs (ObjectivePG with advantage 1 and weight 1/N): supervised
// fine-tuning through Accumulate.
func SFTLoss(seqs []TrainSeq) Loss {
	n := 0
	for _, s := range seqs {
		n += s.scoredCount()
	}
	w := float32(1)
	if n > 0 {
		w = 1 / float32(n)
	}
	l := Loss{LossParams: kernels.LossParams{Objective: kernels.ObjectivePG}, SeqAdv: make([]float32, len(seqs)), Weight: make([][]float32, len(seqs))}
	for i, s := range seqs {
		l.SeqAdv[i] = 1
		l.Weight[i] = make([]float32, max(0, s.Scored()))
		for j := range l.Weight[i] {
			l.Weight[i][j] = w
		}
	}
	return l
}

// scoredCount is the number of tokens the sequence scores after its mask.
func (s TrainSeq) scoredCount() int {
	if s.Mask == nil {
		return max(0, s.Scored())
	}
	n := 0
	for _, m := range s.Mask {
		if m {
			n++
		}
	}
	return n
}

// check validates l against the batch it is for.
func (l *Loss) check(seqs []TrainSeq) error {
	if err := l.LossParams.Validate(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	per := func(name string, x [][]float32, required bool) error {
		if x == nil {
			if required {
				return fmt.Errorf("train: loss %s is required", name)
			}
			return nil
		}
		if len(x) != len(seqs) {
			return fmt.Errorf("train: loss %s has %d sequences, the batch %d", name, len(x), len(seqs))
		}
		for s, v := range x {
			if len(v) != seqs[s].Scored() {
				return fmt.Errorf("train: loss %s sequence %d has %d entries, want %d (len(IDs) − Start)", name, s, len(v), seqs[s].Scored())
			}
		}
		return nil
	}
	if (l.Adv == nil) == (l.SeqAdv == nil) {
		return fmt.Errorf("train: loss needs exactly one of Adv (per token) and SeqAdv (per sequence)")
	}
	if l.SeqAdv != nil && len(l.SeqAdv) != len(seqs) {
		return fmt.Errorf("train: loss SeqAdv has %d entries, the batch %d sequences", len(l.SeqAdv), len(seqs))
	}
	if err := per("Adv", l.Adv, false); err != nil {
		return err
	}
	if err := per("Weight", l.Weight, true); err != nil {
		return err
	}
	if err := per("OldLogP", l.OldLogP, false); err != nil {
		return err
	}
	if err := per("ISRatio", l.ISRatio, false); err != nil {
		return err
	}
	if err := per("EntropyMask", l.EntropyMask, false); err != nil {
		return err
	}
	if err := per("SamplingLogP", l.SamplingLogP, false); err != nil {
		return err
	}
	if err := per("EntropyWeight", l.EntropyWeight, false); err != nil {
		return err
	}
	return per("RefLogP", l.RefLogP, l.Beta != 0)
}

// lossTensors are a batch's per-token loss inputs and outputs, flattened in
// the order of the scored rows (sequence by sequence, masked-out tokens
// left out), filled once per batch.
type lossTensors struct {
	p                   *Loss
	rowSeq, rowI        []int32   // [N] each row's sequence and token index (from Start)
	is, emask, samp, ew []float32 // [N] ISRatio, EntropyMask, SamplingLogP, EntropyWeight, nil when not given
	seg                 []int32   // [S+1] row offsets of the sequences
	segScratch          []int32
	pack                []float32 // a group's per-token inputs, packed for one Upload
	logp, ent, old, ref []float32 // [N] inputs (logp, ent filled by the forward)
	adv, weight         []float32 // [N]
	loss, dlogp, dent   []float32 // [N] outputs
	ratio, kl, phi      []float32 // [N]
	clip                []uint8   // [N]
}

func newLossTensors(seqs []TrainSeq, l *Loss) *lossTensors {
	lt := &lossTensors{p: l, seg: []int32{0}}
	for s, seq := range seqs {
		for i := range seq.Scored() {
			if seq.Mask != nil && !seq.Mask[i] {
				continue
			}
			lt.rowSeq = append(lt.rowSeq, int32(s))
			lt.rowI = append(lt.rowI, int32(i))
			a := float32(0)
			if l.Adv != nil {
				a = l.Adv[s][i]
			} else {
				a = l.SeqAdv[s]
			}
			lt.adv = append(lt.adv, a)
			lt.weight = append(lt.weight, l.Weight[s][i])
			if l.OldLogP != nil {
				lt.old = append(lt.old, l.OldLogP[s][i])
			}
			if l.Beta != 0 {
				lt.ref = append(lt.ref, l.RefLogP[s][i])
			}
			if l.ISRatio != nil {
				lt.is = append(lt.is, l.ISRatio[s][i])
			}
			if l.EntropyMask != nil {
				lt.emask = append(lt.emask, l.EntropyMask[s][i])
			}
			if l.SamplingLogP != nil {
				lt.samp = append(lt.samp, l.SamplingLogP[s][i])
			}
			if l.EntropyWeight != nil {
				lt.ew = append(lt.ew, l.EntropyWeight[s][i])
			}
		}
		lt.seg = append(lt.seg, int32(len(lt.rowSeq)))
	}
	n := len(lt.rowSeq)
	f := func() []float32 { return make([]float32, n) }
	lt.logp, lt.ent, lt.loss, lt.dlogp, lt.dent = f(), f(), f(), f(), f()
	lt.ratio, lt.kl, lt.phi = f(), f(), f()
	lt.clip = make([]uint8, n)
	return lt
}

// upload puts the loss inputs of a group's rows [lo, lo+R) (R =
// len(st.rows); its sequences seqs) into the backend's memory: the
// per-token inputs in one Upload into st.lossIn, the group's sequence
// offsets in a second when the loss needs segments. It returns PolicyLoss's
// inputs and outputs over the group, reading the log-probs and entropies
// the forward writes into st.out and writing the rest of st.out.
func (lt *lossTensors) upload(be kernels.Backend, st *passState, lo int, seqs [2]int) (kernels.LossInput, kernels.LossOutput, error) {
	r := len(st.rows)
	hi := lo + r
	in := kernels.LossInput{LogP: st.outSlot(outLogP), Entropy: st.outSlot(outEnt)}
	out := kernels.LossOutput{Loss: st.outSlot(outLoss), DLogP: st.outSlot(outDLogP), DEntropy: st.outSlot(outDEnt),
		Ratio: st.outSlot(outRatio), KL: st.outSlot(outKL), Phi: st.outSlot(outPhi)}
	fail := func(what string, err error) (kernels.LossInput, kernels.LossOutput, error) {
		return kernels.LossInput{}, kernels.LossOutput{}, fmt.Errorf("train: loss %s: %w", what, err)
	}
	clip, err := fit(be, &st.clipMem, kernels.U8, r)
	if err != nil {
		return fail("clip flags", err)
	}
	out.Clip = clip
	parts := [][]float32{lt.adv[lo:hi], lt.weight[lo:hi]}
	dst := []*kernels.Buffer{&in.Adv, &in.Weight}
	if lt.old != nil {
		parts, dst = append(parts, lt.old[lo:hi]), append(dst, &in.OldLogP)
	}
	if lt.ref != nil {
		parts, dst = append(parts, lt.ref[lo:hi]), append(dst, &in.RefLogP)
	}
	for _, opt := range []struct {
		x   []float32
		dst *kernels.Buffer
	}{{lt.is, &in.ISRatio}, {lt.emask, &in.EntropyMask}, {lt.samp, &in.SamplingLogP}, {lt.ew, &in.EntropyWeight}} {
		if opt.x != nil {
			parts, dst = append(parts, opt.x[lo:hi]), append(dst, opt.dst)
		}
	}
	buf, err := fit(be, &st.lossIn, kernels.F32, len(parts)*r)
	if err != nil {
		return fail("inputs", err)
	}
	lt.pack = lt.pack[:0]
	for i, p := range parts {
		lt.pack = append(lt.pack, p...)
		*dst[i] = buf.Slice(i*r, (i+1)*r)
	}
	if r > 0 {
		if err := be.Upload(buf, kernels.HostF32(lt.pack)); err != nil {
			return fail("uploading inputs", err)
		}
	}
	if lt.p.NeedsSegments() {
		lt.segScratch = lt.segScratch[:0]
		for _, o := range lt.seg[seqs[0] : seqs[1]+1] {
			lt.segScratch = append(lt.segScratch, o-int32(lo))
		}
		seg, err := fit(be, &st.segMem, kernels.I32, len(lt.segScratch))
		if err != nil {
			return fail("segments", err)
		}
		if err := be.Upload(seg, kernels.HostI32(lt.segScratch)); err != nil {
			return fail("uploading segments", err)
		}
		in.Seg = seg
	}
	return in, out, nil
}

// download brings a group's log-probs, entropies and loss outputs (st.out,
// one Download) and clip flags (a second) to the host, into rows [lo,
// lo+R) of lt.
func (lt *lossTensors) download(be kernels.Backend, st *passState, lo int) error {
	r := len(st.rows)
	if r == 0 {
		return nil
	}
	st.hostOut = grow(st.hostOut, outSlots*r)
	if err := be.Download(kernels.HostF32(st.hostOut), st.out); err != nil {
		return fmt.Errorf("train: downloading the loss: %w", err)
	}
	if err := be.Download(kernels.HostU8(lt.clip[lo:lo+r]), st.clipMem.Slice(0, r)); err != nil {
		return fmt.Errorf("train: downloading the clip flags: %w", err)
	}
	for i, dst := range [outSlots][]float32{lt.logp, lt.ent, lt.loss, lt.dlogp, lt.dent, lt.ratio, lt.kl, lt.phi} {
		copy(dst[lo:lo+r], st.hostOut[i*r:(i+1)*r])
	}
	return nil
}

// sliceLossInput is in over tokens [lo, hi) (without Seg: per-token
// losses only).
func sliceLossInput(in kernels.LossInput, lo, hi int) kernels.LossInput {
	s := func(b kernels.Buffer) kernels.Buffer {
		if b.Len() == 0 {
			return b
		}
		return b.Slice(lo, hi)
	}
	return kernels.LossInput{LogP: s(in.LogP), Entropy: s(in.Entropy), OldLogP: s(in.OldLogP), RefLogP: s(in.RefLogP),
		Adv: s(in.Adv), Mask: s(in.Mask), ISRatio: s(in.ISRatio), Weight: s(in.Weight), EntropyMask: s(in.EntropyMask),
		SamplingLogP: s(in.SamplingLogP), EntropyWeight: s(in.EntropyWeight)}
}

// sliceLossOutput is out over tokens [lo, hi).
func sliceLossOutput(out kernels.LossOutput, lo, hi int) kernels.LossOutput {
	s := func(b kernels.Buffer) kernels.Buffer {
		if b.Len() == 0 {
			return b
		}
		return b.Slice(lo, hi)
	}
	return kernels.LossOutput{Loss: s(out.Loss), DLogP: s(out.DLogP), DEntropy: s(out.DEntropy), Ratio: s(out.Ratio),
		KL: s(out.KL), Clip: s(out.Clip), Phi: s(out.Phi)}
}

// result scatters the per-row values back to [seq][i] and sums the loss.
func (lt *lossTensors) result(seqs []TrainSeq) LossResult {
	f := func() [][]float32 {
		x := make([][]float32, len(seqs))
		for s, seq := range seqs {
			x[s] = make([]float32, max(0, seq.Scored()))
		}
		return x
	}
	r := LossResult{LogP: f(), Entropy: f(), DLogP: f(), DEntropy: f(), Ratio: f(), KL: f(), Phi: f(), Clip: make([][]uint8, len(seqs)), Tokens: len(lt.rowSeq)}
	for s, seq := range seqs {
		r.Clip[s] = make([]uint8, max(0, seq.Scored()))
	}
	var sum float64
	for j, s := range lt.rowSeq {
		i := lt.rowI[j]
		r.LogP[s][i], r.Entropy[s][i] = lt.logp[j], lt.ent[j]
		r.DLogP[s][i], r.DEntropy[s][i] = lt.dlogp[j], lt.dent[j]
		r.Ratio[s][i], r.KL[s][i], r.Phi[s][i], r.Clip[s][i] = lt.ratio[j], lt.kl[j], lt.phi[j], lt.clip[j]
		sum += float64(lt.loss[j])
	}
	r.Loss = sum
	return r
}

// EvalLoss evaluates loss on the given log-probs and entropies ([seq][i]
// like the scored tokens of seqs) with be's PolicyLoss over host memory
// (kernels/ref, kernels/cpu): what Accumulate computes on the forward's
// log-probs, without a model, a forward or a backward. LossResult.DLogP and
// DEntropy are the loss's derivatives. It is how a caller checks a loss on
// chosen values (the trainer's tests hold their loss settings to the
// reference this way).
func EvalLoss(be kernels.Backend, seqs []TrainSeq, loss Loss, logp, entropy [][]float32) (LossResult, error) {
	if err := loss.check(seqs); err != nil {
		return LossResult{}, err
	}
	for name, x := range map[string][][]float32{"log-probs": logp, "entropies": entropy} {
		if len(x) != len(seqs) {
			return LossResult{}, fmt.Errorf("train: loss %s have %d sequences, the batch %d", name, len(x), len(seqs))
		}
		for s, row := range x {
			if len(row) != max(0, seqs[s].Scored()) {
				return LossResult{}, fmt.Errorf("train: loss %s sequence %d has %d entries, want %d", name, s, len(row), seqs[s].Scored())
			}
		}
	}
	lt := newLossTensors(seqs, &loss)
	for j, s := range lt.rowSeq {
		lt.logp[j], lt.ent[j] = logp[s][lt.rowI[j]], entropy[s][lt.rowI[j]]
	}
	in := kernels.HostLossInput{LogP: lt.logp, Entropy: lt.ent, Adv: lt.adv, Weight: lt.weight, OldLogP: lt.old, RefLogP: lt.ref,
		ISRatio: lt.is, EntropyMask: lt.emask, SamplingLogP: lt.samp, EntropyWeight: lt.ew, Seg: lt.seg}
	out := kernels.HostLossOutput{Loss: lt.loss, DLogP: lt.dlogp, DEntropy: lt.dent, Ratio: lt.ratio, KL: lt.kl, Clip: lt.clip, Phi: lt.phi}
	be.PolicyLoss(out.Buffers(), in.Buffers(), loss.LossParams, len(lt.rowSeq))
	return lt.result(seqs), nil
}
