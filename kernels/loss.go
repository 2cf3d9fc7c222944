package kernels

import (
	"fmt"
	"math"
)

// Objective selects the per-token policy objective ℓ of PolicyLoss. With
// w the importance ratio π/π_old, A the advantage and sg a stop-gradient:
type Objective uint8

const (
	// ObjectiveClipped is PPO's clipped surrogate (TRL's grpo, bnpo,
	// dr_grpo, dapo and luspo, which differ only in the weights):
	// ℓ = −min(w'·A, clamp(w, 1−EpsLow, 1+EpsHigh)·A) with w' = min(w,
	// Delta) when Delta > 0 (INTELLECT-2's two-sided clip). Ties take the
	// unclipped branch.
	ObjectiveClipped Objective = iota
	// ObjectiveCISPO: ℓ = −sg(min(w, EpsHigh))·A·logp.
	ObjectiveCISPO
	// ObjectiveSAPO: ℓ = −(4/τ)·sigmoid(τ·(w−1))·A, τ = SAPOTemperaturePos when
	// A > 0, else SAPOTemperatureNeg.
	ObjectiveSAPO
	// ObjectiveVESPO: ℓ = −sg(φ)·A·logp with one φ per sequence:
	// log w = clamp(Σ_t mask·clamp(logp−old, −20, 20), log 1e-8, 20) over the
	// sequence, (k, λ) = (VESPOKPos, VESPOLambdaPos) when A ≥ 0 else the
	// negative pair, λ at least 1e-4, log φ = λ + k·log w − λ·w (φ(1) = 1),
	// and a non-finite φ counts as 0. It needs LossInput.Seg.
	ObjectiveVESPO
	// ObjectivePG is plain policy gradient, ℓ = −A·logp; with A = 1 and
	// weights 1/N it is the mean negative log-likelihood of SFT.
	ObjectivePG
)

// String names the objective as TRL's loss_type family does.
func (o Objective) String() string {
	switch o {
	case ObjectiveClipped:
		return "clipped"
	case ObjectiveCISPO:
		return "cispo"
	case ObjectiveSAPO:
		return "sapo"
	case ObjectiveVESPO:
		return "vespo"
	case ObjectivePG:
		return "pg"
	}
	return fmt.Sprintf("Objective(%d)", uint8(o))
}

// LossParams are the scalar settings of PolicyLoss: the one parameter type
// of the policy loss, whose field names follow TRL's GRPOConfig (grpo's
// Config.LossParams fills it). The loss of token t is
//
//	loss_t = Weight_t · (f_t·ℓ_t + Beta·KL_t) − EntropyCoef·W^H_t·E_t·H_t
//
// with ℓ_t the objective's per-token term, KL_t = exp(ref−logp) − (ref−logp)
// − 1 (the k3 estimator of KL(π‖π_ref)), H_t the token's entropy, W^H_t the
// entropy bonus's weight (LossInput.EntropyWeight, else Weight_t), E_t the
// entropy mask (LossInput.EntropyMask, else 1) and f_t the policy term's
// factor, the product of TRL's per-token multipliers in TRL's order:
//
//	f_t = O_t · E_t · ρ_t
//
// O_t the off-policy sequence mask (OffPolicyMask), E_t the entropy mask
// and ρ_t the IS correction (LossInput.ISRatio, else 1; VESPO folds ρ into
// its φ instead). Aggregation (TRL's grpo, bnpo, dapo, ... normalisers)
// lives in the caller's Weight, so the total loss is Σ_t loss_t. The
// gradient treats OldLogP, RefLogP, SamplingLogP, advantages, weights, ρ,
// E and O as constants.
type LossParams struct {
	Objective Objective
	// SequenceRatio uses one importance ratio per sequence (GSPO, TRL's
	// importance_sampling_level="sequence"): w = exp(Σ mask·(logp−old) /
	// max(Σ mask, 1)) over the sequence's tokens, with gradient flowing to
	// every masked-in token. Every objective takes it as TRL's
	// _compute_loss does: the clipped surrogate and SAPO's gate on the
	// sequence's w; CISPO's cap sg(min(w, EpsHigh)) on it; VESPO's φ has
	// its own sequence ratio and uses w only for UseBiasCorrectionKL; PG
	// ignores w. Needs LossInput.Seg (Mask nil counts every token).
	SequenceRatio bool
	EpsLow        float32 // ObjectiveClipped: lower clip 1−EpsLow (epsilon)
	EpsHigh       float32 // ObjectiveClipped: upper clip 1+EpsHigh; ObjectiveCISPO: the cap on w (epsilon_high)
	Delta         float32 // ObjectiveClipped: cap on the unclipped ratio; 0 = none (delta)

	// SAPO's gate temperatures (sapo_temperature_pos, _neg; TRL: 1.0, 1.05).
	SAPOTemperaturePos, SAPOTemperatureNeg float32

	VESPOKPos, VESPOLambdaPos float32 // ObjectiveVESPO, A ≥ 0 (vespo_k_pos, vespo_lambda_pos; TRL: 2, 3)
	VESPOKNeg, VESPOLambdaNeg float32 // ObjectiveVESPO, A < 0 (vespo_k_neg, vespo_lambda_neg; TRL: 3, 2)

	Beta        float32 // coefficient of the k3 KL term; 0 = none (RefLogP not read) (beta)
	EntropyCoef float32 // coefficient of the entropy bonus; 0 = none (Entropy not read) (entropy_coef)
	// UseBiasCorrectionKL multiplies KL_t by the importance ratio w (before
	// Delta; the sequence's w at sequence level), TRL's
	// use_bias_correction_kl (DeepSeek-V3.2); the gradient flows through w
	// as well.
	UseBiasCorrectionKL bool
	// OffPolicyMask turns on the off-policy sequence mask of DeepSeek-V3.2
	// (TRL's off_policy_mask_threshold, set): a sequence keeps its policy
	// term (O = 1) when its advantage is ≥ 0 or when the mean over its
	// masked-in tokens of sampling − logp (logp held constant) is at most
	// OffPolicyMaskThreshold; otherwise O = 0. The sampling log-probs are
	// LossInput.SamplingLogP, else OldLogP, else LogP (then every sequence
	// is kept), as TRL falls back. Needs LossInput.Seg.
	OffPolicyMask          bool
	OffPolicyMaskThreshold float32
}

// Validate reports the first setting that makes no sense, naming it.
func (p LossParams) Validate() error {
	finite := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	for _, f := range []struct {
		name string
		v    float32
	}{{"EpsLow", p.EpsLow}, {"EpsHigh", p.EpsHigh}, {"Delta", p.Delta}, {"SAPOTemperaturePos", p.SAPOTemperaturePos},
		{"SAPOTemperatureNeg", p.SAPOTemperatureNeg}, {"VESPOKPos", p.VESPOKPos}, {"VESPOLambdaPos", p.VESPOLambdaPos},
		{"VESPOKNeg", p.VESPOKNeg}, {"VESPOLambdaNeg", p.VESPOLambdaNeg}, {"Beta", p.Beta}, {"EntropyCoef", p.EntropyCoef},
		{"OffPolicyMaskThreshold", p.OffPolicyMaskThreshold}} {
		if !finite(f.v) {
			return fmt.Errorf("loss %s = %v: must be finite", f.name, f.v)
		}
	}
	switch p.Objective {
	case ObjectiveClipped:
		if p.EpsLow < 0 {
			return fmt.Errorf("loss EpsLow = %v: must be ≥ 0", p.EpsLow)
		}
		if p.EpsHigh < 0 {
			return fmt.Errorf("loss EpsHigh = %v: must be ≥ 0", p.EpsHigh)
		}
		if p.Delta < 0 {
			return fmt.Errorf("loss Delta = %v: must be ≥ 0 (0 = off)", p.Delta)
		}
	case ObjectiveCISPO:
		if p.EpsHigh < 0 {
			return fmt.Errorf("loss EpsHigh = %v: CISPO caps the ratio at EpsHigh, which must be ≥ 0", p.EpsHigh)
		}
	case ObjectiveSAPO:
		if p.SAPOTemperaturePos <= 0 || p.SAPOTemperatureNeg <= 0 {
			return fmt.Errorf("loss SAPO temperatures %v, %v: must be > 0", p.SAPOTemperaturePos, p.SAPOTemperatureNeg)
		}
	case ObjectiveVESPO, ObjectivePG:
	default:
		return fmt.Errorf("loss objective %v: unknown", p.Objective)
	}
	if p.Beta < 0 {
		return fmt.Errorf("loss Beta = %v: must be ≥ 0 (0 = no KL term)", p.Beta)
	}
	return nil
}

// NeedsSegments reports whether PolicyLoss must see whole sequences at
// once (LossInput.Seg): sequence-level ratios, VESPO's φ and the
// off-policy mask. Other settings are per token, so a caller may evaluate
// any slice of tokens.
func (p LossParams) NeedsSegments() bool {
	return p.SequenceRatio || p.Objective == ObjectiveVESPO || p.OffPolicyMask
}

// LossInput are PolicyLoss's per-token inputs, N tokens laid out sequence
// after sequence, as F32 Buffers (Seg I32). Buffers may be longer than N;
// only [:N] is read. An optional input is absent when its Buffer is empty.
type LossInput struct {
	LogP    Buffer // [N] the current policy's log-probs (the forward's)
	Entropy Buffer // [N] the current policy's entropies; read when EntropyCoef ≠ 0
	OldLogP Buffer // [N] the sampling policy's log-probs; empty = LogP (ratio 1, on-policy)
	RefLogP Buffer // [N] the reference policy's log-probs; read when Beta ≠ 0
	Adv     Buffer // [N] advantages per token, or empty with SeqAdv
	SeqAdv  Buffer // [S] one advantage per sequence (needs Seg), or empty with Adv
	// Mask [N] is 1 for tokens in the loss and 0 otherwise; it selects the
	// tokens of sequence-level ratios and VESPO's sum; empty means all 1.
	Mask Buffer
	// ISRatio [N], if not empty, is a per-token importance-sampling
	// correction ρ held constant (TRL's vLLM IS correction: the caller
	// computes it from old and sampling log-probs, truncated or masked): it
	// multiplies ℓ_t (not the KL term). For VESPO its log, clamped to
	// [log 1e-8, 20], joins the sequence's log-ratio sum instead.
	ISRatio Buffer
	// EntropyMask [N], if not empty, is TRL's top_entropy_quantile mask E
	// (1 keeps the token, 0 drops it): it multiplies the policy term ℓ_t
	// and the entropy bonus, not the KL term, as TRL's _compute_loss does.
	EntropyMask Buffer
	// SamplingLogP [N], if not empty, are the sampler's log-probs, read by
	// the off-policy mask (LossParams.OffPolicyMask); empty falls back to
	// OldLogP.
	SamplingLogP Buffer
	// Weight [N] is each token's weight in the total: the mask times the
	// caller's normalisation (1/Σmask for dapo, 1/(B·len_i) for grpo, ...).
	Weight Buffer
	// EntropyWeight [N], if not empty, is each token's weight in the
	// entropy bonus in place of Weight (TRL normalises the bonus as a mean
	// over the tokens the entropy mask keeps, whatever the policy term's
	// normalisation); read when EntropyCoef ≠ 0.
	EntropyWeight Buffer
	// Seg [S+1] (I32) are the token offsets of the sequences (Seg[0] = 0,
	// Seg[S] = N); needed when LossParams.NeedsSegments or with SeqAdv.
	Seg Buffer
}

// Clip flags of LossOutput.Clip, as TRL's clip_ratio metrics count them.
const (
	// ClipLow: w < 1−EpsLow with A < 0 (ObjectiveClipped).
	ClipLow uint8 = 1 << iota
	// ClipHigh: w > 1+EpsHigh with A > 0 (ObjectiveClipped), or w > EpsHigh
	// with A > 0 (ObjectiveCISPO's cispo_clip_ratio). ClipLow|ClipHigh is
	// TRL's "region".
	ClipHigh
)

// LossOutput are PolicyLoss's per-token outputs (written, =), F32
// Buffers (Clip U8). Empty optional Buffers are skipped.
type LossOutput struct {
	Loss     Buffer // [N] loss_t (see LossParams); the total loss is their sum
	DLogP    Buffer // [N] d total / d LogP_t
	DEntropy Buffer // [N] d total / d Entropy_t = −EntropyCoef·W^H_t·E_t; optional
	Ratio    Buffer // [N] the ratio w the objective used (after Delta; the sequence's w at sequence level); optional
	KL       Buffer // [N] KL_t (0 when Beta = 0; times w with UseBiasCorrectionKL, as TRL logs it); optional
	Clip     Buffer // [N] U8 ClipLow | ClipHigh flags; optional
	Phi      Buffer // [N] VESPO's φ of the token's sequence (1 for other objectives); optional
}

// HostLossInput is a LossInput of host Buffers as slices (nil for an
// absent input): what a CPU backend's kernel reads.
type HostLossInput struct {
	LogP, Entropy, OldLogP, RefLogP, Adv, SeqAdv, Mask, ISRatio, Weight []float32
	EntropyMask, SamplingLogP, EntropyWeight                            []float32
	Seg                                                                 []int32
}

// HostLossOutput is a LossOutput of host Buffers as slices (nil for an
// absent output).
type HostLossOutput struct {
	Loss, DLogP, DEntropy, Ratio, KL, Phi []float32
	Clip                                  []uint8
}

// optF32 is b's host slice, nil when b is empty.
func optF32(b Buffer) []float32 {
	if b.n == 0 {
		return nil
	}
	return b.F32()
}

// Host returns in's host Buffers as slices. It panics for device memory.
func (in *LossInput) Host() HostLossInput {
	h := HostLossInput{LogP: optF32(in.LogP), Entropy: optF32(in.Entropy), OldLogP: optF32(in.OldLogP),
		RefLogP: optF32(in.RefLogP), Adv: optF32(in.Adv), SeqAdv: optF32(in.SeqAdv), Mask: optF32(in.Mask),
		ISRatio: optF32(in.ISRatio), Weight: optF32(in.Weight), EntropyMask: optF32(in.EntropyMask),
		SamplingLogP: optF32(in.SamplingLogP), EntropyWeight: optF32(in.EntropyWeight)}
	if in.Seg.n > 0 {
		h.Seg = in.Seg.I32()
	}
	return h
}

// Host returns out's host Buffers as slices. It panics for device memory.
func (out *LossOutput) Host() HostLossOutput {
	h := HostLossOutput{Loss: optF32(out.Loss), DLogP: optF32(out.DLogP), DEntropy: optF32(out.DEntropy),
		Ratio: optF32(out.Ratio), KL: optF32(out.KL), Phi: optF32(out.Phi)}
	if out.Clip.n > 0 {
		h.Clip = out.Clip.U8()
	}
	return h
}

// CheckPolicyLoss panics, naming the op and the argument, when PolicyLoss's
// arguments do not fit n tokens or p is invalid (programmer errors: the
// model validates user settings first). Every backend calls it, so the
// shape rules live here once. Per-token values are not inspected; Seg's
// offsets are, when Seg is host memory (a device backend checks its own).
func CheckPolicyLoss(out LossOutput, in LossInput, p LossParams, n int) {
	fail := func(format string, args ...any) {
		panic("kernels: PolicyLoss: " + fmt.Sprintf(format, args...))
	}
	if n < 0 {
		fail("n = %d < 0", n)
	}
	if err := p.Validate(); err != nil {
		fail("%v", err)
	}
	needN := func(name string, b Buffer, dt DType, required bool) {
		if b.n == 0 {
			if required && n > 0 {
				fail("%s is required", name)
			}
			return
		}
		if b.dtype != dt {
			fail("%s holds %v, want %v", name, b.dtype, dt)
		}
		if b.n < n {
			fail("%s has %d entries, want %d", name, b.n, n)
		}
	}
	needN("LogP", in.LogP, F32, true)
	needN("Weight", in.Weight, F32, true)
	needN("Entropy", in.Entropy, F32, p.EntropyCoef != 0)
	needN("OldLogP", in.OldLogP, F32, false)
	needN("RefLogP", in.RefLogP, F32, p.Beta != 0)
	needN("Mask", in.Mask, F32, false)
	needN("ISRatio", in.ISRatio, F32, false)
	needN("EntropyMask", in.EntropyMask, F32, false)
	needN("SamplingLogP", in.SamplingLogP, F32, false)
	needN("EntropyWeight", in.EntropyWeight, F32, false)
	needN("Loss", out.Loss, F32, true)
	needN("DLogP", out.DLogP, F32, true)
	needN("DEntropy", out.DEntropy, F32, false)
	needN("Ratio", out.Ratio, F32, false)
	needN("KL", out.KL, F32, false)
	needN("Clip", out.Clip, U8, false)
	needN("Phi", out.Phi, F32, false)
	if (in.Adv.n == 0) == (in.SeqAdv.n == 0) && n > 0 {
		fail("exactly one of Adv and SeqAdv is needed")
	}
	if in.Adv.n > 0 {
		needN("Adv", in.Adv, F32, true)
	}
	if in.Seg.n == 0 {
		if p.NeedsSegments() || in.SeqAdv.n > 0 {
			fail("Seg is required (sequence-level ratio, VESPO, the off-policy mask or SeqAdv)")
		}
		return
	}
	if in.Seg.dtype != I32 {
		fail("Seg holds %v, want I32", in.Seg.dtype)
	}
	s := in.Seg.n - 1
	if in.SeqAdv.n > 0 {
		if in.SeqAdv.dtype != F32 {
			fail("SeqAdv holds %v, want F32", in.SeqAdv.dtype)
		}
		if in.SeqAdv.n < s {
			fail("SeqAdv has %d entries, want %d sequences", in.SeqAdv.n, s)
		}
	}
	if !in.Seg.Host() {
		return
	}
	seg := in.Seg.I32()
	if seg[0] != 0 || int(seg[s]) != n {
		fail("Seg must run from 0 to n = %d, got %v", n, seg)
	}
	for i := range s {
		if seg[i+1] < seg[i] {
			fail("Seg decreases at %d", i)
		}
	}
}

// Buffers wraps h's slices as host Buffers (nil or empty: absent), with no
// copy: how a caller holding host slices calls PolicyLoss.
func (h HostLossInput) Buffers() LossInput {
	return LossInput{LogP: HostF32(h.LogP), Entropy: HostF32(h.Entropy), OldLogP: HostF32(h.OldLogP),
		RefLogP: HostF32(h.RefLogP), Adv: HostF32(h.Adv), SeqAdv: HostF32(h.SeqAdv), Mask: HostF32(h.Mask),
		ISRatio: HostF32(h.ISRatio), Weight: HostF32(h.Weight), EntropyMask: HostF32(h.EntropyMask),
		SamplingLogP: HostF32(h.SamplingLogP), EntropyWeight: HostF32(h.EntropyWeight), Seg: HostI32(h.Seg)}
}

// Buffers wraps h's slices as host Buffers (nil or empty: absent), with no
// copy.
func (h HostLossOutput) Buffers() LossOutput {
	return LossOutput{Loss: HostF32(h.Loss), DLogP: HostF32(h.DLogP), DEntropy: HostF32(h.DEntropy),
		Ratio: HostF32(h.Ratio), KL: HostF32(h.KL), Clip: HostU8(h.Clip), Phi: HostF32(h.Phi)}
}
