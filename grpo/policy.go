package grpo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/x/kernels"
	"github.com/x/model"
)

// This file is the only one that calls model's generation, scoring and
// training API, behind the small functions below, so that a change of that
// API (paged KV cache, batched sampling with both log-probs, per-token loss
// tensors) is made here and nowhere else.

// policy is the model being trained: generation with its current adapters
// (or a snapshot of older ones), teacher-forced scoring and the optimizer.
//
// Ownership: the model and its backend serve one goroutine at a time, so
// every method that runs them (generation, prefill, scoring, the loss
// passes, the optimizer, snapshots, TrimKV) holds lk for its call. In
// synchronous training one goroutine makes every call and lk is never
// contended; in asynchronous training (Config.MaxStaleness) the producer's
// generation and scoring calls and the learner's passes and optimizer
// steps interleave call by call, generation first (modelLock), so what
// overlaps on the CPU is the model's work of one with the other's tool
// calls, environments and reward functions, which run outside lk.
type policy struct {
	lk    *modelLock
	m     *model.Model
	tr    *model.Trainable
	opt   *model.AdamW
	lora  *model.LoRAConfig // nil: full fine-tuning
	temp  float32           // training temperature (the sampling temperature)
	batch int               // most sequences decoded together
	// prec is the backend that generation switches to the rollout
	// precision (Config.RolloutMatMulPrecision); nil: generation leaves
	// the backend's precision alone.
	prec    kernels.MatMulPrecisionSetter
	rollout kernels.MatMulPrecision
	// invariant makes generation batch-invariant
	// (Config.BatchInvariantRollouts, model.BatchOptions.BatchInvariant).
	invariant bool
}

// adaptersKey is the context key of withAdapters.
type adaptersKey struct{}

// withAdapters returns ctx for a generation that samples with the adapters
// of snap (an older policy's, in asynchronous training) instead of the
// live ones. The snapshot travels with the generation's context rather
// than in the policy, so that another generation at the same time (an
// Evaluate from a Callback while the producer plays) samples with its own.
func withAdapters(ctx context.Context, snap *model.AdapterSnapshot) context.Context {
	if snap == nil {
		return ctx
	}
	return context.WithValue(ctx, adaptersKey{}, snap)
}

// adaptersOf is the snapshot withAdapters put in ctx; nil: the live
// adapters.
func adaptersOf(ctx context.Context) *model.AdapterSnapshot {
	s, _ := ctx.Value(adaptersKey{}).(*model.AdapterSnapshot)
	return s
}

// use runs f with the model to itself (lk; gen: as a generation call,
// which goes first), its forwards reading the adapters of snap (nil: the
// live ones).
func (p *policy) use(gen bool, snap *model.AdapterSnapshot, f func() error) error {
	p.lk.lock(gen)
	defer p.lk.unlock(gen)
	if snap != nil {
		p.m.UseAdapters(snap)
		defer p.m.UseAdapters(nil)
	}
	return f()
}

// locked runs f with the model to itself and its live adapters, as a
// learner call.
func (p *policy) locked(f func() error) error { return p.use(false, nil, f) }

// generationCall runs f with the model to itself and its live adapters, as
// a generation call.
func (p *policy) generationCall(f func() error) error { return p.use(true, nil, f) }

// newPolicy prepares m for training: it attaches adapters when lora is set
// and m has none, trains the adapters m carries, and otherwise every weight.
func newPolicy(m *model.Model, lora *model.LoRAConfig, seed uint64, temperature float32, adamw model.AdamWConfig, checkpoint bool, microTokens int) (*policy, error) {
	if m == nil {
		return nil, errors.New("grpo: nil policy model")
	}
	has := hasAdapters(m)
	if lora != nil && !has {
		if err := model.AttachLoRA(m, *lora, seed); err != nil {
			return nil, fmt.Errorf("grpo: attach LoRA: %w", err)
		}
		has = true
	}
	tr, err := model.NewTrainable(m, model.TrainOptions{Full: !has, KeepActivations: !checkpoint, Temperature: temperature, MicroBatchTokens: microTokens})
	if err != nil {
		return nil, fmt.Errorf("grpo: prepare training: %w", err)
	}
	opt, err := model.NewAdamW(m.Backend, tr.Params(), adamw)
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("grpo: optimizer: %w", err)
	}
	p := &policy{lk: newModelLock(), m: m, tr: tr, opt: opt, temp: temperature, batch: 64}
	if has {
		if lora == nil {
			c := adapterConfig(m)
			lora = &c
		}
		p.lora = lora
	}
	return p, nil
}

// close gives the policy's backend memory back: the Trainable's pass
// buffers and gradients (Trainable.Close) and the optimizer's moments
// (AdamW.Release). The model and its trained weights (its imports, which
// the parameters' values are) stay; the policy cannot train again.
// Calling it twice is harmless.
func (p *policy) close() {
	_ = p.locked(func() error {
		p.tr.Close()
		p.opt.Release()
		return nil
	})
}

// releaseScratch gives learning's backend scratch back (the activations
// and their gradients, the logits chunk, the adapters' Bᵀ and lm_head's
// transposed copy: model.Trainable.Release) once a generation's learning
// is done, so the next generation's KV cache does not sit on top of it: a
// step's memory is then the larger of its two phases, not their sum. The
// next learning phase allocates them again (from a device allocator's
// cache, a CPU backend's garbage collector).
// It holds the model lock, as every call on the shared backend does (in
// asynchronous training the producer may be generating).
func (p *policy) releaseScratch() {
	_ = p.locked(func() error { p.tr.Release(); return nil })
}

// adapterConfig describes the adapters a model already carries (e.g. from
// model.LoadAdapter): rank and scaling of the first one, the projections
// and layers that have one. Alpha assumes plain (not rank-stabilised)
// scaling, which gives the same Scaling either way.
func adapterConfig(m *model.Model) model.LoRAConfig {
	var c model.LoRAConfig
	targets := map[string]bool{}
	var layers []int
	for li := range m.Layers {
		has := false
		for _, nl := range m.Layers[li].Linears() {
			a := nl.Linear.LoRA
			if a == nil {
				continue
			}
			if c.R == 0 {
				c.R, c.Alpha = a.R, float64(a.Scaling)*float64(a.R)
			}
			targets[nl.Name[strings.LastIndexByte(nl.Name, '.')+1:]] = true
			has = true
		}
		if has {
			layers = append(layers, li)
		}
	}
	for _, name := range model.LoRATargets() {
		if targets[name] {
			c.Targets = append(c.Targets, name)
		}
	}
	if len(layers) < len(m.Layers) {
		c.Layers = layers
	}
	return c
}

func hasAdapters(m *model.Model) bool {
	for li := range m.Layers {
		for _, nl := range m.Layers[li].Linears() {
			if nl.Linear.LoRA != nil {
				return true
			}
		}
	}
	return false
}

// sampling is how tokens are drawn; Temperature 0 is greedy.
type sampling struct {
	Temperature, TopP, MinP float32
	TopK                    int
}

// seq is one token sequence being generated, with its cache.
type seq struct{ s *model.Sequence }

func newSeq(seed uint64, prompt []int32) seq { return seq{model.NewSequence(seed, prompt...)} }

// fork copies sq and its cache with a new sampling stream.
func (sq seq) fork(seed uint64) seq { return seq{sq.s.Fork(seed)} }

// appendTokens adds tokens (a tool response) to be fed before the next
// sampled token.
func (sq seq) appendTokens(ids []int32) { sq.s.Append(ids...) }

// release gives the cache's blocks back (shared ones stay with the
// sequences still using them).
func (sq seq) release() { sq.s.Release() }

// prefill feeds the sequences' pending tokens into their caches, at the
// rollout precision.
func (p *policy) prefill(ctx context.Context, seqs []seq) error {
	ms := make([]*model.Sequence, len(seqs))
	for i, s := range seqs {
		ms[i] = s.s
	}
	return p.generating(ctx, func() error { return p.m.Prefill(ctx, ms, model.BatchOptions{BatchInvariant: p.invariant}) })
}

// genRequest asks for one turn of a sequence.
type genRequest struct {
	seq       seq
	maxTokens int
	r         *Rollout // the rollout so far (what a Script reads)
}

// turn is one generated assistant turn.
type turn struct {
	ids []int32
	// logprobs are under the full tempered distribution, log_softmax(z/T)
	// (before top-k/top-p/min-p): the training forward's at the policy
	// that sampled.
	logprobs []float32
	stopped  bool  // ended on a stop token
	err      error // the request failed (context length, KV pool full, ...)
}

// turnDecoder generates turns with continuous batching: requests join
// whenever, each step advances every running request, and a request
// leaves as soon as its turn ends. It extends each request's sequence in
// place with the generated tokens. Tests swap in a scripted one.
type turnDecoder interface {
	add(r genRequest) (int, error)
	len() int
	step(ctx context.Context) (map[int]turn, error)
	// close gives the decoder's backend memory back (the batch's scratch);
	// the decoder is not used after it.
	close()
}

// decoder is the model's turnDecoder: each step decodes one token of every
// running request (and feeds the pending tokens of those that joined), at
// the rollout precision.
type decoder struct {
	p    *policy
	b    *model.Batch
	stop []int32
	smp  kernels.SamplingParams
}

func (p *policy) newDecoder(s sampling, stop []int32) turnDecoder {
	return &decoder{
		p:    p,
		b:    p.m.NewBatch(model.BatchOptions{MaxBatch: p.batch, BatchInvariant: p.invariant}),
		stop: stop,
		smp:  kernels.SamplingParams{Temperature: s.Temperature, TopK: s.TopK, TopP: s.TopP, MinP: s.MinP},
	}
}

// add queues a request and returns its id.
func (d *decoder) add(r genRequest) (id int, err error) {
	err = d.p.generationCall(func() (err error) {
		id, err = d.b.Add(model.Request{Seq: r.seq.s, MaxNewTokens: r.maxTokens, Stop: d.stop, Sampling: d.smp})
		return err
	})
	return id, err
}

// len is the number of requests queued or running.
func (d *decoder) len() int { return d.b.Len() }

// close releases the batch's backend buffers (model.Batch.Release).
func (d *decoder) close() { _ = d.p.generationCall(func() error { d.b.Release(); return nil }) }

// step decodes one token of every running request and returns the turns
// that finished, by id.
func (d *decoder) step(ctx context.Context) (map[int]turn, error) {
	var fin []model.Finished
	err := d.p.generating(ctx, func() (err error) {
		fin, err = d.b.Step(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[int]turn, len(fin))
	for _, f := range fin {
		out[f.ID] = turn{ids: f.Tokens, logprobs: f.FullLogProbs, stopped: f.Stopped, err: f.Err}
	}
	return out, nil
}

// trainSeq is one rollout as the trainer scores it: prompt then completion,
// with the loss mask over the completion.
type trainSeq struct {
	ids   []int32 // prompt + completion
	start int     // len(prompt)
	mask  []bool  // [len(ids)-start]
}

func toModel(seqs []trainSeq) []model.TrainSeq {
	out := make([]model.TrainSeq, len(seqs))
	for i, s := range seqs {
		out[i] = model.TrainSeq{IDs: s.ids, Start: s.start, Mask: s.mask}
	}
	return out
}

// logProbs scores seqs without a backward pass: per completion token,
// [seq][i], with the adapters on (the current policy) or off (the KL
// reference of a LoRA run).
func (p *policy) logProbs(ctx context.Context, seqs []trainSeq, adapters bool) ([][]float32, error) {
	return p.logProbsWith(ctx, seqs, adapters, false, nil)
}

// logProbsWith is logProbs as a generation call (gen: the producer's) or
// not, with the adapters of snap (nil: the live ones): the log-probs of
// an older policy as the training forward computes them.
func (p *policy) logProbsWith(ctx context.Context, seqs []trainSeq, adapters, gen bool, snap *model.AdapterSnapshot) (out [][]float32, err error) {
	err = p.use(gen, snap, func() error {
		lp, _, err := p.tr.LogProbs(ctx, toModel(seqs), adapters)
		out = cloneRows(lp)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scores returns the completion tokens' log-probs and entropies under the
// current policy, [seq][i], without a backward pass.
func (p *policy) scores(ctx context.Context, seqs []trainSeq) (logp, entropy [][]float32, err error) {
	err = p.locked(func() error {
		lp, ent, err := p.tr.LogProbs(ctx, toModel(seqs), true)
		logp, entropy = cloneRows(lp), cloneRows(ent)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return logp, entropy, nil
}

// refLogProbs returns the reference policy's log-probs, [seq][i]: the model
// with its adapters off.
func (p *policy) refLogProbs(ctx context.Context, seqs []trainSeq) (out [][]float32, err error) {
	err = p.locked(func() error {
		lp, err := p.tr.RefLogProbs(ctx, toModel(seqs))
		out = cloneRows(lp)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// accumulate evaluates the policy loss of in (whose LogP and Entropy it
// fills) over seqs and adds its gradient to the parameters: the loss runs
// on the backend (model.Loss, kernels' PolicyLoss, whose spec is
// kernels/ref) in one pass.
func (p *policy) accumulate(ctx context.Context, seqs []trainSeq, params kernels.LossParams, in *LossInput) (LossOutput, error) {
	var res model.LossResult
	err := p.locked(func() (err error) {
		res, err = p.tr.Accumulate(ctx, toModel(seqs), modelLoss(params, in))
		return err
	})
	if err != nil {
		return LossOutput{}, err
	}
	in.LogP, in.Entropy = res.LogP, res.Entropy
	return lossOutput(params, in, res), nil
}

// modelLoss maps the trainer's loss inputs one to one onto model.Loss.
func modelLoss(p kernels.LossParams, in *LossInput) model.Loss {
	l := model.Loss{LossParams: p}
	l.SeqAdv = make([]float32, len(in.Adv))
	for i, a := range in.Adv {
		l.SeqAdv[i] = float32(a)
	}
	l.Weight = narrow(in.Weight)
	if in.EntropyWeight != nil {
		l.EntropyWeight = narrow(in.EntropyWeight)
	}
	l.OldLogP, l.RefLogP, l.SamplingLogP = in.Old, in.Ref, in.Sampling
	if in.ISRatio != nil {
		l.ISRatio = make([][]float32, len(in.ISRatio))
		for i, row := range in.ISRatio {
			l.ISRatio[i] = make([]float32, len(row))
			first := true
			for t, r := range row {
				switch {
				case p.Objective == kernels.ObjectiveVESPO && in.ISRatioPerSequence:
					// VESPO adds log ρ to the sequence sum over loss tokens;
					// a sequence ratio counts once: on its first loss token.
					l.ISRatio[i][t] = 1
					if first && in.Mask[i][t] {
						l.ISRatio[i][t], first = float32(r), false
					}
				default:
					l.ISRatio[i][t] = float32(r)
				}
			}
		}
	}
	if in.EntropyMask != nil {
		l.EntropyMask = make([][]float32, len(in.EntropyMask))
		for i, row := range in.EntropyMask {
			l.EntropyMask[i] = make([]float32, len(row))
			for t, keep := range row {
				if keep {
					l.EntropyMask[i][t] = 1
				}
			}
		}
	}
	return l
}

// lossOutput is the backend's result in the trainer's terms: float64
// diagnostics, clip flags split, and vespo's φ one per row (1 for a row
// with no loss token, TRL's rule).
func lossOutput(p kernels.LossParams, in *LossInput, res model.LossResult) LossOutput {
	out := LossOutput{Loss: res.Loss, DLogP: res.DLogP, DEntropy: res.DEntropy, Ratio: widen(res.Ratio),
		ClipLow: flags(res.Clip, kernels.ClipLow), ClipHigh: flags(res.Clip, kernels.ClipHigh)}
	if p.Beta != 0 {
		out.KL = widen(res.KL)
	}
	if p.Objective == kernels.ObjectiveVESPO {
		out.Phi = make([]float64, len(res.Phi))
		for i, row := range res.Phi {
			out.Phi[i] = 1
			for t, v := range row {
				if in.Mask[i][t] {
					out.Phi[i] = float64(v)
					break
				}
			}
		}
	}
	return out
}

func narrow(x [][]float64) [][]float32 {
	out := make([][]float32, len(x))
	for i, row := range x {
		out[i] = make([]float32, len(row))
		for t, v := range row {
			out[i][t] = float32(v)
		}
	}
	return out
}

func widen(x [][]float32) [][]float64 {
	out := make([][]float64, len(x))
	for i, row := range x {
		out[i] = make([]float64, len(row))
		for t, v := range row {
			out[i][t] = float64(v)
		}
	}
	return out
}

func flags(x [][]uint8, f uint8) [][]bool {
	out := make([][]bool, len(x))
	for i, row := range x {
		out[i] = make([]bool, len(row))
		for t, v := range row {
			out[i][t] = v&f != 0
		}
	}
	return out
}

// accumulateNLL adds to the gradients those of the negative
// log-likelihood of seqs' scored tokens, each weighted w (SFT: 1 / the
// scored tokens of the whole optimizer step), and returns the weighted
// NLL and the entropies' sum over the scored tokens.
func (p *policy) accumulateNLL(ctx context.Context, seqs []model.TrainSeq, w float32) (nll, entropy float64, err error) {
	loss := model.SFTLoss(seqs)
	for _, row := range loss.Weight {
		for j := range row {
			row[j] = w
		}
	}
	var res model.LossResult
	err = p.locked(func() (err error) {
		res, err = p.tr.Accumulate(ctx, seqs, loss)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	for _, row := range res.Entropy { // 0 at unscored tokens
		for _, h := range row {
			entropy += float64(h)
		}
	}
	return res.Loss, entropy, nil
}

// step is the optimizer step of GRPO and SFT alike: it applies the
// accumulated gradients (clipped to MaxGradNorm, at the schedule's rate),
// zeroes them and puts the step's figures in m: learning_rate (the rate
// this step used), grad_norm (before clipping), time/optimizer,
// time/backward (backward, the step's forward and backward time) and, on a
// device backend, memory/* (memoryMetrics).
func (p *policy) step(m Metrics, backward time.Duration) error {
	t0 := time.Now()
	var st model.StepStats
	err := p.locked(func() (err error) {
		st, err = p.opt.Step()
		p.tr.ZeroGrad()
		if err == nil {
			memoryMetrics(m, p.m.Backend) // the backend's figures, read while no one else runs it
		}
		return err
	})
	if err != nil {
		return err
	}
	m[MetricLearningRate] = st.LR
	m[MetricGradNorm] = st.GradNorm
	m[MetricTimeOptimizer] = time.Since(t0).Seconds()
	m[MetricTimeBackward] = backward.Seconds()
	return nil
}

// weights is what a checkpoint saves and restores of the policy.
func (p *policy) weights() CheckpointWeights {
	return CheckpointWeights{Model: p.m, Params: p.tr.Params(), LoRA: p.lora, Optimizer: p.opt}
}

// reschedule replaces the optimizer's configuration (the learning-rate
// schedule's length), keeping its moments and step count.
func (p *policy) reschedule(cfg model.AdamWConfig) error {
	return p.locked(func() error { return p.rescheduleLocked(cfg) })
}

func (p *policy) rescheduleLocked(cfg model.AdamWConfig) error {
	opt, err := model.NewAdamW(p.m.Backend, p.tr.Params(), cfg)
	if err != nil {
		return fmt.Errorf("grpo: optimizer: %w", err)
	}
	if p.opt.Steps() > 0 {
		if err := p.moveState(opt); err != nil {
			opt.Release()
			return err
		}
	}
	// The replaced optimizer's moments are backend memory: give them back.
	p.opt.Release()
	p.opt = opt
	return nil
}

// moveState copies p.opt's moments and step count into opt, through a
// temporary state file.
func (p *policy) moveState(opt *model.AdamW) error {
	dir, err := os.MkdirTemp("", "grpo-optimizer-")
	if err != nil {
		return fmt.Errorf("grpo: optimizer: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.safetensors")
	if err := p.opt.SaveState(path); err != nil {
		return fmt.Errorf("grpo: optimizer: %w", err)
	}
	if err := opt.LoadState(path); err != nil {
		return fmt.Errorf("grpo: optimizer: %w", err)
	}
	return nil
}

// zeroGrad drops gradients accumulated by an unfinished step.
func (p *policy) zeroGrad() { _ = p.locked(func() error { p.tr.ZeroGrad(); return nil }) }

// trimKV gives the KV pool's free blocks back (model.TrimKV) and reports
// how many bytes it freed; it follows generation, as a generation call.
func (p *policy) trimKV() (n int64) {
	_ = p.generationCall(func() error { n = p.m.TrimKV(); return nil })
	return n
}

// newSnapshot makes a snapshot of the live adapters.
func (p *policy) newSnapshot() (s *model.AdapterSnapshot, err error) {
	err = p.locked(func() error {
		if s, err = p.m.NewAdapterSnapshot(); err != nil {
			return err
		}
		if err = s.Capture(); err != nil {
			s.Release()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("grpo: snapshot of the adapters: %w", err)
	}
	return s, nil
}

// releaseSnapshot gives a snapshot's memory back.
func (p *policy) releaseSnapshot(s *model.AdapterSnapshot) {
	_ = p.locked(func() error { s.Release(); return nil })
}

// params returns the trainable tensors (for tests and checkpoints).
func (p *policy) params() []model.Param { return p.tr.Params() }

func cloneRows(x [][]float32) [][]float32 {
	out := make([][]float32, len(x))
	for i, r := range x {
		out[i] = append([]float32(nil), r...)
	}
	return out
}
