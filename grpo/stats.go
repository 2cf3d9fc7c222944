package grpo

import (
	"fmt"
	"math"
	"slices"

	"github.com/x/kernels"
)

// Pure metric math: each function puts TRL's metrics (spec §6, names in
// metrics.go) into a Metrics map. A metric with nothing to average is NaN
// ("no value"), except where TRL defines 0.

// CompletionStats puts the completion-length metrics of a generation batch:
// completions/mean_length, min_length and max_length over modelTokens (each
// rollout's model-sampled tokens, Σ mask: tool tokens do not count),
// completions/clipped_ratio, the fraction cut off by the token budget
// (clipped[i]: no EOS at the end), and mean/min/max_terminated_length over
// the rollouts that were not clipped (0 when all were). Pass only the
// rollouts that count (failed ones left out).
func CompletionStats(m Metrics, modelTokens []int, clipped []bool) error {
	if len(clipped) != len(modelTokens) {
		return fmt.Errorf("grpo: completion stats: %d clipped flags for %d rollouts", len(clipped), len(modelTokens))
	}
	all := make([]float64, len(modelTokens))
	var term []float64
	nClipped := 0
	for i, n := range modelTokens {
		all[i] = float64(n)
		if clipped[i] {
			nClipped++
		} else {
			term = append(term, float64(n))
		}
	}
	m[MetricCompletionsMeanLength], m[MetricCompletionsMinLength], m[MetricCompletionsMaxLength] = meanMinMax(all)
	m[MetricCompletionsClippedRatio] = math.NaN()
	if len(modelTokens) > 0 {
		m[MetricCompletionsClippedRatio] = float64(nClipped) / float64(len(modelTokens))
	}
	if len(term) == 0 {
		term = []float64{0}
	}
	m[MetricCompletionsMeanTermLength], m[MetricCompletionsMinTermLength], m[MetricCompletionsMaxTermLength] = meanMinMax(term)
	return nil
}

// ToolStats puts tools/call_frequency, the tool calls per rollout, and
// tools/failure_frequency, the failed calls per call (0 when there were no
// calls), from each rollout's call and failure counts.
func ToolStats(m Metrics, calls, failures []int) error {
	if len(failures) != len(calls) {
		return fmt.Errorf("grpo: tool stats: %d failure counts for %d rollouts", len(failures), len(calls))
	}
	c, f := 0, 0
	for i := range calls {
		if failures[i] > calls[i] || failures[i] < 0 {
			return fmt.Errorf("grpo: tool stats: rollout %d has %d failures in %d calls", i, failures[i], calls[i])
		}
		c += calls[i]
		f += failures[i]
	}
	m[MetricToolsCallFrequency] = math.NaN()
	if len(calls) > 0 {
		m[MetricToolsCallFrequency] = float64(c) / float64(len(calls))
	}
	m[MetricToolsFailureFrequency] = 0
	if c > 0 {
		m[MetricToolsFailureFrequency] = float64(f) / float64(c)
	}
	return nil
}

// LossStats accumulates the loss metrics of the micro-batches of one
// optimizer step (or logging window): each micro-batch's values are
// computed as TRL computes them and then averaged over the micro-batches
// (NaN-aware), as TRL averages what it appended; "loss" is their sum, the
// optimizer step's loss. Use NewLossStats; not safe for concurrent use.
type LossStats struct {
	p                   kernels.LossParams
	loss                float64
	policy, kl, entropy float64 // the loss's terms, summed like loss
	noTerms             bool    // an input had no Weight: the terms are unknown (NaN)
	vals                map[string][]float64
}

// NewLossStats returns an empty accumulator for loss parameters p
// (Config.LossParams).
func NewLossStats(p kernels.LossParams) *LossStats {
	return &LossStats{p: p, vals: map[string][]float64{}}
}

// Add records one micro-batch: its input and PolicyLoss's output.
//
//	kl, entropy: mean over loss tokens (kl only when Beta ≠ 0)
//	clip_ratio/low_mean, high_mean, region_mean: mean of the flags over
//	  loss tokens; at sequence level a plain mean over sequences
//	clip_ratio/low_min, high_max: min (max) over sequences of the
//	  sequence's flagged fraction; a sequence with no loss token is NaN
//	  and skipped (token level), at sequence level its 0/1 flag counts
//	cispo_clip_ratio (cispo), vespo/phi_seq_mean (vespo, mean over sequences)
//
// The loss's terms are summed over the micro-batches as "loss" is:
// kl_loss = β·Σ W·KL and entropy_loss = −coef·Σ W^H·E·H over the loss
// tokens (kernels.LossParams' formula; W^H = in.EntropyWeight, else W),
// policy_loss the rest, so that loss = policy_loss + kl_loss +
// entropy_loss.
func (s *LossStats) Add(in LossInput, out LossOutput) {
	s.loss += out.Loss
	if in.Weight == nil {
		s.noTerms = true // the terms need the weights
	}
	var kl, ent float64
	for i, row := range in.Mask {
		if in.Weight == nil {
			break
		}
		for t, ok := range row {
			if !ok {
				continue
			}
			if out.KL != nil && s.p.Beta != 0 {
				kl += in.Weight[i][t] * float64(s.p.Beta) * out.KL[i][t]
			}
			if in.Entropy != nil && s.p.EntropyCoef != 0 && (in.EntropyMask == nil || in.EntropyMask[i][t]) {
				wh := in.Weight[i][t]
				if in.EntropyWeight != nil {
					wh = in.EntropyWeight[i][t]
				}
				ent -= wh * float64(s.p.EntropyCoef) * float64(in.Entropy[i][t])
			}
		}
	}
	s.kl += kl
	s.entropy += ent
	s.policy += out.Loss - kl - ent
	put := func(name string, v float64) { s.vals[name] = append(s.vals[name], v) }
	maskedMean := func(x func(i, t int) float64) float64 {
		sum, n := 0.0, 0
		for i, row := range in.Mask {
			for t, ok := range row {
				if ok {
					sum += x(i, t)
					n++
				}
			}
		}
		if n == 0 {
			return math.NaN()
		}
		return sum / float64(n)
	}
	if out.KL != nil {
		put(MetricKL, maskedMean(func(i, t int) float64 { return out.KL[i][t] }))
	}
	if in.Entropy != nil {
		put(MetricEntropy, maskedMean(func(i, t int) float64 { return float64(in.Entropy[i][t]) }))
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	// seqFlags are the per-sequence 0/1 values of a sequence-level flag:
	// TRL's weights are one per sequence there, so its clip metrics are
	// plain means over sequences; a row with no loss token is computed at
	// ratio 1 in TRL: unflagged.
	seqFlags := func(f func(i, t int) bool) []float64 {
		v := make([]float64, len(in.Mask))
		for i, row := range in.Mask {
			for t, ok := range row {
				if ok {
					v[i] = b2f(f(i, t))
					break
				}
			}
		}
		return v
	}
	switch s.p.Objective {
	case kernels.ObjectiveClipped:
		if s.p.SequenceRatio {
			low := seqFlags(func(i, t int) bool { return out.ClipLow[i][t] })
			high := seqFlags(func(i, t int) bool { return out.ClipHigh[i][t] })
			region := seqFlags(func(i, t int) bool { return out.ClipLow[i][t] || out.ClipHigh[i][t] })
			put(MetricClipRatioLowMean, nanMean(low))
			put(MetricClipRatioHighMean, nanMean(high))
			put(MetricClipRatioRegionMean, nanMean(region))
			put(MetricClipRatioLowMin, nanMin(low))
			put(MetricClipRatioHighMax, nanMax(high))
			break
		}
		put(MetricClipRatioLowMean, maskedMean(func(i, t int) float64 { return b2f(out.ClipLow[i][t]) }))
		put(MetricClipRatioHighMean, maskedMean(func(i, t int) float64 { return b2f(out.ClipHigh[i][t]) }))
		put(MetricClipRatioRegionMean, maskedMean(func(i, t int) float64 { return b2f(out.ClipLow[i][t] || out.ClipHigh[i][t]) }))
		low, high := make([]float64, len(in.Mask)), make([]float64, len(in.Mask))
		for i, row := range in.Mask {
			nl, nh, n := 0, 0, 0
			for t, ok := range row {
				if ok {
					n++
					nl += int(b2f(out.ClipLow[i][t]))
					nh += int(b2f(out.ClipHigh[i][t]))
				}
			}
			low[i], high[i] = math.NaN(), math.NaN() // 0/0, skipped as TRL's nan-aware min/max do
			if n > 0 {
				low[i], high[i] = float64(nl)/float64(n), float64(nh)/float64(n)
			}
		}
		put(MetricClipRatioLowMin, nanMin(low))
		put(MetricClipRatioHighMax, nanMax(high))
	case kernels.ObjectiveCISPO:
		if s.p.SequenceRatio {
			put(MetricCISPOClipRatio, nanMean(seqFlags(func(i, t int) bool { return out.ClipHigh[i][t] })))
			break
		}
		put(MetricCISPOClipRatio, maskedMean(func(i, t int) float64 { return b2f(out.ClipHigh[i][t]) }))
	case kernels.ObjectiveVESPO:
		put(MetricVESPOPhiSeqMean, nanMean(out.Phi))
	}
}

// Metrics puts the averages of what was added, "loss" and its terms
// (policy_loss; kl_loss when Beta ≠ 0; entropy_loss and entropy_coef when
// EntropyCoef ≠ 0).
func (s *LossStats) Metrics(m Metrics) {
	m[MetricLoss] = s.loss
	nanIf := func(v float64) float64 {
		if s.noTerms {
			return math.NaN()
		}
		return v
	}
	m[MetricPolicyLoss] = nanIf(s.policy)
	if s.p.Beta != 0 {
		m[MetricKLLoss] = nanIf(s.kl)
	}
	if s.p.EntropyCoef != 0 {
		m[MetricEntropyLoss] = nanIf(s.entropy)
		m[MetricEntropyCoef] = float64(s.p.EntropyCoef)
	}
	for name, v := range s.vals {
		m[name] = nanMean(v)
	}
}

// SamplingStats accumulates the mismatch between sampling log-probs (those
// recorded at generation) and training log-probs of the same tokens over a
// generation batch: sampling/sampling_logp_difference/mean and max of
// |train − sampling| over loss tokens, and
// sampling/importance_sampling_ratio/min, mean and max of the ratio in use
// (per loss token, or per sequence for sequence modes). Rows are kept
// apart by their index in the batch and reduced in index order, so the
// figures do not depend on the order rows were added in (micro-batches
// are shuffled; tool calls finish in any order). Use NewSamplingStats;
// not safe for concurrent use.
type SamplingStats struct {
	rows map[int]samplingRow
	next int // index Add gives its first row
}

// samplingRow is one row's share of SamplingStats.
type samplingRow struct {
	diffSum, diffMax             float64
	diffN                        int
	ratioSum, ratioMin, ratioMax float64
	ratioN                       int
}

// NewSamplingStats returns an empty accumulator.
func NewSamplingStats() *SamplingStats {
	return &SamplingStats{rows: map[int]samplingRow{}}
}

// Add records rows of training and sampling log-probs with their loss
// mask, as the batch's next rows. rho is the correction ratio in use
// (SamplingISRatio), perSequence its mode; rho nil records the raw
// per-token ratio exp(train − sampling).
func (s *SamplingStats) Add(train, sampling [][]float32, mask [][]bool, rho [][]float64, perSequence bool) error {
	if len(train) != len(mask) || len(sampling) != len(mask) || (rho != nil && len(rho) != len(mask)) {
		return fmt.Errorf("grpo: sampling stats: %d train, %d sampling, %d ratio rows for %d masks", len(train), len(sampling), len(rho), len(mask))
	}
	for i := range mask {
		var r []float64
		if rho != nil {
			r = rho[i]
		}
		if err := s.AddRow(s.next, train[i], sampling[i], mask[i], r, perSequence); err != nil {
			return err
		}
	}
	return nil
}

// AddRow records row j of the batch (replacing what an earlier AddRow of
// j recorded), as Add does for one row.
func (s *SamplingStats) AddRow(j int, train, sampling []float32, mask []bool, rho []float64, perSequence bool) error {
	if len(train) != len(mask) || len(sampling) != len(mask) || (rho != nil && len(rho) != len(mask)) {
		return fmt.Errorf("grpo: sampling stats: row %d lengths differ from its mask's %d", j, len(mask))
	}
	r := samplingRow{diffMax: math.Inf(-1), ratioMin: math.Inf(1), ratioMax: math.Inf(-1)}
	ratio := func(v float64) {
		r.ratioSum += v
		r.ratioN++
		r.ratioMin = math.Min(r.ratioMin, v)
		r.ratioMax = math.Max(r.ratioMax, v)
	}
	for t, ok := range mask {
		if !ok {
			continue
		}
		d := float64(train[t]) - float64(sampling[t])
		r.diffSum += math.Abs(d)
		r.diffMax = math.Max(r.diffMax, math.Abs(d))
		r.diffN++
		switch {
		case rho == nil:
			ratio(math.Exp(d))
		case !perSequence:
			ratio(rho[t])
		}
	}
	if rho != nil && perSequence && len(mask) > 0 {
		ratio(rho[0])
	}
	s.rows[j] = r
	s.next = max(s.next, j+1)
	return nil
}

// Metrics puts the sampling/* metrics (NaN when nothing was added).
func (s *SamplingStats) Metrics(m Metrics) {
	idx := make([]int, 0, len(s.rows))
	for j := range s.rows {
		idx = append(idx, j)
	}
	slices.Sort(idx)
	diffSum, diffMax, ratioSum, ratioMin, ratioMax := 0.0, math.Inf(-1), 0.0, math.Inf(1), math.Inf(-1)
	diffN, ratioN := 0, 0
	for _, j := range idx {
		r := s.rows[j]
		diffSum += r.diffSum
		diffMax = math.Max(diffMax, r.diffMax)
		diffN += r.diffN
		ratioSum += r.ratioSum
		ratioMin, ratioMax = math.Min(ratioMin, r.ratioMin), math.Max(ratioMax, r.ratioMax)
		ratioN += r.ratioN
	}
	m[MetricSamplingLogpDiffMean], m[MetricSamplingLogpDiffMax] = math.NaN(), math.NaN()
	if diffN > 0 {
		m[MetricSamplingLogpDiffMean], m[MetricSamplingLogpDiffMax] = diffSum/float64(diffN), diffMax
	}
	m[MetricSamplingISRatioMin], m[MetricSamplingISRatioMean], m[MetricSamplingISRatioMax] = math.NaN(), math.NaN(), math.NaN()
	if ratioN > 0 {
		m[MetricSamplingISRatioMin], m[MetricSamplingISRatioMean], m[MetricSamplingISRatioMax] = ratioMin, ratioSum/float64(ratioN), ratioMax
	}
}

// meanMinMax of x, NaN for each when x is empty.
func meanMinMax(x []float64) (mean, lo, hi float64) {
	if len(x) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	return nanMean(x), slices.Min(x), slices.Max(x)
}

// nanMin is the minimum of the non-NaN values of x, NaN if none.
func nanMin(x []float64) float64 {
	r := math.NaN()
	for _, v := range x {
		if !math.IsNaN(v) && (math.IsNaN(r) || v < r) {
			r = v
		}
	}
	return r
}

// nanMax is the maximum of the non-NaN values of x, NaN if none.
func nanMax(x []float64) float64 {
	r := math.NaN()
	for _, v := range x {
		if !math.IsNaN(v) && (math.IsNaN(r) || v > r) {
			r = v
		}
	}
	return r
}

// nanMean is the mean of the non-NaN values of x (torch.nanmean), NaN if
// there are none. Finite values never overflow it (see nanScale).
func nanMean(x []float64) float64 {
	if s := nanScale(x); s > 0 {
		return s * nanMean(scaled(x, s))
	}
	sum, n := 0.0, 0
	for _, v := range x {
		if !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// nanStd is the Bessel-corrected (N−1) standard deviation of the non-NaN
// values of x (TRL's nanstd), NaN if there are fewer than two. Finite
// values never overflow it (see nanScale) unless the std itself is beyond
// float64 (values near ±1.8e308 of both signs: +Inf).
func nanStd(x []float64) float64 {
	if s := nanScale(x); s > 0 {
		return s * nanStd(scaled(x, s))
	}
	mean := nanMean(x)
	ss, n := 0.0, 0
	for _, v := range x {
		if !math.IsNaN(v) {
			d := v - mean
			ss += d * d
			n++
		}
	}
	if n < 2 {
		return math.NaN()
	}
	return math.Sqrt(ss / float64(n-1))
}

// overflowSafe bounds the magnitudes nanMean and nanStd take as they are:
// below it a sum of 2^40 values and every squared deviation stay finite.
const overflowSafe = 1e140

// nanScale is 0 when every finite value of x is within ±overflowSafe (the
// plain sums are exact as TRL's and cannot overflow); otherwise it is the
// largest magnitude, by which x is divided before summing and the result
// multiplied after: rewards of 1e154 no longer square to +Inf and zero
// every advantage.
func nanScale(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		if a := math.Abs(v); a > s && !math.IsInf(a, 0) {
			s = a
		}
	}
	if s <= overflowSafe {
		return 0
	}
	return s
}

// scaled is x divided by s.
func scaled(x []float64, s float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v / s
	}
	return y
}

// quantileLinear is the q-quantile of x with linear interpolation between
// order statistics (torch.quantile's default). x must not be empty; it is
// not modified.
func quantileLinear(x []float64, q float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	if lo < 0 {
		return s[0]
	}
	return s[lo] + (pos-float64(lo))*(s[lo+1]-s[lo])
}
