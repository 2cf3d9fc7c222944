package grpo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/x/kernels"
	"github.com/x/model"
)

// learnBatch is the part of a generation batch that takes part in the
// loss, aligned: seqs[j] is rollout rows[j] (ascending rollout index).
type learnBatch struct {
	rows []int      // rollout indices
	seqs []trainSeq // prompt + completion, loss mask
	adv  []float64  // [j]
	// sampler are [j][i] the log-probs the sampler recorded (Rollout
	// LogProbs): the engine's, or a RolloutFunc's. The off-policy mask
	// compares the current policy's with them.
	sampler [][]float32
	// policy are [j][i] log-probs of the policy that sampled, as the
	// training forward computes them: the sampler's own when the engine
	// sampled with the training kernels, else a scoring pass's (after a
	// RolloutFunc, or a generation at a reduced rollout precision).
	policy [][]float32
	// scored says policy came from a scoring pass before any optimizer
	// step of this generation, so sampling/* are known before learning.
	scored   bool
	old, ref [][]float32 // [j][i]; old nil when on-policy, ref nil when Beta is 0
	// isRatio is the IS correction ρ [j][i] (Config.ISCorrection) when it
	// applies, isPerSeq its mode.
	isRatio  [][]float64
	isPerSeq bool
	tokens   int // Σ mask over the batch (dapo's normaliser)
	width    int // longest completion of the generation (luspo's T)
}

// lossBatch is the start of a generation's loss batch: the rollouts in
// the loss with at least one completion token, their sequences and masks
// (truncated ones emptied when configured), advantages and the sampler's
// log-probs, in rollout order.
func (t *Trainer) lossBatch(rs []*Rollout, adv Advantages) (*learnBatch, [][]bool, error) {
	b := &learnBatch{}
	var masks [][]bool
	var trunc []bool
	for _, r := range rs {
		b.width = max(b.width, len(r.CompletionIDs))
	}
	for i, r := range rs {
		if !adv.Loss[i] || len(r.CompletionIDs) == 0 {
			continue
		}
		ids := make([]int32, 0, len(r.PromptIDs)+len(r.CompletionIDs))
		ids = append(append(ids, r.PromptIDs...), r.CompletionIDs...)
		b.rows = append(b.rows, i)
		b.seqs = append(b.seqs, trainSeq{ids: ids, start: len(r.PromptIDs)})
		masks = append(masks, r.Mask)
		trunc = append(trunc, r.Truncated)
		b.adv = append(b.adv, adv.A[i])
		b.sampler = append(b.sampler, r.LogProbs)
	}
	if t.cfg.MaskTruncatedCompletions {
		var err error
		if masks, err = TruncatedMask(masks, trunc); err != nil {
			return nil, nil, err
		}
	}
	for j := range b.seqs {
		b.seqs[j].mask = append([]bool(nil), masks[j]...)
		for _, m := range masks[j] {
			if m {
				b.tokens++
			}
		}
	}
	return b, masks, nil
}

// isCorrection reports whether Config.ISCorrection applies: to a generator
// whose numbers differ from training's (TRL: vLLM, whose log-probs are of
// the raw distribution and, in bf16, of other arithmetic; here a
// RolloutFunc, or the engine at a bf16 rollout precision). Otherwise the
// engine's log-probs come from the training kernels at the training
// temperature: nothing to correct, whatever the filters.
func (t *Trainer) isCorrection() bool {
	return t.cfg.ISCorrection != ISCorrectionNone && (t.o.rollout != nil || t.pol.inexactRollouts())
}

// samplingStats puts sampling/* into gm: the training forward's log-probs
// of the policy that sampled (policy) against the sampler's, with the IS
// correction in use, rollout by rollout in rollout order.
func (t *Trainer) samplingStats(gm Metrics, b *learnBatch, masks [][]bool) error {
	st := NewSamplingStats()
	if err := st.Add(b.policy, b.sampler, masks, b.isRatio, b.isPerSeq); err != nil {
		return err
	}
	st.Metrics(gm)
	return nil
}

// scoreSampling is asynchronous training's scoring pass, run by the
// producer: the loss rollouts of sg scored with the adapters that sampled
// them (snap; nil: the live ones, which are then the sampling policy's),
// into sg.old, and sampling/* from it into sg.gm. Teacher-forced in
// rollout order, these log-probs are the same whichever rollouts shared a
// decode step, which the decoder's own depend on at the rounding level.
func (t *Trainer) scoreSampling(ctx context.Context, sg *scoredGen, snap *model.AdapterSnapshot) error {
	b, masks, err := t.lossBatch(sg.rs, sg.adv)
	if err != nil || len(b.seqs) == 0 {
		return err
	}
	if b.policy, err = t.pol.logProbsWith(ctx, b.seqs, true, true, snap); err != nil {
		return fmt.Errorf("old log-probs of the sampling policy: %w", err)
	}
	if t.isCorrection() {
		if b.isRatio, b.isPerSeq, err = SamplingISRatio(t.cfg.ISCorrection, t.cfg.ISCorrectionClipMin, t.cfg.ISCorrectionClipMax, b.policy, b.sampler, masks); err != nil {
			return fmt.Errorf("sampling correction: %w", err)
		}
	}
	sg.old = make([][]float32, len(sg.rs))
	for j, i := range b.rows {
		sg.old[i] = b.policy[j]
	}
	return t.samplingStats(sg.gm, b, masks)
}

// prepare builds the loss batch of a generation: the rollouts in the loss
// (lossBatch) and the old and reference log-probs the layout needs. Old
// log-probs are the sampling policy's: in asynchronous training the
// producer's scoring pass with the adapters that sampled (sg.old); else
// those the engine recorded as it sampled (the full tempered
// distribution, as training scores it) or, after a RolloutFunc or an
// engine that generated at a reduced matmul precision, a scoring pass's,
// which then also gives the IS correction and the sampling/* metrics
// (into gm), before the policy moves, as TRL computes them right after
// generation. Old log-probs enter the loss when the policy moves within
// the generation (Layout.NeedsOldLogProbs) or moved since it sampled
// (lag > 0 optimizer steps); otherwise the ratio is exactly 1.
func (t *Trainer) prepare(ctx context.Context, sg *scoredGen, lag int, gm Metrics) (*learnBatch, error) {
	b, masks, err := t.lossBatch(sg.rs, sg.adv)
	if err != nil || len(b.seqs) == 0 {
		return b, err
	}
	correct := t.isCorrection()
	fromFunc := t.o.rollout != nil || t.pol.inexactRollouts()
	switch {
	case sg.old != nil:
		b.policy, b.scored = make([][]float32, len(b.rows)), true
		for j, i := range b.rows {
			b.policy[j] = sg.old[i]
		}
	case !fromFunc:
		b.policy = b.sampler
	case correct || t.layout.NeedsOldLogProbs():
		if b.policy, err = t.pol.logProbs(ctx, b.seqs, true); err != nil {
			return nil, fmt.Errorf("grpo: old log-probs: %w", err)
		}
		b.scored = true
	}
	if correct && b.policy != nil {
		if b.isRatio, b.isPerSeq, err = SamplingISRatio(t.cfg.ISCorrection, t.cfg.ISCorrectionClipMin, t.cfg.ISCorrectionClipMax, b.policy, b.sampler, masks); err != nil {
			return nil, fmt.Errorf("grpo: sampling correction: %w", err)
		}
	}
	if b.scored && sg.old == nil {
		if err := t.samplingStats(gm, b, masks); err != nil {
			return nil, err
		}
	}
	if t.layout.NeedsOldLogProbs() || lag > 0 {
		b.old = b.policy
	}
	if t.cfg.Beta > 0 {
		ref, err := t.pol.refLogProbs(ctx, b.seqs)
		if err != nil {
			return nil, fmt.Errorf("grpo: reference log-probs: %w", err)
		}
		b.ref = ref
	}
	return b, nil
}

// microBatches shuffles the loss batch (seeded by the generation) and cuts
// it into StepsPerGeneration micro-batches of positions into b.seqs.
func (t *Trainer) microBatches(b *learnBatch) [][]int {
	perm := make([]int, len(b.seqs))
	for j := range perm {
		perm[j] = j
	}
	rng := rand.New(rand.NewPCG(t.cfg.Seed, mix(uint64(t.state.Generation), 0x5eed)))
	rng.Shuffle(len(perm), func(a, c int) { perm[a], perm[c] = perm[c], perm[a] })
	spg := t.layout.StepsPerGeneration
	out := make([][]int, spg)
	for k := range spg {
		lo, hi := k*len(perm)/spg, (k+1)*len(perm)/spg
		out[k] = perm[lo:hi]
	}
	return out
}

// learn trains on a scored generation batch: NumIterations passes over
// its StepsPerGeneration micro-batches, an optimizer step every
// GradientAccumulationSteps. A cancelled ctx stops it only before its
// first optimizer step (nothing changed); after that the generation's
// remaining steps run. It returns one Metrics per optimizer step:
// gm (the generation's metrics, sampling/* among them) plus the step's
// loss, clip, KL, entropy, learning-rate and timing figures.
func (t *Trainer) learn(ctx context.Context, sg *scoredGen, gm Metrics, begin time.Time) ([]Metrics, error) {
	t0 := time.Now()
	lag := t.state.GlobalStep - sg.version
	if t.cfg.MaxStaleness > 0 {
		gm[MetricAsyncStalenessMean], gm[MetricAsyncStalenessMax] = float64(lag), float64(lag)
	}
	b, err := t.prepare(ctx, sg, lag, gm)
	if err != nil {
		return nil, err
	}
	prep := time.Since(t0)
	mbs := t.microBatches(b)
	params := t.cfg.LossParams()
	norm := t.cfg.LossNorm(b.tokens, b.width)

	var out []Metrics
	acc := newStepAccumulator(params)
	acc.backward += prep
	// Without a scoring pass the sampling/* metrics compare the sampler's
	// log-probs with the loss forward's of the micro-batches that run
	// before the generation's first optimizer step (the policy has not
	// moved yet), per rollout, reduced in rollout order.
	var samp *SamplingStats
	if !b.scored {
		samp = NewSamplingStats()
	}
	micro := 0
	// Cancellation is honoured only before the generation's first
	// optimizer step: once the weights have moved, the rest of the
	// generation's steps run, so the state always ends at a generation
	// boundary (the generation counter and data position match the
	// weights, and a checkpoint of it resumes bit for bit).
	mctx := ctx
	for it := range t.layout.NumIterations {
		for _, mb := range mbs {
			if err := mctx.Err(); err != nil {
				t.pol.zeroGrad()
				return out, err
			}
			var rec *SamplingStats
			if len(out) == 0 && it == 0 {
				rec = samp
			}
			if err := t.microStep(mctx, b, mb, params, norm, acc, rec); err != nil {
				t.pol.zeroGrad()
				return out, fmt.Errorf("grpo: generation %d, iteration %d: %w", t.state.Generation, it, err)
			}
			micro++
			if micro%t.layout.GradientAccumulationSteps != 0 {
				continue
			}
			if t.totalSteps > 0 && t.state.GlobalStep >= t.totalSteps {
				t.pol.zeroGrad() // the run ends mid-generation (MaxSteps)
				return out, nil
			}
			if len(out) == 0 && samp != nil {
				samp.Metrics(gm)
			}
			m, err := t.optimizerStep(acc, gm, begin)
			if err != nil {
				return out, err
			}
			t.checkStep(m)
			out = append(out, m)
			mctx = context.WithoutCancel(ctx)
			if t.stepped != nil {
				if err := t.stepped(); err != nil {
					return out, err
				}
			}
			if err := t.logStep(m.Clone()); err != nil {
				return out, err
			}
			acc = newStepAccumulator(params)
			begin = time.Now()
		}
	}
	return out, nil
}

// microStep runs forward, loss and backward over one micro-batch; samp,
// if not nil, records the micro-batch's sampling/* figures.
func (t *Trainer) microStep(ctx context.Context, b *learnBatch, mb []int, params kernels.LossParams, norm LossNorm, acc *stepAccumulator, samp *SamplingStats) error {
	if len(mb) == 0 {
		return nil
	}
	seqs := make([]trainSeq, len(mb))
	in := LossInput{Mask: make([][]bool, len(mb)), Adv: make([]float64, len(mb))}
	for k, j := range mb {
		seqs[k] = b.seqs[j]
		in.Mask[k] = b.seqs[j].mask
		in.Adv[k] = b.adv[j]
	}
	any := false
	for _, m := range in.Mask {
		for _, v := range m {
			any = any || v
		}
	}
	if !any {
		return nil // nothing to learn from (all masked): no gradient, no change
	}
	var err error
	if b.old != nil {
		in.Old = pick(b.old, mb) // else on-policy: the ratio is exactly 1, its gradient is not
	}
	if b.ref != nil {
		in.Ref = pick(b.ref, mb)
	}
	if params.OffPolicyMask {
		in.Sampling = pick(b.sampler, mb)
	}
	if b.isRatio != nil {
		in.ISRatio, in.ISRatioPerSequence = make([][]float64, len(mb)), b.isPerSeq
		for k, j := range mb {
			in.ISRatio[k] = b.isRatio[j]
		}
	}
	if t.cfg.TopEntropyQuantile < 1 {
		// The mask needs this micro-batch's entropies before the loss:
		// one scoring pass.
		_, ent, err := t.pol.scores(ctx, seqs)
		if err != nil {
			return fmt.Errorf("entropies: %w", err)
		}
		if in.EntropyMask, err = EntropyMask(ent, in.Mask, t.cfg.TopEntropyQuantile); err != nil {
			return fmt.Errorf("entropy mask: %w", err)
		}
	}
	if in.Weight, err = LossWeights(t.cfg.LossType, norm, in.Mask); err != nil {
		return err
	}
	if params.EntropyCoef != 0 {
		if in.EntropyWeight, err = EntropyWeights(t.cfg.LossType, norm, in.Mask, in.EntropyMask, in.Weight); err != nil {
			return err
		}
	}
	t0 := time.Now()
	lo, err := t.pol.accumulate(ctx, seqs, params, &in)
	if err != nil {
		return fmt.Errorf("loss and backward: %w", err)
	}
	acc.backward += time.Since(t0)
	acc.loss.Add(in, lo)
	if samp != nil {
		for k, j := range mb {
			if err := samp.AddRow(j, in.LogP[k], b.sampler[j], in.Mask[k], nil, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// optimizerStep applies the accumulated gradients and returns the step's
// metrics.
func (t *Trainer) optimizerStep(acc *stepAccumulator, gm Metrics, begin time.Time) (Metrics, error) {
	m := gm.Clone()
	if err := t.pol.step(m, acc.backward); err != nil {
		return nil, fmt.Errorf("grpo: optimizer step %d: %w", t.state.GlobalStep+1, err)
	}
	t.state.GlobalStep++
	acc.metrics(m)
	m[MetricStepTime] = time.Since(begin).Seconds()
	return m, nil
}

func pick(x [][]float32, idx []int) [][]float32 {
	out := make([][]float32, len(idx))
	for k, j := range idx {
		out[k] = x[j]
	}
	return out
}

// stepAccumulator gathers one optimizer step's figures over its
// micro-batches.
type stepAccumulator struct {
	loss     *LossStats
	backward time.Duration
}

func newStepAccumulator(p kernels.LossParams) *stepAccumulator {
	return &stepAccumulator{loss: NewLossStats(p)}
}

func (a *stepAccumulator) metrics(m Metrics) {
	a.loss.Metrics(m)
}

// generationMetrics are the figures of a generation batch that every
// optimizer step it feeds reports: rewards, advantages' zero-std share,
// completion lengths and tool use (failed rollouts left out); it returns
// the generation's tokens too, which consume adds to num_tokens.
func (t *Trainer) generationMetrics(gen *batchOut, tab *RewardTable, adv Advantages, ok []bool) (Metrics, int, error) {
	m := Metrics{}
	tab.Metrics(m, ok)
	m[MetricFracRewardZeroStd] = FracRewardZeroStd(adv)
	if err := rolloutMetrics(m, gen.rollouts, ok); err != nil {
		return nil, 0, err
	}
	tokens := 0
	for i, r := range gen.rollouts {
		if ok[i] {
			tokens += len(r.PromptIDs) + r.ModelTokens()
		}
	}
	return m, tokens, nil
}

// succeeded marks the rollouts that did not fail on every attempt and
// counts those that did.
func succeeded(rs []*Rollout) (ok []bool, failed int) {
	ok = make([]bool, len(rs))
	for i, r := range rs {
		ok[i] = r.Err == nil
		if !ok[i] {
			failed++
		}
	}
	return ok, failed
}

// faultMetrics adds to m what the env faults of a batch cost: the
// replayed episodes and the calls abandoned past their deadline, failed
// rollouts included.
func faultMetrics(m Metrics, rs []*Rollout) {
	replayed, abandoned := 0, 0
	for _, r := range rs {
		replayed += max(r.Attempts-1, 0)
		abandoned += r.Abandoned
	}
	m[MetricRolloutsReplayed] = float64(replayed)
	m[MetricRolloutsAbandoned] = float64(abandoned)
}

// rolloutMetrics adds the completion-length and tool-use figures of the
// rollouts marked ok (failed ones are left out) to m; training and
// evaluation report them alike.
func rolloutMetrics(m Metrics, rs []*Rollout, ok []bool) error {
	var lengths, calls, failures []int
	var clipped []bool
	for i, r := range rs {
		if !ok[i] {
			continue
		}
		lengths = append(lengths, r.ModelTokens())
		clipped = append(clipped, r.Truncated)
		calls = append(calls, r.ToolCalls)
		failures = append(failures, r.ToolFailures)
	}
	if err := CompletionStats(m, lengths, clipped); err != nil {
		return err
	}
	return ToolStats(m, calls, failures)
}
