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
	// ObjectiveSAPO: ℓ = −(4/τ)·sigmoid(τ·(w−1))·A, τ = SAPOTauPos when
	// A > 0, else SAPOTauNeg.
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

// LossParams are the scalar settings of PolicyLoss. The loss of token t is
//
//	loss_t = Weight_t · (ρ_t·ℓ_t + Beta·KL_t − EntropyCoef·H_t)
//
// with ρ_t the optional IS correction (LossInput.ISRatio, else 1), KL_t =
// exp(ref−logp) − (ref−logp) − 1 (the k3 estimator of KL(π‖π_ref)) and
// H_t the token's entropy. Aggregation (TRL's grpo, bnpo, dapo, ...
// normalisers) lives in the caller's Weight, so the total loss is
// Σ_t loss_t. The gradient treats OldLogP, RefLogP, advantages, weights
// and ρ as constants.
type LossParams struct {
	Objective Objective
	// SequenceRatio uses one importance ratio per sequence (GSPO, TRL's
	// importance_sampling_level="sequence"): w = exp(Σ mask·(logp−old) /
	// max(Σ mask, 1)) over the sequence's tokens, with gradient flowing to
	// every masked-in token. Only with ObjectiveClipped or ObjectivePG (the
	// latter ignores w). Needs LossInput.Seg (Mask nil counts every token).
	SequenceRatio bool
	EpsLow        float32 // ObjectiveClipped: lower clip 1−EpsLow
	EpsHigh       float32 // ObjectiveClipped: upper clip 1+EpsHigh; ObjectiveCISPO: the cap on w
	Delta         float32 // ObjectiveClipped: cap on the unclipped ratio; 0 = none

	SAPOTauPos, SAPOTauNeg float32 // ObjectiveSAPO temperatures (TRL: 1.0, 1.05)

	VESPOKPos, VESPOLambdaPos float32 // ObjectiveVESPO, A ≥ 0 (TRL: 2, 3)
	VESPOKNeg, VESPOLambdaNeg float32 // ObjectiveVESPO, A < 0 (TRL: 3, 2)

	Beta        float32 // coefficient of the k3 KL term; 0 = none (RefLogP not read)
	EntropyCoef float32 // coefficient of the entropy bonus; 0 = none (Entropy not read)
	// KLBiasCorrection multiplies KL_t by the importance ratio w (before
	// Delta), TRL's use_bias_correction_kl (DeepSeek-V3.2); the gradient
	// flows through w as well.
	KLBiasCorrection bool
}

// Validate reports the first setting that makes no sense, naming it.
func (p LossParams) Validate() error {
	finite := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	for _, f := range []struct {
		name string
		v    float32
	}{{"EpsLow", p.EpsLow}, {"EpsHigh", p.EpsHigh}, {"Delta", p.Delta}, {"SAPOTauPos", p.SAPOTauPos},
		{"SAPOTauNeg", p.SAPOTauNeg}, {"VESPOKPos", p.VESPOKPos}, {"VESPOLambdaPos", p.VESPOLambdaPos},
		{"VESPOKNeg", p.VESPOKNeg}, {"VESPOLambdaNeg", p.VESPOLambdaNeg}, {"Beta", p.Beta}, {"EntropyCoef", p.EntropyCoef}} {
		if !finite(f.v) {
			return fmt.Errorf("loss %s = %v: must be finite", f.name, f.v)
		}
	}
	switch p.Objective {
	case ObjectiveClipped:
		if p.EpsLow < 0 || p.EpsLow >= 1 {
			return fmt.Errorf("loss EpsLow = %v: must be in [0, 1)", p.EpsLow)
		}
		if p.EpsHigh < 0 {
			return fmt.Errorf("loss EpsHigh = %v: must be ≥ 0", p.EpsHigh)
		}
		if p.Delta < 0 || (p.Delta > 0 && p.Delta <= 1) {
			return fmt.Errorf("loss Delta = %v: must be 0 (off) or > 1", p.Delta)
		}
	case ObjectiveCISPO:
		if p.EpsHigh <= 0 {
			return fmt.Errorf("loss EpsHigh = %v: CISPO caps the ratio at EpsHigh, which must be > 0", p.EpsHigh)
		}
	case ObjectiveSAPO:
		if p.SAPOTauPos <= 0 || p.SAPOTauNeg <= 0 {
			return fmt.Errorf("loss SAPO temperatures %v, %v: must be > 0", p.SAPOTauPos, p.SAPOTauNeg)
		}
	case ObjectiveVESPO, ObjectivePG:
	default:
		return fmt.Errorf("loss objective %v: unknown", p.Objective)
	}
	if p.SequenceRatio && p.Objective != ObjectiveClipped && p.Objective != ObjectivePG {
		return fmt.Errorf("loss SequenceRatio with objective %v: only the clipped objective has sequence-level ratios", p.Objective)
	}
	if p.Beta < 0 {
		return fmt.Errorf("loss Beta = %v: must be ≥ 0 (0 = no KL term)", p.Beta)
	}
	return nil
}

// NeedsSegments reports whether PolicyLoss must see whole sequences at
// once (LossInput.Seg): sequence-level ratios and VESPO's φ. Other
// settings are per token, so a caller may evaluate any slice of tokens.
func (p LossParams) NeedsSegments() bool {
	return p.SequenceRatio || p.Objective == ObjectiveVESPO
}

// LossInput are PolicyLoss's per-token inputs, N tokens laid out sequence
// after sequence. Slices may be longer than N; only [:N] is read.
type LossInput struct {
	LogP    []float32 // [N] the current policy's log-probs (the forward's)
	Entropy []float32 // [N] the current policy's entropies; read when EntropyCoef ≠ 0
	OldLogP []float32 // [N] the sampling policy's log-probs; nil = LogP (ratio 1, on-policy)
	RefLogP []float32 // [N] the reference policy's log-probs; read when Beta ≠ 0
	Adv     []float32 // [N] advantages per token, or nil with SeqAdv
	SeqAdv  []float32 // [S] one advantage per sequence (needs Seg), or nil with Adv
	// Mask [N] is 1 for tokens in the loss and 0 otherwise; it selects the
	// tokens of sequence-level ratios and VESPO's sum; nil means all 1.
	Mask []float32
	// ISRatio [N], if not nil, is a per-token importance-sampling
	// correction ρ held constant (TRL's vLLM IS correction: the caller
	// computes it from old and sampling log-probs, truncated or masked): it
	// multiplies ℓ_t (not the KL term). For VESPO its log, clamped to
	// [log 1e-8, 20], joins the sequence's log-ratio sum instead.
	ISRatio []float32
	// Weight [N] is each token's weight in the total: the mask times the
	// caller's normalisation (1/Σmask for dapo, 1/(B·len_i) for grpo, ...).
	Weight []float32
	// Seg [S+1] are the token offsets of the sequences (Seg[0] = 0,
	// Seg[S] = N); needed when LossParams.NeedsSegments or with SeqAdv.
	Seg []int32
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

// LossOutput are PolicyLoss's per-token outputs (written, =). Nil optional
// slices are skipped.
type LossOutput struct {
	Loss     []float32 // [N] loss_t (see LossParams); the total loss is their sum
	DLogP    []float32 // [N] d total / d LogP_t
	DEntropy []float32 // [N] d total / d Entropy_t = −EntropyCoef·Weight_t; optional
	Ratio    []float32 // [N] the ratio w the objective used (after Delta; the sequence's w at sequence level); optional
	KL       []float32 // [N] KL_t (0 when Beta = 0; times w with KLBiasCorrection, as TRL logs it); optional
	Clip     []uint8   // [N] ClipLow | ClipHigh flags; optional
	Phi      []float32 // [N] VESPO's φ of the token's sequence (1 for other objectives); optional
}

// CheckPolicyLoss panics, naming the op and the argument, when PolicyLoss's
// arguments do not fit n tokens or p is invalid (programmer errors: the
// model validates user settings first). Every backend calls it, so the
// shape rules live here once. Per-token values are not inspected.
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
	needN := func(name string, l int, required bool, isNil bool) {
		if isNil {
			if required {
				fail("%s is required", name)
			}
			return
		}
		if l < n {
			fail("%s has %d entries, want %d", name, l, n)
		}
	}
	needN("LogP", len(in.LogP), true, in.LogP == nil && n > 0)
	needN("Weight", len(in.Weight), true, in.Weight == nil && n > 0)
	needN("Entropy", len(in.Entropy), p.EntropyCoef != 0, in.Entropy == nil)
	needN("OldLogP", len(in.OldLogP), false, in.OldLogP == nil)
	needN("RefLogP", len(in.RefLogP), p.Beta != 0, in.RefLogP == nil)
	needN("Mask", len(in.Mask), false, in.Mask == nil)
	needN("ISRatio", len(in.ISRatio), false, in.ISRatio == nil)
	needN("Loss", len(out.Loss), true, out.Loss == nil && n > 0)
	needN("DLogP", len(out.DLogP), true, out.DLogP == nil && n > 0)
	needN("DEntropy", len(out.DEntropy), false, out.DEntropy == nil)
	needN("Ratio", len(out.Ratio), false, out.Ratio == nil)
	needN("KL", len(out.KL), false, out.KL == nil)
	needN("Clip", len(out.Clip), false, out.Clip == nil)
	needN("Phi", len(out.Phi), false, out.Phi == nil)
	if (in.Adv == nil) == (in.SeqAdv == nil) && n > 0 {
		fail("exactly one of Adv and SeqAdv is needed")
	}
	if in.Adv != nil {
		needN("Adv", len(in.Adv), true, false)
	}
	if in.Seg == nil {
		if p.NeedsSegments() || in.SeqAdv != nil {
			fail("Seg is required (sequence-level ratio, VESPO or SeqAdv)")
		}
		return
	}
	s := len(in.Seg) - 1
	if s < 0 || in.Seg[0] != 0 || int(in.Seg[s]) != n {
		fail("Seg must run from 0 to n = %d, got %v", n, in.Seg)
	}
	for i := range s {
		if in.Seg[i+1] < in.Seg[i] {
			fail("Seg decreases at %d", i)
		}
	}
	if in.SeqAdv != nil && len(in.SeqAdv) < s {
		fail("SeqAdv has %d entries, want %d sequences", len(in.SeqAdv), s)
	}
}
