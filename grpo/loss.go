package grpo

import (
	"fmt"
	"math"

	"github.com/x/kernels"
)

// The policy loss of one micro-batch (spec §4, §10). Its formula is
// written once, in kernels/ref (kernels.LossParams' doc); this file holds
// what the trainer adds around it: Config → kernels.LossParams, the loss
// types' normalisations (LossWeights, EntropyWeights), TRL's vLLM importance-sampling
// correction (SamplingISRatio), the entropy mask (EntropyMask) and
// mask_truncated_completions (TruncatedMask).
//
// Conventions: a micro-batch is B sequences; sequence i has T_i scored
// tokens (its completion: model and tool tokens), indexed from
// model.TrainSeq.Start, so every per-token slice is [B][T_i] and ragged —
// no padding. Mask[i][t] is the loss mask (true = sampled by the model);
// masked tokens get no loss, no gradient and no count. The loss is
//
//	L = Σ_i Σ_t W_it · ( O_i·E_it·ρ_it·ℓ_it + β·KL_it ) − coef·W^H_it·E_it·H_it
//
// where ℓ is the loss type's per-token objective, W the normalisation
// (LossWeights; zero on masked tokens), W^H the entropy bonus's
// (EntropyWeights), O the off-policy sequence mask
// (off_policy_mask_threshold), E the entropy mask (top_entropy_quantile),
// ρ the sampling-correction ratio, KL the k3 estimator against the
// reference and H the entropy — TRL's _compute_loss term by term.

// LossParams returns the loss parameters c sets: the backend loss op's
// kernels.LossParams, the one parameter type of the loss. LossType picks
// the objective (grpo, bnpo, dr_grpo, dapo and luspo the clipped
// surrogate, which they share; cispo, sapo, vespo their own), and
// ImportanceSamplingLevel sequence sets SequenceRatio for any of them, as
// TRL's _compute_loss computes every loss type at either level.
func (c Config) LossParams() kernels.LossParams {
	p := kernels.LossParams{
		SequenceRatio: c.ImportanceSamplingLevel == ISSequence,
		EpsLow:        float32(c.Epsilon), EpsHigh: float32(c.EpsilonHighOrDefault()),
		SAPOTemperaturePos: float32(c.SAPOTemperaturePos), SAPOTemperatureNeg: float32(c.SAPOTemperatureNeg),
		VESPOKPos: float32(c.VESPOKPos), VESPOLambdaPos: float32(c.VESPOLambdaPos),
		VESPOKNeg: float32(c.VESPOKNeg), VESPOLambdaNeg: float32(c.VESPOLambdaNeg),
		Beta: float32(c.Beta), EntropyCoef: float32(c.EntropyCoef), UseBiasCorrectionKL: c.UseBiasCorrectionKL,
	}
	switch c.LossType {
	case LossCISPO:
		p.Objective = kernels.ObjectiveCISPO
	case LossSAPO:
		p.Objective = kernels.ObjectiveSAPO
	case LossVESPO:
		p.Objective = kernels.ObjectiveVESPO
	default:
		p.Objective = kernels.ObjectiveClipped
		p.Delta = float32(c.Delta) // TRL's delta acts on the clipped surrogate only
	}
	if c.OffPolicyMaskThreshold != nil {
		p.OffPolicyMask, p.OffPolicyMaskThreshold = true, float32(*c.OffPolicyMaskThreshold)
	}
	return p
}

// LossNorm is what the normalisations need besides the micro-batch.
type LossNorm struct {
	// GenerationTokens is N, the loss tokens (Σ mask) of the whole
	// generation batch, counted once per generation (dapo, cispo, vespo).
	GenerationTokens int
	// GradientAccumulationSteps, StepsPerGeneration: the layout (Layout).
	GradientAccumulationSteps int
	StepsPerGeneration        int
	// MaxCompletionLength is dr_grpo's constant.
	MaxCompletionLength int
	// Level is the importance-sampling level; luspo's weight depends on it.
	Level ISLevel
	// CompletionWidth is the longest completion (model and tool tokens) of
	// the generation batch: the width TRL pads completions to, which
	// luspo's token-level weight divides by.
	CompletionWidth int
}

// LossNorm returns the normalisation inputs of c for a generation batch
// with generationTokens loss tokens and completions of at most width
// tokens.
func (c Config) LossNorm(generationTokens, width int) LossNorm {
	l := c.Layout()
	return LossNorm{GenerationTokens: generationTokens, GradientAccumulationSteps: l.GradientAccumulationSteps,
		StepsPerGeneration: l.StepsPerGeneration, MaxCompletionLength: c.MaxCompletionLength,
		Level: c.ImportanceSamplingLevel, CompletionWidth: width}
}

// LossWeights returns W, each loss token's weight in the micro-batch loss,
// which is each loss type's normalisation (B = len(mask), n_i = Σ_t
// mask[i], GA = GradientAccumulationSteps, spg = StepsPerGeneration, T =
// CompletionWidth):
//
//	grpo, sapo:         1 / (max(n_i,1) · B · GA)     mean of per-sequence means
//	bnpo:               1 / (max(Σ n_i,1) · GA)       micro-batch token mean
//	dr_grpo:            1 / (B · MaxCompletionLength · GA)
//	dapo, cispo, vespo: 1 / (max(N,1) · GA / spg)     N = GenerationTokens
//	luspo, sequence:    1 / (B · GA)                  (sequence loss × n_i, averaged)
//	luspo, token:       n_i / (B · T · GA)            (token loss × n_i over B×T)
//
// and 0 on masked tokens. Summed over the GA micro-batches of an optimizer
// step, dapo gives Σ m·ℓ / N over the generation batch when spg = GA (TRL's
// default and TRL f2cd577's formula); for spg ≠ GA the GA/spg factor
// rescales N to one accumulation window, as later TRL does, instead of
// shrinking every step's gradient by GA/spg.
//
// luspo: TRL takes the mean over the B×T padded entries of ℓ·n_i, T the
// generation batch's padded completion width. At sequence level ℓ is one
// value per sequence and that is exactly Σ_t m·ℓ_i/B; at token level it is
// n_i/(B·T) per token, so T enters the weight as in TRL. Where the project
// differs on purpose: TRL adds the β·KL term (a [B, T] tensor) to ℓ before
// that mean, so its KL counts at every padded and tool position with
// weight n_i/(B·T) — it depends on the padding width, and at token level
// so does TRL's policy term at padding and tool positions; here every
// term of a loss token has the one weight above and masked or padding
// positions have none (errata 10.1). With β = 0 at sequence level, and at
// token level on loss tokens, the two agree.
func LossWeights(t LossType, n LossNorm, mask [][]bool) ([][]float64, error) {
	b := len(mask)
	ga := n.GradientAccumulationSteps
	if ga < 1 {
		return nil, fmt.Errorf("grpo: loss weights: gradient accumulation steps %d < 1", ga)
	}
	total := 0
	for _, row := range mask {
		total += countTrue(row)
	}
	var perRow func(i, ni int) float64
	switch t {
	case LossGRPO, LossSAPO:
		perRow = func(_, ni int) float64 { return 1 / (float64(max(ni, 1)) * float64(b) * float64(ga)) }
	case LossBNPO:
		w := 1 / (float64(max(total, 1)) * float64(ga))
		perRow = func(_, _ int) float64 { return w }
	case LossDrGRPO:
		if n.MaxCompletionLength < 1 {
			return nil, fmt.Errorf("grpo: loss weights: dr_grpo needs MaxCompletionLength ≥ 1, got %d", n.MaxCompletionLength)
		}
		w := 1 / (float64(b) * float64(n.MaxCompletionLength) * float64(ga))
		perRow = func(_, _ int) float64 { return w }
	case LossDAPO, LossCISPO, LossVESPO:
		if n.StepsPerGeneration < 1 {
			return nil, fmt.Errorf("grpo: loss weights: %s needs StepsPerGeneration ≥ 1, got %d", t, n.StepsPerGeneration)
		}
		if n.GenerationTokens < total {
			return nil, fmt.Errorf("grpo: loss weights: the generation batch has %d loss tokens, fewer than this micro-batch's %d", n.GenerationTokens, total)
		}
		w := float64(n.StepsPerGeneration) / (float64(max(n.GenerationTokens, 1)) * float64(ga))
		perRow = func(_, _ int) float64 { return w }
	case LossLUSPO:
		if n.Level == ISToken {
			width := 0
			for _, row := range mask {
				width = max(width, len(row))
			}
			if n.CompletionWidth < width {
				return nil, fmt.Errorf("grpo: loss weights: luspo at token level needs the generation batch's completion width, got %d for a micro-batch with completions of %d tokens", n.CompletionWidth, width)
			}
			perRow = func(_, ni int) float64 { return float64(ni) / (float64(b) * float64(n.CompletionWidth) * float64(ga)) }
			break
		}
		w := 1 / (float64(b) * float64(ga))
		perRow = func(_, _ int) float64 { return w }
	default:
		return nil, fmt.Errorf("grpo: loss weights: unknown loss type %q", t)
	}
	out := make([][]float64, b)
	for i, row := range mask {
		out[i] = make([]float64, len(row))
		w := perRow(i, countTrue(row))
		for t, m := range row {
			if m {
				out[i][t] = w
			}
		}
	}
	return out, nil
}

// EntropyWeights returns W^H, each loss token's weight in the entropy
// bonus, as TRL's _compute_loss normalises it: the bonus is coef times the
// mean entropy of the tokens the entropy mask keeps, whatever the policy
// term's normalisation (GA = GradientAccumulationSteps):
//
//	dapo, cispo, vespo: W (LossWeights): Σ over the generation batch / N,
//	                    TRL's sum over the micro-batch / num_items_in_batch
//	the others:         1 / (max(Σ_i Σ_t mask·keep, 1) · GA), the
//	                    micro-batch's mean over the kept tokens
//
// and 0 on masked tokens; keep is the entropy mask (EntropyMask), nil
// when every loss token is kept. w are the loss type's weights.
func EntropyWeights(lt LossType, n LossNorm, mask, keep [][]bool, w [][]float64) ([][]float64, error) {
	if len(w) != len(mask) || (keep != nil && len(keep) != len(mask)) {
		return nil, fmt.Errorf("grpo: entropy weights: %d weight and %d keep rows for %d masks", len(w), len(keep), len(mask))
	}
	if n.GradientAccumulationSteps < 1 {
		return nil, fmt.Errorf("grpo: entropy weights: gradient accumulation steps %d < 1", n.GradientAccumulationSteps)
	}
	kept := 0
	for i, row := range mask {
		if len(w[i]) != len(row) || (keep != nil && len(keep[i]) != len(row)) {
			return nil, fmt.Errorf("grpo: entropy weights: row %d lengths differ from its mask's %d", i, len(row))
		}
		for t, m := range row {
			if m && (keep == nil || keep[i][t]) {
				kept++
			}
		}
	}
	tokenSum := lt == LossDAPO || lt == LossCISPO || lt == LossVESPO
	mean := 1 / (float64(max(kept, 1)) * float64(n.GradientAccumulationSteps))
	out := make([][]float64, len(mask))
	for i, row := range mask {
		out[i] = make([]float64, len(row))
		for t, m := range row {
			switch {
			case !m:
			case tokenSum:
				out[i][t] = w[i][t]
			default:
				out[i][t] = mean
			}
		}
	}
	return out, nil
}

// LossInput is one micro-batch. Every [B][T_i] slice is indexed like LogP.
// It maps one to one onto the backend's model.Loss (modelLoss): LogP and
// Entropy come from the loss forward, Old → OldLogP, Ref → RefLogP, Adv →
// SeqAdv, Sampling → SamplingLogP, ISRatio, EntropyMask, Weight,
// EntropyWeight.
type LossInput struct {
	LogP    [][]float32 // current log-probs (filled by the loss forward)
	Entropy [][]float32 // per-token entropies (filled by the loss forward)
	Old     [][]float32 // log-probs the ratio is taken against; nil = on-policy (old = stop-grad(LogP), ratio exactly 1)
	Ref     [][]float32 // reference log-probs (adapters off); needed when Beta ≠ 0
	// Sampling are the sampler's log-probs, which the off-policy mask
	// compares the current ones with; nil falls back to Old (TRL's
	// sampling_per_token_logps, else old_per_token_logps).
	Sampling [][]float32
	Mask     [][]bool    // loss mask: true on model-sampled tokens of rollouts in the loss
	Adv      []float64   // [B] advantages
	Weight   [][]float64 // normalisation W (LossWeights)
	// ISRatio, if not nil, is the sampling-correction ratio ρ
	// (SamplingISRatio); ISRatioPerSequence says each row holds one
	// sequence ratio repeated, which matters for vespo, where ρ is folded
	// into the sequence weight instead of multiplying the loss.
	ISRatio            [][]float64
	ISRatioPerSequence bool
	// EntropyMask, if not nil, keeps the policy term and the entropy bonus
	// only on true tokens (EntropyMask); the KL term is not masked by it.
	EntropyMask [][]bool
	// EntropyWeight, if not nil, is the entropy bonus's normalisation W^H
	// (EntropyWeights); nil: W.
	EntropyWeight [][]float64
}

// LossOutput is the loss of a micro-batch as the backend evaluated it;
// every [B][T_i] slice is indexed like LogP (0 at masked tokens).
type LossOutput struct {
	Loss     float64
	DLogP    [][]float32 // d L / d logp
	DEntropy [][]float32 // d L / d H (−coef·W^H·E)
	Ratio    [][]float64 // importance ratio (token level) or the sequence's (repeated), after the delta cap
	KL       [][]float64 // KL term as it enters the loss (× ratio with UseBiasCorrectionKL); nil when Beta = 0
	ClipLow  [][]bool    // ratio (after the delta cap) < 1−EpsLow with A < 0 (clipped types)
	ClipHigh [][]bool    // ratio > 1+EpsHigh with A > 0; cispo: ratio > EpsHigh with A > 0
	// Phi is [B] vespo's sequence weight φ, nil for other types. A row
	// with no loss token has φ = 1, as TRL's rule gives (its summed
	// log-ratio is 0, so w = 1 and log φ = λ − λ).
	Phi []float64
}

// SamplingISRatio is the sampling-correction ratio ρ of TRL's
// vllm_importance_sampling_correction: with d_t = (old_t − sampling_t)
// on loss tokens (0 elsewhere), token modes take ρ_t = exp(d_t), sequence
// modes ρ_i = exp(Σ_t d_t) repeated on every token; truncate modes clamp ρ
// to [clipMin, clipMax], mask modes set ρ outside it to 0, as TRL does
// with vllm_importance_sampling_clip_min and _clip_max. A bound of 0 is
// TRL's None: no bound on that side (ρ > 0, so a lower bound of 0 bounds
// nothing). ISCorrectionNone returns nil. perSequence reports a sequence
// mode.
func SamplingISRatio(mode ISCorrection, clipMin, clipMax float64, old, sampling [][]float32, mask [][]bool) (rho [][]float64, perSequence bool, err error) {
	if mode == ISCorrectionNone {
		return nil, false, nil
	}
	if len(old) != len(mask) || len(sampling) != len(mask) {
		return nil, false, fmt.Errorf("grpo: sampling ratio: %d old and %d sampling rows for %d masks", len(old), len(sampling), len(mask))
	}
	truncate := mode == ISCorrectionTokenTruncate || mode == ISCorrectionSequenceTruncate
	lo, hi := math.Inf(-1), math.Inf(1)
	if clipMin > 0 {
		lo = clipMin
	}
	if clipMax > 0 {
		hi = clipMax
	}
	apply := func(r float64) float64 {
		switch {
		case r >= lo && r <= hi:
			return r
		case !truncate:
			return 0
		case r < lo:
			return lo
		}
		return hi
	}
	rho = make([][]float64, len(mask))
	for i, m := range mask {
		if len(old[i]) != len(m) || len(sampling[i]) != len(m) {
			return nil, false, fmt.Errorf("grpo: sampling ratio: row %d has %d old, %d sampling log-probs and %d mask entries", i, len(old[i]), len(sampling[i]), len(m))
		}
		rho[i] = make([]float64, len(m))
		sum := 0.0
		for t := range m {
			d := 0.0
			if m[t] {
				d = float64(old[i][t]) - float64(sampling[i][t])
			}
			sum += d
			switch mode {
			case ISCorrectionTokenTruncate, ISCorrectionTokenMask:
				rho[i][t] = apply(math.Exp(d))
			}
		}
		switch mode {
		case ISCorrectionTokenTruncate, ISCorrectionTokenMask:
		case ISCorrectionSequenceTruncate, ISCorrectionSequenceMask:
			r := apply(math.Exp(sum))
			for t := range rho[i] {
				rho[i][t] = r
			}
		default:
			return nil, false, fmt.Errorf("grpo: sampling ratio: unknown mode %q", mode)
		}
	}
	return rho, mode == ISCorrectionSequenceTruncate || mode == ISCorrectionSequenceMask, nil
}

// EntropyMask keeps the high-entropy tokens (TRL's top_entropy_quantile
// ρ): true where mask is true and the entropy is at least the (1−ρ)
// quantile, linearly interpolated, of the entropies of all masked-in
// tokens (TRL's get_high_entropy_mask, over the micro-batch). ρ = 1 keeps every masked-in token; no masked-in token gives all
// false.
func EntropyMask(entropy [][]float32, mask [][]bool, quantile float64) ([][]bool, error) {
	if len(entropy) != len(mask) {
		return nil, fmt.Errorf("grpo: entropy mask: %d entropy rows for %d masks", len(entropy), len(mask))
	}
	var vals []float64
	for i, m := range mask {
		if len(entropy[i]) != len(m) {
			return nil, fmt.Errorf("grpo: entropy mask: row %d has %d entropies and %d mask entries", i, len(entropy[i]), len(m))
		}
		for t, ok := range m {
			if ok {
				vals = append(vals, float64(entropy[i][t]))
			}
		}
	}
	out := make([][]bool, len(mask))
	for i, m := range mask {
		out[i] = make([]bool, len(m))
	}
	if len(vals) == 0 {
		return out, nil
	}
	thr := quantileLinear(vals, 1-quantile)
	for i, m := range mask {
		for t, ok := range m {
			out[i][t] = ok && float64(entropy[i][t]) >= thr
		}
	}
	return out, nil
}

// TruncatedMask is mask_truncated_completions: a copy of mask with every
// token of a truncated rollout off, so it leaves the loss and every
// normaliser.
func TruncatedMask(mask [][]bool, truncated []bool) ([][]bool, error) {
	if len(truncated) != len(mask) {
		return nil, fmt.Errorf("grpo: truncated mask: %d flags for %d rows", len(truncated), len(mask))
	}
	out := make([][]bool, len(mask))
	for i, m := range mask {
		out[i] = make([]bool, len(m))
		if !truncated[i] {
			copy(out[i], m)
		}
	}
	return out, nil
}

func countTrue(m []bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}
