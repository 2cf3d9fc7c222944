package grpo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
)

// This file is the only one that calls model's generation, scoring and
// training API, behind the small functions below, so that a change of that
// API (paged KV cache, batched sampling with both log-probs, per-token loss
// tensors) is made here and nowhere else.

// policy is the model being trained: generation with its current adapters,
// teacher-forced scoring and the optimizer. It is used by one goroutine at a
// time (the model's backend serves one caller).
type policy struct {
	m     *model.Model
	tr    *model.Trainable
	opt   *model.AdamW
	lora  *model.LoRAConfig // nil: full fine-tuning
	temp  float32           // training temperature (the sampling temperature)
	batch int               // most sequences decoded together
	// prec is the backend that generation switches to the rollout
	// precision (Config.RolloutMatMulPrecision); nil: generation leaves
	// the backend's precision alone.
	prec    matMulPrecisioner
	rollout cpu.MatMulPrecision
}

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
	tr, err := model.NewTrainable(m, model.TrainOptions{Full: !has, Checkpoint: checkpoint, Temperature: temperature, MicroBatchTokens: microTokens})
	if err != nil {
		return nil, fmt.Errorf("grpo: prepare training: %w", err)
	}
	opt, err := model.NewAdamW(m.Backend, tr.Params(), adamw)
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("grpo: optimizer: %w", err)
	}
	p := &policy{m: m, tr: tr, opt: opt, temp: temperature, batch: 64}
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
	p.tr.Close()
	p.opt.Release()
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
	return p.generating(func() error { return p.m.Prefill(ctx, ms, model.BatchOptions{}) })
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
		b:    p.m.NewBatch(model.BatchOptions{MaxBatch: p.batch}),
		stop: stop,
		smp:  kernels.SamplingParams{Temperature: s.Temperature, TopK: s.TopK, TopP: s.TopP, MinP: s.MinP},
	}
}

// add queues a request and returns its id.
func (d *decoder) add(r genRequest) (int, error) {
	return d.b.Add(model.Request{Seq: r.seq.s, MaxNewTokens: r.maxTokens, Stop: d.stop, Sampling: d.smp})
}

// len is the number of requests queued or running.
func (d *decoder) len() int { return d.b.Len() }

// close releases the batch's backend buffers (model.Batch.Release).
func (d *decoder) close() { d.b.Release() }

// step decodes one token of every running request and returns the turns
// that finished, by id.
func (d *decoder) step(ctx context.Context) (map[int]turn, error) {
	var fin []model.Finished
	err := d.p.generating(func() (err error) {
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
	lp, _, err := p.tr.LogProbs(ctx, toModel(seqs), adapters)
	if err != nil {
		return nil, err
	}
	return cloneRows(lp), nil
}

// scores returns the completion tokens' log-probs and entropies under the
// current policy, [seq][i], without a backward pass.
func (p *policy) scores(ctx context.Context, seqs []trainSeq) (logp, entropy [][]float32, err error) {
	lp, ent, err := p.tr.LogProbs(ctx, toModel(seqs), true)
	if err != nil {
		return nil, nil, err
	}
	return cloneRows(lp), cloneRows(ent), nil
}

// refLogProbs returns the reference policy's log-probs, [seq][i]: the model
// with its adapters off.
func (p *policy) refLogProbs(ctx context.Context, seqs []trainSeq) ([][]float32, error) {
	lp, err := p.tr.RefLogProbs(ctx, toModel(seqs))
	if err != nil {
		return nil, err
	}
	return cloneRows(lp), nil
}

// accumulate evaluates the policy loss of in (whose LogP and Entropy it
// fills) over seqs and adds its gradient to the parameters. The loss runs
// on the backend (model.Loss, kernels' PolicyLoss) in one pass; inputs the
// backend op does not take (an entropy mask) go through a forward, the
// reference PolicyLoss and a backward instead.
func (p *policy) accumulate(ctx context.Context, seqs []trainSeq, params LossParams, in *LossInput) (LossOutput, error) {
	if in.EntropyMask != nil {
		return p.accumulateReference(ctx, seqs, params, in)
	}
	res, err := p.tr.Accumulate(ctx, toModel(seqs), modelLoss(params, in))
	if err != nil {
		return LossOutput{}, err
	}
	in.LogP, in.Entropy = res.LogP, res.Entropy
	out := LossOutput{Loss: res.Loss, Ratio: widen(res.Ratio), ClipLow: flags(res.Clip, kernels.ClipLow), ClipHigh: flags(res.Clip, kernels.ClipHigh)}
	if params.Beta != 0 {
		out.KL = widen(res.KL)
	}
	if params.Type == LossVESPO {
		out.Phi = make([]float64, len(res.Phi))
		for i, row := range res.Phi {
			out.Phi[i] = math.NaN()
			for t, v := range row {
				if in.Mask[i][t] {
					out.Phi[i] = float64(v)
					break
				}
			}
		}
	}
	return out, nil
}

// accumulateReference is accumulate through the training forward, the
// table-tested PolicyLoss of loss.go and a backward from its d/dlogp. It
// has no entropy gradient.
func (p *policy) accumulateReference(ctx context.Context, seqs []trainSeq, params LossParams, in *LossInput) (LossOutput, error) {
	if params.EntropyCoef != 0 {
		return LossOutput{}, errors.New("grpo: an entropy mask (TopEntropyQuantile < 1) with an entropy bonus (EntropyCoef) is not supported")
	}
	logp, ent, err := p.tr.Forward(ctx, toModel(seqs))
	if err != nil {
		return LossOutput{}, err
	}
	in.LogP, in.Entropy = cloneRows(logp), cloneRows(ent)
	out, err := PolicyLoss(params, *in)
	if err != nil {
		return LossOutput{}, err
	}
	return out, p.tr.Backward(ctx, out.DLogP)
}

// modelLoss maps the trainer's loss inputs one to one onto model.Loss.
func modelLoss(p LossParams, in *LossInput) model.Loss {
	l := model.Loss{LossParams: kernels.LossParams{
		SequenceRatio: p.Level == ISSequence,
		EpsLow:        float32(p.EpsLow), EpsHigh: float32(p.EpsHigh), Delta: float32(p.Delta),
		SAPOTauPos: float32(p.SAPOTempPos), SAPOTauNeg: float32(p.SAPOTempNeg),
		VESPOKPos: float32(p.VESPOKPos), VESPOLambdaPos: float32(p.VESPOLambdaPos),
		VESPOKNeg: float32(p.VESPOKNeg), VESPOLambdaNeg: float32(p.VESPOLambdaNeg),
		Beta: float32(p.Beta), EntropyCoef: float32(p.EntropyCoef), KLBiasCorrection: p.BiasCorrectionKL,
	}}
	switch p.Type {
	case LossCISPO:
		l.Objective = kernels.ObjectiveCISPO
	case LossSAPO:
		l.Objective = kernels.ObjectiveSAPO
	case LossVESPO:
		l.Objective = kernels.ObjectiveVESPO
	default:
		l.Objective = kernels.ObjectiveClipped
	}
	l.SeqAdv = make([]float32, len(in.Adv))
	for i, a := range in.Adv {
		l.SeqAdv[i] = float32(a)
	}
	l.Weight = make([][]float32, len(in.Weight))
	for i, row := range in.Weight {
		l.Weight[i] = make([]float32, len(row))
		for t, w := range row {
			l.Weight[i][t] = float32(w)
		}
	}
	l.OldLogP, l.RefLogP = in.Old, in.Ref
	if in.ISRatio != nil {
		l.ISRatio = make([][]float32, len(in.ISRatio))
		for i, row := range in.ISRatio {
			l.ISRatio[i] = make([]float32, len(row))
			first := true
			for t, r := range row {
				switch {
				case p.Type == LossVESPO && in.ISRatioPerSequence:
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
	return l
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
	res, err := p.tr.Accumulate(ctx, seqs, loss)
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
	st, err := p.opt.Step()
	p.tr.ZeroGrad()
	if err != nil {
		return err
	}
	m[MetricLearningRate] = st.LR
	m[MetricGradNorm] = st.GradNorm
	m[MetricTimeOptimizer] = time.Since(t0).Seconds()
	m[MetricTimeBackward] = backward.Seconds()
	memoryMetrics(m, p.m.Backend)
	return nil
}

// weights is what a checkpoint saves and restores of the policy.
func (p *policy) weights() CheckpointWeights {
	return CheckpointWeights{Model: p.m, Params: p.tr.Params(), LoRA: p.lora, Optimizer: p.opt}
}

// reschedule replaces the optimizer's configuration (the learning-rate
// schedule's length), keeping its moments and step count.
func (p *policy) reschedule(cfg model.AdamWConfig) error {
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
func (p *policy) zeroGrad() { p.tr.ZeroGrad() }

// params returns the trainable tensors (for tests and checkpoints).
func (p *policy) params() []model.Param { return p.tr.Params() }

func cloneRows(x [][]float32) [][]float32 {
	out := make([][]float32, len(x))
	for i, r := range x {
		out[i] = append([]float32(nil), r...)
	}
	return out
}
