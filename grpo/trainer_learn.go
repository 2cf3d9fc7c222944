package grpo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// learnBatch is the part of a generation batch that takes part in the
// loss, aligned: seqs[j] is rollout rows[j].
type learnBatch struct {
	rows []int      // rollout indices
	seqs []trainSeq // prompt + completion, loss mask
	adv  []float64  // [j]
	// policy are [j][i] log-probs of the policy that sampled, as the
	// training forward computes them (the engine's full-distribution
	// log-probs, or a scoring pass after a RolloutFunc or a generation at
	// a reduced rollout precision).
	policy [][]float32
	// sampling are the generator's log-probs when they are not the
	// training forward's (a RolloutFunc's, or the engine's at
	// Config.RolloutMatMulPrecision "bf16"); the IS correction is
	// exp(policy − sampling).
	sampling [][]float32
	old, ref [][]float32 // [j][i]; old nil when on-policy, ref nil when Beta is 0
	correct  bool        // apply Config.ISCorrection
	tokens   int         // Σ mask over the batch (dapo's normaliser)
}

// prepare builds the loss batch of a generation: the rollouts in the loss
// with at least one completion token, their masks (truncated ones emptied
// when configured), and the old and reference log-probs the layout needs.
// Old log-probs are the sampling-time policy's, which the engine records
// as it samples (the full tempered distribution, as training scores it);
// after a RolloutFunc, or an engine that generated at a reduced matmul
// precision, a scoring pass computes them.
func (t *Trainer) prepare(ctx context.Context, rs []*Rollout, adv Advantages) (*learnBatch, error) {
	b := &learnBatch{}
	var masks [][]bool
	var trunc []bool
	// fromFunc: the rollouts' log-probs are not the training forward's.
	fromFunc := t.o.rollout != nil || t.pol.inexactRollouts()
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
		if fromFunc {
			b.sampling = append(b.sampling, r.LogProbs)
		} else {
			b.policy = append(b.policy, r.LogProbs)
		}
	}
	if t.cfg.MaskTruncatedCompletions {
		var err error
		if masks, err = TruncatedMask(masks, trunc); err != nil {
			return nil, err
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
	if len(b.seqs) == 0 {
		return b, nil
	}
	// The correction is for a generator whose numbers differ from
	// training's (TRL: vLLM, whose log-probs are of the raw distribution
	// and, in bf16, of other arithmetic; here a RolloutFunc, or the engine
	// at a bf16 rollout precision). Otherwise the engine's log-probs come
	// from the training kernels at the training temperature: nothing to
	// correct, whatever the filters.
	b.correct = t.cfg.ISCorrection != ISCorrectionNone && fromFunc
	if fromFunc && (b.correct || t.layout.NeedsOldLogProbs()) {
		lp, err := t.pol.logProbs(ctx, b.seqs, true)
		if err != nil {
			return nil, fmt.Errorf("grpo: old log-probs: %w", err)
		}
		b.policy = lp
	}
	if t.layout.NeedsOldLogProbs() {
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
// gm (the generation's metrics) plus the step's loss, clip, KL, entropy,
// sampling, learning-rate and timing figures.
func (t *Trainer) learn(ctx context.Context, rs []*Rollout, adv Advantages, gm Metrics, begin time.Time) ([]Metrics, error) {
	t0 := time.Now()
	b, err := t.prepare(ctx, rs, adv)
	if err != nil {
		return nil, err
	}
	prep := time.Since(t0)
	mbs := t.microBatches(b)
	params := t.cfg.LossParams()
	norm := t.cfg.LossNorm(b.tokens)

	var out []Metrics
	acc := newStepAccumulator(params)
	acc.backward += prep
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
			if err := t.microStep(mctx, b, mb, it, params, norm, acc); err != nil {
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
			m, err := t.optimizerStep(acc, gm, begin)
			if err != nil {
				return out, err
			}
			t.checkStep(m)
			out = append(out, m)
			mctx = context.WithoutCancel(ctx)
			if err := t.logStep(m.Clone()); err != nil {
				return out, err
			}
			acc = newStepAccumulator(params)
			begin = time.Now()
		}
	}
	return out, nil
}

// microStep runs forward, loss and backward over one micro-batch.
func (t *Trainer) microStep(ctx context.Context, b *learnBatch, mb []int, iter int, params LossParams, norm LossNorm, acc *stepAccumulator) error {
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
	if b.correct {
		if in.ISRatio, in.ISRatioPerSequence, err = SamplingISRatio(t.cfg.ISCorrection, t.cfg.ISCorrectionCap, pick(b.policy, mb), pick(b.sampling, mb), in.Mask); err != nil {
			return fmt.Errorf("sampling correction: %w", err)
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
	t0 := time.Now()
	lo, err := t.pol.accumulate(ctx, seqs, params, &in)
	if err != nil {
		return fmt.Errorf("loss and backward: %w", err)
	}
	acc.backward += time.Since(t0)
	acc.loss.Add(in, lo)
	if iter == 0 {
		// sampling/*: the training forward against the log-probs recorded
		// at sampling (the engine's, or the RolloutFunc's).
		ref := b.sampling
		if ref == nil {
			ref = b.policy
		}
		if err := acc.sampling.Add(in.LogP, pick(ref, mb), in.Mask, in.ISRatio, in.ISRatioPerSequence); err != nil {
			return err
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
	sampling *SamplingStats
	backward time.Duration
}

func newStepAccumulator(p LossParams) *stepAccumulator {
	return &stepAccumulator{loss: NewLossStats(p), sampling: NewSamplingStats()}
}

func (a *stepAccumulator) metrics(m Metrics) {
	a.loss.Metrics(m)
	a.sampling.Metrics(m)
}

// generationMetrics are the figures of a generation batch that every
// optimizer step it feeds reports: rewards, advantages' zero-std share,
// completion lengths and tool use (failed rollouts left out), tokens seen
// (the state's count plus this generation's, which it also returns for
// Step to add once the generation is complete).
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
	m[MetricNumTokens] = float64(t.state.NumTokens + tokens)
	m[MetricEpoch] = float64(t.state.Epoch)
	if t.run != nil && t.run.epoch >= 0 {
		m[MetricEpoch] = t.run.epoch // fractional, under Train
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
