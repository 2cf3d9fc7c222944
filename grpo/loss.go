package grpo

import (
	"fmt"
	"math"
)

// The policy loss of one micro-batch, as pure functions (spec §4, §10).
//
// Conventions: a micro-batch is B sequences; sequence i has T_i scored
// tokens (its completion: model and tool tokens), indexed from
// model.TrainSeq.Start, so every per-token slice is [B][T_i] and ragged —
// no padding. Mask[i][t] is the loss mask (true = sampled by the model);
// masked tokens get no loss, no gradient and no count. The loss is
//
//	L = Σ_i Σ_t W_it · ( ℓ_it·E_it·ρ_it + β·KL_it − coef·H_it )
//
// where ℓ is the loss type's per-token objective, W the normalisation
// (LossWeights; zero on masked tokens), E the entropy mask, ρ the
// sampling-correction ratio, KL the k3 estimator against the reference and
// H the entropy. PolicyLoss returns L, d L / d logp and d L / d H per token
// (gradients "=": fresh slices), and the ratio, KL and clip flags for the
// metrics. Arithmetic is float64; inputs are the model's float32 log-probs.

// LossParams are the per-token objective's parameters. They map one to one
// onto kernels.LossParams of the backend loss op: Type → Objective
// (grpo/bnpo/dr_grpo/dapo/luspo → ObjectiveClipped, cispo, sapo, vespo),
// Level == ISSequence → SequenceRatio, and the rest by name.
type LossParams struct {
	Type             LossType
	Level            ISLevel
	EpsLow           float64 // lower clip: ratios below 1−EpsLow are clipped (A < 0)
	EpsHigh          float64 // upper clip 1+EpsHigh; for cispo the cap on the ratio itself
	Delta            float64 // cap on the unclipped ratio (two-sided clip); 0 = off
	Beta             float64 // weight of the k3 KL term; 0 = none (Ref not needed)
	EntropyCoef      float64 // entropy bonus: −coef·H per loss token
	SAPOTempPos      float64 // sapo gate temperature for A > 0
	SAPOTempNeg      float64 // sapo gate temperature for A ≤ 0
	VESPOKPos        float64 // vespo k for A ≥ 0
	VESPOLambdaPos   float64 // vespo λ for A ≥ 0
	VESPOKNeg        float64 // vespo k for A < 0
	VESPOLambdaNeg   float64 // vespo λ for A < 0
	BiasCorrectionKL bool    // KL × the (unclipped) importance ratio
}

// LossParams returns the loss parameters c sets.
func (c Config) LossParams() LossParams {
	return LossParams{
		Type: c.LossType, Level: c.ImportanceSamplingLevel,
		EpsLow: c.Epsilon, EpsHigh: c.EpsilonHighOrDefault(), Delta: c.Delta,
		Beta: c.Beta, EntropyCoef: c.EntropyCoef,
		SAPOTempPos: c.SAPOTemperaturePos, SAPOTempNeg: c.SAPOTemperatureNeg,
		VESPOKPos: c.VESPOKPos, VESPOLambdaPos: c.VESPOLambdaPos, VESPOKNeg: c.VESPOKNeg, VESPOLambdaNeg: c.VESPOLambdaNeg,
		BiasCorrectionKL: c.UseBiasCorrectionKL,
	}
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
}

// LossNorm returns the normalisation inputs of c for a generation batch
// with generationTokens loss tokens.
func (c Config) LossNorm(generationTokens int) LossNorm {
	l := c.Layout()
	return LossNorm{GenerationTokens: generationTokens, GradientAccumulationSteps: l.GradientAccumulationSteps,
		StepsPerGeneration: l.StepsPerGeneration, MaxCompletionLength: c.MaxCompletionLength}
}

// LossWeights returns W, each loss token's weight in the micro-batch loss,
// which is each loss type's normalisation (B = len(mask), n_i = Σ_t
// mask[i], GA = GradientAccumulationSteps, spg = StepsPerGeneration):
//
//	grpo, sapo:         1 / (max(n_i,1) · B · GA)     mean of per-sequence means
//	bnpo:               1 / (max(Σ n_i,1) · GA)       micro-batch token mean
//	dr_grpo:            1 / (B · MaxCompletionLength · GA)
//	dapo, cispo, vespo: 1 / (max(N,1) · GA / spg)     N = GenerationTokens
//	luspo:              1 / (B · GA)                  (sequence loss × n_i, averaged)
//
// and 0 on masked tokens. Summed over the GA micro-batches of an optimizer
// step, dapo gives Σ m·ℓ / N over the generation batch when spg = GA (TRL's
// default and TRL f2cd577's formula); for spg ≠ GA the GA/spg factor
// rescales N to one accumulation window, as later TRL does, instead of
// shrinking every step's gradient by GA/spg. luspo: TRL takes the mean
// over B×T padded entries of ℓ·n_i; with β = 0 at sequence level that is
// exactly this. With β > 0 TRL also counts the KL of padding and tool
// positions (errata 10.1); here the KL term has the policy term's weight.
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

// LossInput is one micro-batch. Every [B][T_i] slice is indexed like LogP.
// It maps one to one onto the backend's kernels.LossInput after
// flattening the rows: LogP, Entropy, Old → OldLogP, Ref → RefLogP, Adv →
// SeqAdv (and Adv repeated per token), Mask, Weight.
type LossInput struct {
	LogP    [][]float32 // current log-probs (with gradient)
	Old     [][]float32 // log-probs the ratio is taken against; nil = on-policy (old = stop-grad(LogP), ratio exactly 1)
	Ref     [][]float32 // reference log-probs (adapters off); needed when Beta ≠ 0
	Entropy [][]float32 // per-token entropies; needed when EntropyCoef ≠ 0
	Mask    [][]bool    // loss mask: true on model-sampled tokens of rollouts in the loss
	Adv     []float64   // [B] advantages
	Weight  [][]float64 // normalisation W (LossWeights)
	// ISRatio, if not nil, is the sampling-correction ratio ρ
	// (SamplingISRatio); ISRatioPerSequence says each row holds one
	// sequence ratio repeated, which matters for vespo, where ρ is folded
	// into the sequence weight instead of multiplying the loss.
	ISRatio            [][]float64
	ISRatioPerSequence bool
	// EntropyMask, if not nil, keeps the policy term only on true tokens
	// (EntropyMask); the KL and entropy terms are not masked by it.
	EntropyMask [][]bool
}

// LossOutput is PolicyLoss's result; every [B][T_i] slice is indexed like
// LogP.
type LossOutput struct {
	Loss     float64
	DLogP    [][]float32 // d L / d logp, 0 on masked tokens
	DEntropy [][]float32 // d L / d H (−coef·W), 0 on masked tokens
	Ratio    [][]float64 // importance ratio (token level) or the sequence's (repeated), before the delta cap
	KL       [][]float64 // KL term as it enters the loss (× ratio with BiasCorrectionKL); nil when Beta = 0
	ClipLow  [][]bool    // ratio (after the delta cap) < 1−EpsLow with A < 0 (clipped types)
	ClipHigh [][]bool    // ratio > 1+EpsHigh with A > 0; cispo: ratio > EpsHigh with A > 0
	Phi      []float64   // [B] vespo's sequence weight φ; nil for other types
}

// TokenLoss is the objective of one token at token level: its value ℓ
// and dℓ/dlogp for a token with log-prob logp, old log-prob old (pass
// logp for on-policy) and advantage adv, plus its clip flags and ratio. It
// is what a per-token weight callback needs (the ratio depends only on
// that token), before W, E and ρ. vespo is not token-local (φ depends on
// the whole sequence) and sequence-level ratios are not either: use
// PolicyLoss for them.
func TokenLoss(p LossParams, logp, old, adv float64) (loss, dlogp float64, low, high bool, ratio float64) {
	w := math.Exp(logp - old)
	switch p.Type {
	case LossCISPO:
		cw := math.Min(w, p.EpsHigh)
		return -cw * adv * logp, -cw * adv, false, w > p.EpsHigh && adv > 0, w
	case LossSAPO:
		v, g := sapo(p, w, adv)
		return v, g * w, false, false, w
	default:
		v, g, lo, hi := clipped(p, w, adv)
		return v, g * w, lo, hi, w
	}
}

// clipped is −min(w'·A, clip(w)·A) with w' = min(w, Δ), and its
// derivative in w (torch semantics: clamp passes the gradient on its
// closed range; min splits it on a tie).
func clipped(p LossParams, w, adv float64) (v, dw float64, low, high bool) {
	wd, dwd := w, 1.0
	if p.Delta > 0 && w > p.Delta {
		wd, dwd = p.Delta, 0
	}
	lo, hi := 1-p.EpsLow, 1+p.EpsHigh
	c, dc := w, 1.0
	if w < lo {
		c, dc = lo, 0
	} else if w > hi {
		c, dc = hi, 0
	}
	u, s := wd*adv, c*adv
	switch {
	case u < s:
		v, dw = -u, -adv*dwd
	case s < u:
		v, dw = -s, -adv*dc
	default:
		v, dw = -u, -adv*(dwd+dc)/2
	}
	return v, dw, wd < lo && adv < 0, wd > hi && adv > 0
}

// sapo is −(4/τ)·σ(τ(w−1))·A with τ by the sign of A, and its derivative
// in w, −4σ(1−σ)·A.
func sapo(p LossParams, w, adv float64) (v, dw float64) {
	tau := p.SAPOTempNeg
	if adv > 0 {
		tau = p.SAPOTempPos
	}
	s := 1 / (1 + math.Exp(-tau*(w-1)))
	return -(4 / tau) * s * adv, -4 * s * (1 - s) * adv
}

// vespoPhi is VESPO's sequence weight φ(w) = exp(λ + k·log w − λ·w) with
// the summed token log-ratios clamped to [−20, 20] each and log w to
// [log 1e-8, 20], (k, λ) by A ≥ 0, λ ≥ 1e-4, and non-finite φ set to 0,
// as TRL's get_gamma_weights. logIS is the summed log of the sampling
// correction (0 for none).
func vespoPhi(p LossParams, delta []float64, mask []bool, logIS, adv float64) float64 {
	lowClamp := math.Log(1e-8)
	s := 0.0
	for t, d := range delta {
		if mask[t] {
			s += math.Max(-20, math.Min(20, d))
		}
	}
	s += logIS
	logW := math.Max(lowClamp, math.Min(20, s))
	k, lambda := p.VESPOKNeg, p.VESPOLambdaNeg
	if adv >= 0 {
		k, lambda = p.VESPOKPos, p.VESPOLambdaPos
	}
	lambda = math.Max(lambda, 1e-4)
	phi := math.Exp(lambda + k*logW - lambda*math.Exp(logW))
	if math.IsNaN(phi) || math.IsInf(phi, 0) {
		return 0
	}
	return phi
}

// PolicyLoss computes the micro-batch loss, its gradients and per-token
// diagnostics for any loss type and ratio level (see the file comment for
// the formula). It checks that the slices agree in shape and that the
// level suits the type.
func PolicyLoss(p LossParams, in LossInput) (LossOutput, error) {
	if err := checkLossInput(p, in); err != nil {
		return LossOutput{}, err
	}
	b := len(in.LogP)
	out := LossOutput{
		DLogP: make([][]float32, b), DEntropy: make([][]float32, b), Ratio: make([][]float64, b),
		ClipLow: make([][]bool, b), ClipHigh: make([][]bool, b),
	}
	if p.Beta != 0 {
		out.KL = make([][]float64, b)
	}
	if p.Type == LossVESPO {
		out.Phi = make([]float64, b)
	}
	seqLevel := p.Level == ISSequence
	for i, lp := range in.LogP {
		T := len(lp)
		mask, wt, adv := in.Mask[i], in.Weight[i], in.Adv[i]
		dl := make([]float64, T)
		out.Ratio[i] = make([]float64, T)
		out.ClipLow[i], out.ClipHigh[i] = make([]bool, T), make([]bool, T)
		out.DEntropy[i] = make([]float32, T)
		delta := make([]float64, T)
		n := 0
		for t := range lp {
			if in.Old != nil {
				delta[t] = float64(lp[t]) - float64(in.Old[i][t])
			}
			if mask[t] {
				n++
			}
		}
		// factor E·ρ multiplying the policy term of token t
		factor := func(t int) float64 {
			f := 1.0
			if in.EntropyMask != nil && !in.EntropyMask[i][t] {
				f = 0
			}
			if in.ISRatio != nil && p.Type != LossVESPO {
				f *= in.ISRatio[i][t]
			}
			return f
		}
		// Sequence ratio (GSPO): exp of the mean log-ratio over loss tokens.
		seqW := 1.0
		if seqLevel {
			s := 0.0
			for t, d := range delta {
				if mask[t] {
					s += d
				}
			}
			seqW = math.Exp(s / float64(max(n, 1)))
		}
		var phi float64
		if p.Type == LossVESPO {
			logIS := 0.0
			if in.ISRatio != nil {
				for t, r := range in.ISRatio[i] {
					if !mask[t] {
						continue
					}
					logIS += math.Max(math.Log(1e-8), math.Min(20, math.Log(r)))
					if in.ISRatioPerSequence {
						break
					}
				}
			}
			phi = vespoPhi(p, delta, mask, logIS, adv)
			out.Phi[i] = phi
		}
		var seqV, seqDW float64
		var seqLow, seqHigh bool
		if seqLevel { // only the clipped family reaches here (checkLossInput)
			seqV, seqDW, seqLow, seqHigh = clipped(p, seqW, adv)
		}
		// chain collects Σ_t ∂L/∂w_i for the sequence ratio's gradient.
		chain := 0.0
		if in.Entropy != nil {
			for t := range lp {
				if mask[t] && p.EntropyCoef != 0 {
					out.Loss -= p.EntropyCoef * wt[t] * float64(in.Entropy[i][t])
					out.DEntropy[i][t] = float32(-p.EntropyCoef * wt[t])
				}
			}
		}
		if out.KL != nil {
			out.KL[i] = make([]float64, T)
		}
		for t := range lp {
			w := math.Exp(delta[t])
			if seqLevel {
				w = seqW
			}
			out.Ratio[i][t] = w
			if !mask[t] {
				continue
			}
			f := factor(t)
			var v, g float64 // policy value and d/dlogp_t (token-local part)
			switch {
			case seqLevel:
				v = seqV
				chain += wt[t] * f * seqDW
				out.ClipLow[i][t], out.ClipHigh[i][t] = seqLow, seqHigh
			case p.Type == LossVESPO:
				v, g = -phi*adv*float64(lp[t]), -phi*adv
			default:
				var lo, hi bool
				v, g, lo, hi, _ = TokenLoss(p, float64(lp[t]), float64(lp[t])-delta[t], adv)
				out.ClipLow[i][t], out.ClipHigh[i][t] = lo, hi
			}
			out.Loss += wt[t] * f * v
			dl[t] += wt[t] * f * g
			if p.Beta != 0 {
				x := float64(in.Ref[i][t]) - float64(lp[t])
				kl, dkl := math.Exp(x)-x-1, 1-math.Exp(x)
				if p.BiasCorrectionKL {
					// d(KL·w)/dlogp_t = dKL·w + KL·dw/dlogp_t; the sequence
					// ratio's share goes through chain.
					if seqLevel {
						chain += wt[t] * p.Beta * kl
						dkl *= w
					} else {
						dkl = dkl*w + kl*w
					}
					kl *= w
				}
				out.KL[i][t] = kl
				out.Loss += wt[t] * p.Beta * kl
				dl[t] += wt[t] * p.Beta * dkl
			}
		}
		if seqLevel && n > 0 {
			// ∂w_i/∂logp_t = w_i·m_t/n_i
			g := chain * seqW / float64(n)
			for t := range lp {
				if mask[t] {
					dl[t] += g
				}
			}
		}
		out.DLogP[i] = make([]float32, T)
		for t, v := range dl {
			out.DLogP[i][t] = float32(v)
		}
	}
	return out, nil
}

func checkLossInput(p LossParams, in LossInput) error {
	b := len(in.LogP)
	if !p.Type.Valid() {
		return fmt.Errorf("grpo: loss: unknown loss type %q", p.Type)
	}
	switch p.Level {
	case ISToken:
		if p.Type == LossLUSPO {
			return fmt.Errorf("grpo: loss: luspo needs sequence-level importance sampling")
		}
	case ISSequence:
		if !p.Type.clipped() {
			return fmt.Errorf("grpo: loss: %s needs token-level importance sampling", p.Type)
		}
	default:
		return fmt.Errorf("grpo: loss: unknown importance sampling level %q", p.Level)
	}
	if len(in.Adv) != b {
		return fmt.Errorf("grpo: loss: %d advantages for %d sequences", len(in.Adv), b)
	}
	for i, a := range in.Adv {
		if math.IsNaN(a) || math.IsInf(a, 0) {
			return fmt.Errorf("grpo: loss: sequence %d has advantage %v", i, a)
		}
	}
	if p.Beta != 0 && in.Ref == nil {
		return fmt.Errorf("grpo: loss: beta %v needs reference log-probs", p.Beta)
	}
	if p.EntropyCoef != 0 && in.Entropy == nil {
		return fmt.Errorf("grpo: loss: entropy coefficient %v needs entropies", p.EntropyCoef)
	}
	check := func(name string, rows int, rowLen func(i int) int) error {
		if rows != b {
			return fmt.Errorf("grpo: loss: %s has %d rows for %d sequences", name, rows, b)
		}
		for i := range b {
			if rowLen(i) != len(in.LogP[i]) {
				return fmt.Errorf("grpo: loss: %s row %d has %d tokens, LogP has %d", name, i, rowLen(i), len(in.LogP[i]))
			}
		}
		return nil
	}
	if err := check("Mask", len(in.Mask), func(i int) int { return len(in.Mask[i]) }); err != nil {
		return err
	}
	if err := check("Weight", len(in.Weight), func(i int) int { return len(in.Weight[i]) }); err != nil {
		return err
	}
	optional := []struct {
		name string
		nil_ bool
		rows int
		f    func(i int) int
	}{
		{"Old", in.Old == nil, len(in.Old), func(i int) int { return len(in.Old[i]) }},
		{"Ref", in.Ref == nil, len(in.Ref), func(i int) int { return len(in.Ref[i]) }},
		{"Entropy", in.Entropy == nil, len(in.Entropy), func(i int) int { return len(in.Entropy[i]) }},
		{"ISRatio", in.ISRatio == nil, len(in.ISRatio), func(i int) int { return len(in.ISRatio[i]) }},
		{"EntropyMask", in.EntropyMask == nil, len(in.EntropyMask), func(i int) int { return len(in.EntropyMask[i]) }},
	}
	for _, o := range optional {
		if o.nil_ {
			continue
		}
		if err := check(o.name, o.rows, o.f); err != nil {
			return err
		}
	}
	return nil
}

// SamplingISRatio is the sampling-correction ratio ρ of TRL's
// vllm_importance_sampling_correction: with d_t = (old_t − sampling_t)
// on loss tokens, token modes take ρ_t = exp(d_t), sequence modes ρ_i =
// exp(Σ_t d_t) repeated on every token; truncate modes cap ρ at limit,
// mask modes set ρ above limit to 0. ISCorrectionNone returns nil.
// perSequence reports a sequence mode. Masked tokens get ρ = 1 (token) or
// the sequence's ρ.
func SamplingISRatio(mode ISCorrection, limit float64, old, sampling [][]float32, mask [][]bool) (rho [][]float64, perSequence bool, err error) {
	if mode == ISCorrectionNone {
		return nil, false, nil
	}
	if len(old) != len(mask) || len(sampling) != len(mask) {
		return nil, false, fmt.Errorf("grpo: sampling ratio: %d old and %d sampling rows for %d masks", len(old), len(sampling), len(mask))
	}
	apply := func(r float64, truncate bool) float64 {
		if r > limit {
			if truncate {
				return limit
			}
			return 0
		}
		return r
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
			case ISCorrectionTokenTruncate:
				rho[i][t] = apply(math.Exp(d), true)
			case ISCorrectionTokenMask:
				rho[i][t] = apply(math.Exp(d), false)
			}
		}
		switch mode {
		case ISCorrectionTokenTruncate, ISCorrectionTokenMask:
		case ISCorrectionSequenceTruncate, ISCorrectionSequenceMask:
			r := apply(math.Exp(sum), mode == ISCorrectionSequenceTruncate)
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
// tokens. ρ = 1 keeps every masked-in token; no masked-in token gives all
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
