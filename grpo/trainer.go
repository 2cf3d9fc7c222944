package grpo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"runtime/debug"
	"slices"
	"time"

	"github.com/x/env"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// Trainer trains a policy model with GRPO against environments. It owns
// the model's training state (adapters or weights, optimizer) and the
// environment pools. A Trainer is used by one goroutine at a time.
type Trainer struct {
	cfg    Config
	layout Layout
	o      options
	chat   *tokenizer.Chat
	pol    *policy
	eng    *engine
	pools  io.Closer   // *env.Pool or *env.Router; nil without environments
	router *env.Router // multi-env routing (for its errors); nil otherwise
	log    *slog.Logger

	envRewards     []string                // env-owned reward columns, after the user's
	envRewardTypes map[reflect.Type]string // env type -> its column

	state      TrainerState
	totalSteps int // optimizer steps the learning-rate schedule spans

	logger  stepLogger           // logging_steps: the callbacks get every LoggingSteps-th step
	watch   watch                // the warnings of each optimizer step (watch.go)
	advance func(step int) error // Train's progress bar, moved every step; nil outside Train
	warn    func(msg string)     // Train's progress output for warnings; nil outside Train or without one
	run     *runSummary          // Train's totals; nil outside Train
	// stepped, if set, runs after every optimizer step (asynchronous
	// training publishes the new policy version to its producer).
	stepped func() error
	// async is the asynchronous run in progress (Train with MaxStaleness
	// > 0); nil otherwise. Its adapter snapshots go into checkpoints.
	async *asyncRun
	// resumed are adapter snapshots a checkpoint of an asynchronous run
	// held, by policy version, until Train takes them; nil otherwise.
	resumed map[int]*model.AdapterSnapshot
	// alwaysAsync makes Train run the producer even at MaxStaleness 0
	// (tests: staleness 0 through the asynchronous path equals the
	// synchronous trainer).
	alwaysAsync bool
}

// TrainerState is where a run stands: what a checkpoint records besides
// the weights and the optimizer. Every random draw derives from
// Config.Seed and these counters, so there is no other RNG state.
type TrainerState struct {
	GlobalStep int `json:"global_step"` // optimizer steps taken
	Generation int `json:"generation"`  // generation batches completed
	DataPos    int `json:"data_position"`
	Epoch      int `json:"epoch"`
	// NumTokens are the prompt and model tokens of the generations
	// completed (TRL's cumulative num_tokens).
	NumTokens int `json:"num_tokens"`
	// Evaluations are the Evaluate calls made (they seed its draws).
	Evaluations int `json:"evaluations"`
}

// StepReport is what one Step did.
type StepReport struct {
	// Rollouts are the generation batch, prompt by prompt, G each. Their
	// Env fields are nil: environments went back to their pools.
	Rollouts []*Rollout
	// Rewards are the weighted rewards (NaN: no score or failed).
	Rewards []float64
	// Scores are each reward function's scores (NaN: no score).
	Scores *RewardTable
	// Advantages are the group-relative advantages (0 outside the loss).
	Advantages []float64
	// Metrics has one entry per optimizer step the generation fed.
	Metrics []Metrics
}

// NewTrainer makes a trainer of policy (a loaded model: its LoRA adapters
// train when it has some or WithLoRA is given, otherwise every weight)
// with tok's Qwen3 chat template. cfg is validated; environments are
// probed (one instance per factory), so a factory that fails or an env
// whose tools are malformed is an error here.
func NewTrainer(policy *model.Model, tok *tokenizer.Tokenizer, cfg Config, opts ...Option) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, errors.New("grpo: nil tokenizer")
	}
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.rollout != nil && (o.factory != nil || o.factories != nil) {
		return nil, errors.New("grpo: WithRolloutFunc generates the rollouts itself: it cannot be combined with WithEnv/WithEnvs")
	}
	if o.rollout != nil && cfg.MaxStaleness > 0 {
		return nil, errAsyncRolloutFunc
	}
	chat, err := tokenizer.NewChat(tok)
	if err != nil {
		return nil, fmt.Errorf("grpo: chat template: %w", err)
	}
	if policy == nil {
		return nil, errors.New("grpo: nil policy model")
	}
	if tok.EOS() < 0 {
		return nil, errors.New("grpo: the tokenizer has no end-of-turn token (<|im_end|>)")
	}
	if err := policy.CheckTokens([]int32{tok.EOS()}); err != nil {
		return nil, fmt.Errorf("grpo: the tokenizer's end-of-turn token does not fit the model's vocabulary: %w", err)
	}
	rp, _ := cfg.rolloutPrecision() // validated
	prec, err := rolloutPrecisioner(policy.Backend, rp)
	if err != nil {
		return nil, err
	}
	if cfg.MaxStaleness > 0 && o.lora == nil && !hasAdapters(policy) {
		return nil, &ConfigError{Field: "MaxStaleness", TRLName: "max_staleness", Problem: fmt.Sprintf("%d with full fine-tuning: asynchronous training samples with a snapshot of the LoRA adapters (full fine-tuning would copy the whole model); use WithLoRA or set MaxStaleness to 0", cfg.MaxStaleness)}
	}
	if cfg.Beta > 0 && o.lora == nil && !hasAdapters(policy) {
		return nil, &ConfigError{Field: "Beta", TRLName: "beta", Problem: fmt.Sprintf("%v with full fine-tuning: the KL reference is the model with its adapters off, so it needs LoRA (WithLoRA); set Beta to 0 or train adapters", cfg.Beta)}
	}

	t := &Trainer{cfg: cfg, layout: cfg.Layout(), o: o, chat: chat, log: o.log, logger: stepLogger{every: cfg.LoggingSteps}}
	t.watch.tools = o.factory != nil || o.factories != nil
	if t.log != nil {
		for _, w := range cfg.Warnings() {
			t.log.Warn("grpo: " + w)
		}
	}
	t.totalSteps = cfg.MaxSteps
	pol, err := newPolicy(policy, o.lora, cfg.Seed, cfg.Temperature, cfg.AdamW(max(t.totalSteps, 1)), cfg.GradientCheckpointing, cfg.MicroBatchTokens)
	if err != nil {
		return nil, err
	}
	pol.prec, pol.rollout = prec, rp
	pol.invariant = cfg.BatchInvariantRollouts
	pol.tr.SetBatchInvariant(cfg.BatchInvariantRollouts) // training's log-probs = sampling's, bit for bit
	t.pol = pol
	if prec != nil && !hasBF16Weights(policy) && t.log != nil {
		t.log.Warn("grpo: rollout_matmul_precision " + cfg.RolloutMatMulPrecision + " changes nothing: the policy has no bf16 weights (full fine-tuning trains float32 masters), yet old log-probs are recomputed as after a RolloutFunc")
	}
	if d, ok := cfg.kvDType(); ok {
		if st := policy.KVStats(); st.DType != d {
			if err := policy.SetKVOptions(model.KVOptions{BlockSize: st.BlockSize, DType: d, MaxBytes: st.MaxBytes}); err != nil {
				t.Close()
				return nil, fmt.Errorf("grpo: KV cache as %s: %w", cfg.KVCacheDType, err)
			}
		}
	}

	ctx := context.Background()
	if cfg.ToolTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.ToolTimeout)
		defer cancel()
	}
	var src envSource
	var pools []*env.Pool
	switch {
	case o.factory != nil:
		p, err := env.NewPool(ctx, o.factory)
		if err != nil {
			t.Close() // the policy's gradients and moments
			return nil, fmt.Errorf("grpo: environment: %w", err)
		}
		t.pools, src, pools = p, p, []*env.Pool{p}
	case o.factories != nil:
		r, err := env.NewRouter(ctx, o.factories)
		if err != nil {
			t.Close() // the policy's gradients and moments
			return nil, fmt.Errorf("grpo: environments: %w", err)
		}
		t.pools, src, t.router = r, r, r
		for _, name := range r.Names() {
			p, _ := r.Pool(name)
			pools = append(pools, p)
		}
	}
	if t.envRewards, t.envRewardTypes, err = probeEnvRewards(ctx, pools); err != nil {
		t.Close()
		return nil, err
	}
	if len(o.rewards) == 0 && len(t.envRewards) == 0 {
		t.Close()
		return nil, errors.New("grpo: no reward source provided: add WithReward, or use an environment that implements env.Rewarder")
	}
	t.eng = &engine{
		pol:     pol,
		chat:    chat,
		envs:    src,
		cfg:     cfg.rolloutConfig(),
		stop:    []int32{tok.EOS()},
		log:     o.log,
		decoder: pol.newDecoder,
	}
	return t, nil
}

// Close closes the environment pools (their envs' sessions) and gives the
// training's backend memory back (the Trainable's pass buffers and
// gradients and the optimizer's moments): the trainer cannot train after
// it. The model, with
// the weights trained so far, is the caller's and stays open.
func (t *Trainer) Close() error {
	if t.pol != nil {
		t.pol.close()
	}
	if t.pools == nil {
		return nil
	}
	err := t.pools.Close()
	t.pools = nil
	return err
}

// Config returns the trainer's configuration.
func (t *Trainer) Config() Config { return t.cfg }

// Model returns the policy model being trained.
func (t *Trainer) Model() *model.Model { return t.pol.m }

// Params returns the trainable tensors (adapters, or every weight), in a
// fixed order, for checkpoints.
func (t *Trainer) Params() []model.Param { return t.pol.params() }

// Optimizer returns the AdamW optimizer.
func (t *Trainer) Optimizer() *model.AdamW { return t.pol.opt }

// LoRAConfig returns the adapters' configuration when the trainer attached
// them with WithLoRA.
func (t *Trainer) LoRAConfig() (model.LoRAConfig, bool) {
	if t.pol.lora == nil {
		return model.LoRAConfig{}, false
	}
	return *t.pol.lora, true
}

// checkpointWeights is what a checkpoint saves and restores of the policy.
func (t *Trainer) checkpointWeights() CheckpointWeights { return t.pol.weights() }

// State returns where the run stands.
func (t *Trainer) State() TrainerState { return t.state }

// SetState moves the run to s, e.g. when resuming from a checkpoint whose
// weights and optimizer were restored.
func (t *Trainer) SetState(s TrainerState) error {
	if s.GlobalStep < 0 || s.Generation < 0 || s.DataPos < 0 || s.Epoch < 0 || s.NumTokens < 0 || s.Evaluations < 0 {
		return fmt.Errorf("grpo: trainer state %+v has a negative counter", s)
	}
	if got := t.pol.opt.Steps(); got != s.GlobalStep {
		return fmt.Errorf("grpo: trainer state at step %d but the optimizer has taken %d steps: restore the optimizer first", s.GlobalStep, got)
	}
	t.state = s
	return nil
}

// Step runs one generation batch: it plays NumGenerations rollouts of
// each row (rows are the batch's distinct prompts, Config.Layout().Prompts
// of them), scores them, computes advantages, and takes the optimizer
// steps the batch feeds (StepsPerGeneration × NumIterations micro-batches,
// one optimizer step per GradientAccumulationSteps). The report has each
// optimizer step's metrics; callbacks get them combined over
// Config.LoggingSteps steps (WindowMetrics) at every LoggingSteps-th step,
// and FlushMetrics sends the rest.
//
// If ctx is cancelled before the generation's first optimizer step,
// Step returns ctx's error and nothing changed (gradients of the
// unfinished step are dropped). Once that step is taken, the generation's
// remaining optimizer steps run whatever ctx says, so the state always
// stands at a generation boundary that a checkpoint can resume from; the
// next Step (or Train's loop) then sees the cancellation.
func (t *Trainer) Step(ctx context.Context, rows []env.Row) (*StepReport, error) {
	if len(rows) != t.layout.Prompts {
		return nil, fmt.Errorf("grpo: Step got %d rows; a generation batch takes %d prompts (GenerationBatchSize %d / NumGenerations %d)",
			len(rows), t.layout.Prompts, t.layout.GenerationBatchSize, t.layout.G)
	}
	if t.totalSteps == 0 && t.cfg.LRSchedule != model.ScheduleConstant {
		return nil, &ConfigError{Field: "MaxSteps", TRLName: "max_steps", Problem: fmt.Sprintf("0 with a %s learning-rate schedule: Step needs the run's length to schedule the rate; set MaxSteps (Train derives it from the dataset) or use a constant schedule", t.cfg.LRSchedule)}
	}
	if t.totalSteps > 0 && t.state.GlobalStep >= t.totalSteps {
		return nil, fmt.Errorf("grpo: Step: the run has taken its %d optimizer steps (MaxSteps, or the length Train derived): a further generation could not be learned from", t.totalSteps)
	}
	begin := time.Now()
	sg, err := t.produce(ctx, rows, t.state.Generation, t.state.GlobalStep, nil, false)
	if err != nil {
		return nil, err
	}
	return t.consume(ctx, sg, begin)
}

// scoredGen is a generation batch played, scored and ready to learn from:
// what Step's generate-and-score half hands its learn half, and what the
// producer of asynchronous training queues for the learner.
type scoredGen struct {
	index   int // the generation's number (TrainerState.Generation when learnt)
	version int // optimizer steps taken by the policy that sampled it
	rs      []*Rollout
	tab     *RewardTable
	adv     Advantages
	gm      Metrics // the generation's metrics but num_tokens and epoch, which the learner adds
	tokens  int     // its prompt and model tokens (num_tokens' increment)
	// old, in asynchronous training, are [rollout][i] the log-probs of the
	// policy that sampled (its adapter snapshot) as the training forward
	// computes them, for the rollouts in the loss (nil for the others);
	// nil in synchronous training.
	old    [][]float32
	pos    Position // the data position after its rows (Train)
	epochs float64  // the fractional epoch after its rows (Train)
}

// produce plays rows (generation index, seeded by it) with the adapters
// of snap (nil: the live ones), scores the rollouts and computes their
// advantages and generation metrics; version is the sampling policy's
// optimizer step count. With scoreOld it also scores the loss rollouts
// with the sampling policy (asynchronous training: old log-probs that do
// not depend on how decoding was batched) and puts sampling/*. The
// environments go back to their pools once scored.
func (t *Trainer) produce(ctx context.Context, rows []env.Row, index, version int, snap *model.AdapterSnapshot, scoreOld bool) (*scoredGen, error) {
	gen, err := t.generate(withAdapters(ctx, snap), rows, t.layout.G, t.sampling(), mix(t.cfg.Seed, uint64(index)))
	if err != nil {
		return nil, fmt.Errorf("grpo: generation %d: %w", index, err)
	}
	defer gen.release()
	// The rollouts' caches are released: give the KV pool's peak back
	// before learning needs the memory for activations. The collection
	// also lowers the heap goal the cache had raised.
	if t.pol.trimKV() > 0 {
		debug.FreeOSMemory()
	}

	t0 := time.Now()
	tab, err := t.score(ctx, gen.rollouts, gen.insts)
	if err != nil {
		return nil, fmt.Errorf("grpo: score generation %d: %w", index, err)
	}
	scoring := time.Since(t0)
	ok, failed := succeeded(gen.rollouts)
	if failed == len(gen.rollouts) {
		return nil, fmt.Errorf("grpo: generation %d: all %d rollouts failed; first cause: %w", index, failed, gen.rollouts[0].Err)
	}
	adv, err := t.advantages(tab, ok)
	if err != nil {
		return nil, fmt.Errorf("grpo: advantages of generation %d: %w", index, err)
	}
	gm, tokens, err := t.generationMetrics(gen, tab, adv, ok)
	if err != nil {
		return nil, err
	}
	gm[MetricTimeGeneration] = gen.timing.generation.Seconds()
	gm[MetricTimeTools] = gen.timing.tools.Seconds()
	gm[MetricTimeScoring] = scoring.Seconds()
	gm[MetricRolloutsFailed] = float64(failed)
	faultMetrics(gm, gen.rollouts)
	for _, r := range gen.rollouts {
		r.PolicyVersion = version
	}
	sg := &scoredGen{index: index, version: version, rs: gen.rollouts, tab: tab, adv: adv, gm: gm, tokens: tokens}
	if scoreOld {
		if err := t.scoreSampling(ctx, sg, snap); err != nil {
			return nil, fmt.Errorf("grpo: generation %d: %w", index, err)
		}
	}
	return sg, nil
}

// consume learns from a scored generation (see learn) and moves the state
// past it; begin is when its first optimizer step's time starts.
func (t *Trainer) consume(ctx context.Context, sg *scoredGen, begin time.Time) (*StepReport, error) {
	gm := sg.gm
	gm[MetricNumTokens] = float64(t.state.NumTokens + sg.tokens)
	gm[MetricEpoch] = float64(t.state.Epoch)
	if t.run != nil && t.run.epoch >= 0 {
		gm[MetricEpoch] = t.run.epoch // fractional, under Train
	}
	ms, err := t.learn(ctx, sg, gm, begin)
	if t.cfg.MaxStaleness == 0 {
		// The next generation's KV cache must not sit on learning's
		// scratch. (An asynchronous producer's cache is live while the
		// learner learns, so there the budget is the sum anyway, and
		// releasing would only cost the next step its allocations.)
		t.pol.releaseScratch()
	}
	rep := &StepReport{Rollouts: sg.rs, Rewards: sg.tab.Total(), Scores: sg.tab, Advantages: sg.adv.A, Metrics: ms}
	for _, r := range sg.rs {
		r.Env = nil
	}
	if err != nil {
		return rep, err
	}
	t.state.Generation++
	t.state.NumTokens += sg.tokens
	return rep, nil
}

// FlushMetrics sends the callbacks the metrics of the optimizer steps
// taken since the last logged one (fewer than Config.LoggingSteps),
// combined as a logged line is (WindowMetrics), as the line of the
// current step. Train does this when it ends or stops; a loop of Steps
// calls it after its last Step. With nothing pending it does nothing.
func (t *Trainer) FlushMetrics() error {
	if err := t.logger.flush(t.state.GlobalStep, t.o.callbacks); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	return nil
}

// checkStep adds the warning metrics of optimizer step's metrics m
// (watch.go) and reports the warnings that are due: to the logger, and
// to the progress output during Train.
func (t *Trainer) checkStep(m Metrics) {
	step := t.state.GlobalStep
	for _, w := range t.watch.Check(step, m) {
		if !t.watch.Due(w.Name, step) {
			continue
		}
		if t.log != nil {
			t.log.Warn("grpo: "+w.Message, "warning", w.Name, "step", step)
		}
		if t.warn != nil {
			t.warn(w.Message)
		}
	}
}

// logStep moves the progress bar and hands optimizer step's metrics m to
// the logging window.
func (t *Trainer) logStep(m Metrics) error {
	if t.run != nil {
		t.run.add(m)
		if t.state.GlobalStep == t.totalSteps {
			t.run.put(m) // the run's last step
		}
	}
	if t.advance != nil {
		if err := t.advance(t.state.GlobalStep); err != nil {
			return fmt.Errorf("grpo: %w", err)
		}
	}
	if err := t.logger.step(t.state.GlobalStep, m, t.o.callbacks); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	return nil
}

// sampling is the training sampling.
func (t *Trainer) sampling() sampling {
	return sampling{Temperature: t.cfg.Temperature, TopK: t.cfg.TopK, TopP: t.cfg.TopP, MinP: t.cfg.MinP}
}

// advantages turns the reward table into group-relative advantages.
func (t *Trainer) advantages(tab *RewardTable, ok []bool) (Advantages, error) {
	if t.cfg.Aggregation == NormalizeThenSum {
		return ComputeAdvantagesGDPO(tab, ok, t.layout.G)
	}
	return ComputeAdvantages(tab.Total(), ok, t.layout.G, t.cfg.ScaleRewards)
}

// batchOut is a generation batch: the rollouts and the environments they
// hold until scored.
type batchOut struct {
	rollouts []*Rollout
	insts    []*env.Instance
	timing   rolloutTiming
}

// release gives the environments back to their pools.
func (b *batchOut) release() {
	for i, inst := range b.insts {
		if inst != nil {
			inst.Release()
			b.insts[i] = nil
		}
	}
}

// generate plays g rollouts of each row, with the rollout function when
// one is set.
func (t *Trainer) generate(ctx context.Context, rows []env.Row, g int, smp sampling, seed uint64) (*batchOut, error) {
	rep := make([]env.Row, 0, len(rows)*g)
	groups := make([]int, 0, len(rows)*g)
	for i, row := range rows {
		if t.router != nil {
			if _, err := t.router.Route(row); err != nil {
				return nil, fmt.Errorf("grpo: row %d: %w", i, err)
			}
		}
		for range g {
			rep = append(rep, maps.Clone(row))
			groups = append(groups, i)
		}
	}
	if t.o.rollout != nil {
		t0 := time.Now()
		rs, err := t.fromRolloutFunc(ctx, rep, groups)
		if err != nil {
			return nil, err
		}
		return &batchOut{rollouts: rs, insts: make([]*env.Instance, len(rs)), timing: rolloutTiming{generation: time.Since(t0)}}, nil
	}
	rs, insts, tm, err := t.eng.play(ctx, rep, groups, smp, seed)
	if err != nil {
		return nil, fmt.Errorf("grpo: rollouts: %w", err)
	}
	return &batchOut{rollouts: rs, insts: insts, timing: tm}, nil
}

// fromRolloutFunc runs the user's rollout function and checks what it
// returned.
func (t *Trainer) fromRolloutFunc(ctx context.Context, rows []env.Row, groups []int) ([]*Rollout, error) {
	gens, err := t.o.rollout(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("grpo: rollout function: %w", err)
	}
	if len(gens) != len(rows) {
		return nil, fmt.Errorf("grpo: rollout function returned %d rollouts for %d rows (each prompt row appears NumGenerations times)", len(gens), len(rows))
	}
	eos := t.eng.stop[0]
	out := make([]*Rollout, len(gens))
	for i, g := range gens {
		switch {
		case len(g.PromptIDs) == 0:
			return nil, fmt.Errorf("grpo: rollout function: rollout %d has no prompt ids", i)
		case len(g.LogProbs) != len(g.CompletionIDs):
			return nil, fmt.Errorf("grpo: rollout function: rollout %d has %d log-probs for %d completion ids", i, len(g.LogProbs), len(g.CompletionIDs))
		case g.Mask != nil && len(g.Mask) != len(g.CompletionIDs):
			return nil, fmt.Errorf("grpo: rollout function: rollout %d has a mask of %d for %d completion ids", i, len(g.Mask), len(g.CompletionIDs))
		case len(g.CompletionIDs) > t.cfg.MaxCompletionLength:
			return nil, fmt.Errorf("grpo: rollout function: rollout %d has %d completion ids, over MaxCompletionLength %d", i, len(g.CompletionIDs), t.cfg.MaxCompletionLength)
		}
		if err := t.pol.m.CheckTokens(g.PromptIDs); err != nil {
			return nil, fmt.Errorf("grpo: rollout function: rollout %d prompt: %w", i, err)
		}
		if err := t.pol.m.CheckTokens(g.CompletionIDs); err != nil {
			return nil, fmt.Errorf("grpo: rollout function: rollout %d completion: %w", i, err)
		}
		mask := g.Mask
		if mask == nil {
			mask = make([]bool, len(g.CompletionIDs))
			for j := range mask {
				mask[j] = true
			}
		}
		r := &Rollout{
			Row: rows[i], Group: groups[i], Attempts: 1,
			PromptIDs:     slices.Clone(g.PromptIDs),
			CompletionIDs: slices.Clone(g.CompletionIDs),
			Mask:          slices.Clone(mask),
			LogProbs:      slices.Clone(g.LogProbs),
			Extra:         g.Extra,
		}
		for j, lp := range r.LogProbs {
			switch {
			case !r.Mask[j]:
				r.LogProbs[j] = 0
			case math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0):
				return nil, fmt.Errorf("grpo: rollout function: rollout %d has log-prob %v at completion token %d (a model token): log-probs must be finite", i, lp, j)
			}
		}
		n := len(r.CompletionIDs)
		r.Truncated = n > 0 && r.CompletionIDs[n-1] != eos && r.CompletionIDs[n-1] != t.chat.Tokenizer().Pad()
		r.Completion = t.messagesOf(r)
		out[i] = r
	}
	return out, nil
}

// messagesOf reads a rollout function's completion as messages: each run
// of model tokens parsed as an assistant turn, each run of other tokens
// decoded as a tool message.
func (t *Trainer) messagesOf(r *Rollout) []tokenizer.Message {
	var msgs []tokenizer.Message
	for i := 0; i < len(r.Mask); {
		j := i
		for j < len(r.Mask) && r.Mask[j] == r.Mask[i] {
			j++
		}
		ids := r.CompletionIDs[i:j]
		if r.Mask[i] {
			m, _ := t.chat.ParseAssistant(ids)
			m.Role = "assistant"
			msgs = append(msgs, m)
		} else {
			msgs = append(msgs, tokenizer.Message{Role: "tool", Content: t.chat.Tokenizer().Decode(ids, true)})
		}
		i = j
	}
	return msgs
}
