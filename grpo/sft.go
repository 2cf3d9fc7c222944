package grpo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/x/model"
	"github.com/x/tokenizer"
)

// Conversation is one SFT example in the format of TRL's conversational
// datasets: messages (system, user, assistant with tool calls, tool) and
// the tool schemas the system prompt lists.
type Conversation struct {
	Messages []tokenizer.Message `json:"messages"`
	Tools    []json.RawMessage   `json:"tools,omitempty"`
}

// LoadConversations reads a JSONL file of Conversations, one per line
// ({"messages": [...], "tools": [...]}). A malformed line, or one with no
// messages, is an error naming the file and line.
func LoadConversations(path string) ([]Conversation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load conversations: %w", err)
	}
	defer f.Close()
	return ReadConversations(f, path)
}

// ReadConversations reads JSONL Conversations from r; name (a file name)
// is used in errors, with the line number.
func ReadConversations(r io.Reader, name string) ([]Conversation, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("load conversations %s: %w", name, err)
	}
	var out []Conversation
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var c Conversation
		if err := json.Unmarshal(line, &c); err != nil {
			return nil, fmt.Errorf("load conversations %s:%d: %w", name, i+1, err)
		}
		if len(c.Messages) == 0 {
			return nil, fmt.Errorf("load conversations %s:%d: no messages", name, i+1)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("load conversations %s: no conversations", name)
	}
	return out, nil
}

// SFTConfig configures SFT; names follow TRL's SFTConfig. DefaultSFTConfig
// gives its defaults.
type SFTConfig struct {
	// NumEpochs is passes over the data when MaxSteps is 0
	// (num_train_epochs, 3).
	NumEpochs int `json:"num_train_epochs"`
	// MaxSteps, if > 0, is the number of optimizer steps and overrides
	// NumEpochs.
	MaxSteps int `json:"max_steps"`
	// LearningRate is the peak rate (learning_rate, 2e-5).
	LearningRate float64 `json:"learning_rate"`
	// LRSchedule is the schedule (lr_scheduler_type, "linear").
	LRSchedule model.ScheduleKind `json:"lr_scheduler_type"`
	// WarmupSteps ramps the rate from 0 (warmup_steps, 0); WarmupRatio
	// gives it as a fraction of the run instead. Set one, not both.
	WarmupSteps int     `json:"warmup_steps"`
	WarmupRatio float64 `json:"warmup_ratio"`
	// WeightDecay is AdamW's decoupled weight decay (weight_decay, 0).
	WeightDecay float64 `json:"weight_decay"`
	// MaxGradNorm clips the gradient norm (max_grad_norm, 1); 0 = off.
	MaxGradNorm float64 `json:"max_grad_norm"`
	// BatchSize is conversations per micro-batch
	// (per_device_train_batch_size, 8).
	BatchSize int `json:"per_device_train_batch_size"`
	// GradientAccumulationSteps is micro-batches per optimizer step (1).
	GradientAccumulationSteps int `json:"gradient_accumulation_steps"`
	// MaxLength truncates each tokenized conversation (max_length, 1024);
	// one with no assistant token left is dropped.
	MaxLength int `json:"max_length"`
	// GradientCheckpointing recomputes activations in the backward (True).
	GradientCheckpointing bool `json:"gradient_checkpointing"`
	// EnableThinking is the template's enable_thinking.
	EnableThinking tokenizer.Thinking `json:"enable_thinking"`
	// LoRA, if set, trains adapters of this shape, attached from Seed if
	// the model has none. A model that carries adapters (AttachLoRA,
	// model.LoadAdapter) trains those, whether LoRA is set or not; nil with
	// no adapters trains every weight.
	LoRA *model.LoRAConfig `json:"lora,omitempty"`
	// Seed seeds the data order and adapter initialisation (42).
	Seed uint64 `json:"seed"`

	// OutputDir receives metrics.jsonl, plot.png and checkpoints; "" writes
	// no files.
	OutputDir string `json:"output_dir"`
	// LoggingSteps is TRL's logging_steps (10): the callbacks, the metrics
	// JSONL and the progress bar's figures get one line every LoggingSteps
	// optimizer steps, their metrics combined as GRPO's are
	// (WindowMetrics), plus one for the steps left when the run ends or
	// stops. 1 logs every step; SFTReport.History has every step's.
	LoggingSteps int `json:"logging_steps"`
	// SaveSteps is optimizer steps between checkpoints (0 = never);
	// SaveTotalLimit keeps the newest that many (0 = all).
	SaveSteps      int `json:"save_steps"`
	SaveTotalLimit int `json:"save_total_limit"`
	// ResumeFrom is a checkpoint folder to continue from, or "latest" for
	// the newest under OutputDir.
	ResumeFrom string `json:"resume_from_checkpoint,omitempty"`
	// Progress receives the progress bar (plain lines if not a terminal);
	// nil shows none.
	Progress io.Writer `json:"-"`
}

// DefaultSFTConfig returns TRL's SFTConfig defaults.
func DefaultSFTConfig() SFTConfig {
	return SFTConfig{NumEpochs: 3, LearningRate: 2e-5, LRSchedule: model.ScheduleLinear, MaxGradNorm: 1,
		BatchSize: 8, GradientAccumulationSteps: 1, MaxLength: 1024, GradientCheckpointing: true, Seed: 42, LoggingSteps: 10}
}

// Validate reports every inconsistent setting at once.
func (c SFTConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.MaxSteps < 0 {
		bad("max_steps %d must be >= 0", c.MaxSteps)
	}
	if c.MaxSteps == 0 && c.NumEpochs <= 0 {
		bad("num_train_epochs %d must be > 0 when max_steps is 0", c.NumEpochs)
	}
	if !(c.LearningRate >= 0) || math.IsInf(c.LearningRate, 0) {
		bad("learning_rate %v must be finite and >= 0", c.LearningRate)
	}
	switch c.LRSchedule {
	case "", model.ScheduleConstant, model.ScheduleLinear, model.ScheduleCosine:
	default:
		bad("lr_scheduler_type %q: want constant, linear or cosine", c.LRSchedule)
	}
	if c.WarmupSteps < 0 || !(c.WarmupRatio >= 0 && c.WarmupRatio <= 1) {
		bad("warmup_steps %d / warmup_ratio %v: want >= 0 and a ratio in [0, 1]", c.WarmupSteps, c.WarmupRatio)
	}
	if c.WarmupSteps > 0 && c.WarmupRatio > 0 {
		bad("set warmup_steps or warmup_ratio, not both")
	}
	if !(c.WeightDecay >= 0) || !(c.MaxGradNorm >= 0) {
		bad("weight_decay %v and max_grad_norm %v must be >= 0", c.WeightDecay, c.MaxGradNorm)
	}
	if c.BatchSize <= 0 || c.GradientAccumulationSteps <= 0 {
		bad("per_device_train_batch_size %d and gradient_accumulation_steps %d must be > 0", c.BatchSize, c.GradientAccumulationSteps)
	}
	if c.MaxLength < 2 {
		bad("max_length %d must be >= 2", c.MaxLength)
	}
	if c.LoRA != nil {
		if err := c.LoRA.Validate(); err != nil {
			bad("lora: %w", err)
		}
	}
	if c.LoggingSteps < 1 {
		bad("logging_steps %d must be >= 1", c.LoggingSteps)
	}
	if c.SaveSteps < 0 || c.SaveTotalLimit < 0 {
		bad("save_steps %d and save_total_limit %d must be >= 0", c.SaveSteps, c.SaveTotalLimit)
	}
	if (c.SaveSteps > 0 || c.ResumeFrom == "latest") && c.OutputDir == "" {
		bad("save_steps / resume_from_checkpoint=latest need output_dir")
	}
	if len(errs) > 0 {
		return fmt.Errorf("sft config: %w", errors.Join(errs...))
	}
	return nil
}

// SFTReport is what an SFT run did.
type SFTReport struct {
	Steps   int           // optimizer steps taken in total (resumed ones included)
	History []StepMetrics // metrics of the steps this call ran
	Dropped int           // conversations with no assistant token within MaxLength
}

// sftState is the SFT part of a checkpoint: the step, how many examples
// of the epoch stream have been consumed and how many tokens (num_tokens
// is cumulative over the run, resumed or not).
type sftState struct {
	Step      int `json:"global_step"`
	Position  int `json:"data_position"`
	NumTokens int `json:"num_tokens"`
}

// SFT fine-tunes m on conversations with tool calls, the warm start before
// GRPO: the loss is the mean negative log-likelihood of the assistant's
// tokens only (what the model would generate: its turns up to and
// including <|im_end|>), while system, user and tool tokens are attended to
// but masked. Conversations are rendered with the Qwen3 template's
// training variant (every turn keeps its think block), whose rendering of
// any prefix of a conversation is a prefix of the whole, so the tokens
// trained on are exactly those a rollout would hold.
//
// Each step's metrics (loss, entropy, learning_rate, grad_norm,
// num_tokens, epoch, step_time, time/backward, time/optimizer; on the
// last step HF's train_runtime, train_samples_per_second,
// train_steps_per_second and train_loss) go, every
// LoggingSteps steps and combined over them, to the callbacks,
// OutputDir/metrics.jsonl and the progress bar; checkpoints and
// a plot of the loss go to OutputDir. When ctx is cancelled, a run that
// saves checkpoints saves one of its last complete step before returning
// ctx's error, so ResumeFrom "latest" continues it.
//
// The examples are shuffled from Seed each epoch (the shuffler of GRPO's
// prompts); an optimizer step takes BatchSize × GradientAccumulationSteps
// of them, running on into the next epoch when one ends. The optimizer,
// its schedule and clipping, and the step are GRPO's.
func SFT(ctx context.Context, m *model.Model, tok *tokenizer.Tokenizer, data []Conversation, cfg SFTConfig, callbacks ...Callback) (*SFTReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	chat, err := tokenizer.NewChat(tok)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	seqs, dropped, err := encodeConversations(chat, data, cfg)
	if err != nil {
		return nil, err
	}
	rep := &SFTReport{Dropped: dropped}
	perStep := cfg.BatchSize * cfg.GradientAccumulationSteps
	total := cfg.MaxSteps
	if total == 0 {
		total = cfg.NumEpochs * ((len(seqs) + perStep - 1) / perStep)
	}
	pol, err := newSFTPolicy(m, cfg, total)
	if err != nil {
		return nil, err
	}
	defer pol.close() // the pass buffers and moments are backend memory; the trained weights stay in m
	var st sftState
	if cfg.ResumeFrom != "" {
		dir := cfg.ResumeFrom
		if dir == "latest" {
			if dir, err = LatestCheckpoint(cfg.OutputDir); err != nil {
				return nil, fmt.Errorf("sft: resume: %w", err)
			}
		}
		if _, err := LoadCheckpoint(dir, pol.weights(), &st); err != nil {
			return nil, fmt.Errorf("sft: resume: %w", err)
		}
		if st.Step != pol.opt.Steps() {
			return nil, fmt.Errorf("sft: resume %s: trainer state is at step %d, optimizer at %d", dir, st.Step, pol.opt.Steps())
		}
		if cfg.OutputDir != "" {
			if err := removeCheckpointTemps(cfg.OutputDir); err != nil {
				return nil, fmt.Errorf("sft: resume: %w", err)
			}
		}
	}
	out, err := newRunOutput(cfg.OutputDir, cfg.Progress, total, "sft", st.Step, false)
	if err != nil {
		return nil, err
	}
	defer out.close()
	callbacks = append(out.callbacks(), callbacks...)
	logger := stepLogger{every: cfg.LoggingSteps}
	summary := runSummary{start: time.Now(), samplesPerStep: perStep}

	order := newEpochOrder(len(seqs), cfg.Seed, true)
	for st.Step < total {
		begin := time.Now()
		batch := make([]model.TrainSeq, perStep)
		for i := range batch {
			batch[i] = seqs[order.at(st.Position+i)]
		}
		met, err := sftStep(ctx, pol, batch, cfg.BatchSize)
		if err != nil {
			err = fmt.Errorf("sft step %d: %w", st.Step+1, err)
			if ferr := logger.flush(st.Step, callbacks); ferr != nil { // the steps since the last line
				err = errors.Join(err, fmt.Errorf("sft: %w", ferr))
			}
			if ctx.Err() != nil && cfg.SaveSteps > 0 && st.Step > 0 && st.Step%cfg.SaveSteps != 0 {
				// Cancelled: keep the last complete step, so "latest" resumes it.
				if _, serr := SaveCheckpoint(cfg.OutputDir, st.Step, cfg.SaveTotalLimit, pol.weights(), st, cfg); serr != nil {
					err = errors.Join(err, fmt.Errorf("sft: checkpoint on cancel: %w", serr))
				}
			}
			return rep, err
		}
		st.Step++
		st.Position += perStep
		for _, s := range batch {
			st.NumTokens += len(s.IDs)
		}
		met[MetricNumTokens] = float64(st.NumTokens)
		met[MetricEpoch] = float64(st.Position) / float64(len(seqs))
		met[MetricStepTime] = time.Since(begin).Seconds()
		if summary.add(met); st.Step == total {
			summary.put(met)
		}
		rep.History = append(rep.History, StepMetrics{Step: st.Step, Metrics: met})
		if err := out.advance(st.Step); err != nil {
			return rep, fmt.Errorf("sft: %w", err)
		}
		if err := logger.step(st.Step, met.Clone(), callbacks); err != nil {
			return rep, fmt.Errorf("sft step %d: %w", st.Step, err)
		}
		if cfg.SaveSteps > 0 && (st.Step%cfg.SaveSteps == 0 || st.Step == total) {
			if _, err := SaveCheckpoint(cfg.OutputDir, st.Step, cfg.SaveTotalLimit, pol.weights(), st, cfg); err != nil {
				return rep, fmt.Errorf("sft: %w", err)
			}
		}
		rep.Steps = st.Step
	}
	rep.Steps = st.Step
	if err := logger.flush(st.Step, callbacks); err != nil {
		return rep, fmt.Errorf("sft: %w", err)
	}
	if err := out.finish(); err != nil {
		return rep, fmt.Errorf("sft: %w", err)
	}
	return rep, nil
}

// encodeConversations tokenizes every conversation, dropping those with no
// assistant token within MaxLength.
func encodeConversations(chat *tokenizer.Chat, data []Conversation, cfg SFTConfig) ([]model.TrainSeq, int, error) {
	if len(data) == 0 {
		return nil, 0, errors.New("sft: no conversations")
	}
	seqs := make([]model.TrainSeq, 0, len(data))
	for i, c := range data {
		s, err := EncodeConversation(chat, c, cfg.EnableThinking)
		if err != nil {
			return nil, 0, fmt.Errorf("sft: conversation %d: %w", i, err)
		}
		if len(s.IDs) > cfg.MaxLength {
			s.Mask = s.Mask[:max(0, cfg.MaxLength-s.Start)]
			s.IDs = s.IDs[:cfg.MaxLength]
		}
		if s.Start >= len(s.IDs) || !slices.Contains(s.Mask, true) {
			continue
		}
		seqs = append(seqs, s)
	}
	if len(seqs) == 0 {
		return nil, 0, fmt.Errorf("sft: no conversation has an assistant token within max_length %d", cfg.MaxLength)
	}
	return seqs, len(data) - len(seqs), nil
}

// EncodeConversation renders c with the Qwen3 template's training variant
// (tools in the system prompt, every think block kept) and returns its
// tokens with the assistant's tokens scored: for each assistant turn, the
// tokens after its generation prompt up to and including <|im_end|>, i.e.
// what the model generates in a rollout. Start is the first assistant
// token. It fails if the conversation has no assistant turn, starts with
// one, or renders in a way that is not prefix-preserving.
func EncodeConversation(chat *tokenizer.Chat, c Conversation, thinking tokenizer.Thinking) (model.TrainSeq, error) {
	end, ok := chat.Tokenizer().TokenID("<|im_end|>")
	if !ok {
		return model.TrainSeq{}, errors.New("tokenizer has no <|im_end|>")
	}
	opts := tokenizer.RenderOptions{Tools: c.Tools, EnableThinking: thinking, KeepAllReasoning: true}
	full, err := chat.RenderIDs(c.Messages, opts)
	if err != nil {
		return model.TrainSeq{}, err
	}
	scored := make([]bool, len(full))
	start := -1
	for i, msg := range c.Messages {
		if msg.Role != "assistant" {
			continue
		}
		if i == 0 {
			return model.TrainSeq{}, errors.New("starts with an assistant turn: nothing to condition it on")
		}
		gen := opts
		gen.AddGenerationPrompt = true
		prefix, err := chat.RenderIDs(c.Messages[:i], gen)
		if err != nil {
			return model.TrainSeq{}, err
		}
		turn, err := chat.RenderIDs(c.Messages[:i+1], opts)
		if err != nil {
			return model.TrainSeq{}, err
		}
		if !hasPrefix(turn, prefix) || !hasPrefix(full, turn) {
			return model.TrainSeq{}, fmt.Errorf("message %d: the template's rendering is not prefix-preserving here", i)
		}
		stop := slices.Index(turn[len(prefix):], end)
		if stop < 0 {
			return model.TrainSeq{}, fmt.Errorf("message %d: the assistant turn has no <|im_end|>", i)
		}
		for j := len(prefix); j <= len(prefix)+stop; j++ {
			scored[j] = true
		}
		if start < 0 {
			start = len(prefix)
		}
	}
	if start < 0 {
		return model.TrainSeq{}, errors.New("no assistant turn to learn from")
	}
	return model.TrainSeq{IDs: full, Start: start, Mask: scored[start:]}, nil
}

func hasPrefix(s, prefix []int32) bool {
	return len(s) >= len(prefix) && slices.Equal(s[:len(prefix)], prefix)
}

// newSFTPolicy prepares m for SFT as NewTrainer does for GRPO (the same
// policy, optimizer and schedule): adapters of cfg.LoRA attached from Seed
// when m has none, the adapters m carries (which cfg.LoRA, if set, must
// describe), or every weight.
func newSFTPolicy(m *model.Model, cfg SFTConfig, total int) (*policy, error) {
	if cfg.LoRA != nil && hasAdapters(m) {
		if c := adapterConfig(m); c.R != cfg.LoRA.R || c.Scaling() != cfg.LoRA.Scaling() {
			return nil, fmt.Errorf("sft: the model carries adapters of rank %d, scaling %v; SFTConfig.LoRA says rank %d, scaling %v", c.R, c.Scaling(), cfg.LoRA.R, cfg.LoRA.Scaling())
		}
	}
	opt := cfg.optimizer()
	if warmup := opt.warmup(total); opt.schedule != model.ScheduleConstant && total <= warmup {
		return nil, fmt.Errorf("sft: WarmupSteps %d is not less than the run's %d steps: the %s schedule needs steps after the warm-up to decay in (lower WarmupSteps, use WarmupRatio, or run more steps)", warmup, total, opt.schedule)
	}
	pol, err := newPolicy(m, cfg.LoRA, cfg.Seed, 0, opt.adamW(total), cfg.GradientCheckpointing, 0)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	return pol, nil
}

// optimizer is SFT's AdamW: TRL's betas and ε, the configured rate,
// schedule (linear when unset), warmup, weight decay and clipping.
func (c SFTConfig) optimizer() optimizerConfig {
	kind := c.LRSchedule
	if kind == "" {
		kind = model.ScheduleLinear
	}
	return optimizerConfig{lr: c.LearningRate, schedule: kind, warmupSteps: c.WarmupSteps, warmupRatio: c.WarmupRatio,
		weightDecay: c.WeightDecay, maxGradNorm: c.MaxGradNorm, beta1: 0.9, beta2: 0.999, eps: 1e-8}
}

// sftStep runs one optimizer step over batch in micro-batches of micro
// sequences, minimising the mean NLL over all the step's scored tokens:
// every token weighted 1/(scored tokens of the whole step), so
// accumulation gives the same gradient as one large batch.
func sftStep(ctx context.Context, pol *policy, batch []model.TrainSeq, micro int) (Metrics, error) {
	scored := 0
	for _, s := range batch {
		scored += countTrue(s.Mask)
	}
	w := 1 / float32(scored)
	var nll, ent float64
	t0 := time.Now()
	for lo := 0; lo < len(batch); lo += micro {
		l, h, err := pol.accumulateNLL(ctx, batch[lo:min(lo+micro, len(batch))], w)
		if err != nil {
			pol.zeroGrad()
			return nil, err
		}
		nll += l
		ent += h
	}
	m := Metrics{MetricLoss: nll, MetricEntropy: ent / float64(scored)}
	if err := pol.step(m, time.Since(t0)); err != nil {
		return nil, err
	}
	return m, nil
}
