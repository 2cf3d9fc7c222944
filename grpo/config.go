package grpo

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/x/kernels"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// LossType names a policy loss (TRL's loss_type). Each differs in its
// per-token objective and in how token losses are normalised (loss.go).
type LossType string

// The loss types TRL offers.
const (
	// LossDAPO (the default) sums token losses over the micro-batch and
	// divides by the number of loss tokens in the whole generation batch,
	// so every token weighs the same whatever its sequence's length.
	LossDAPO LossType = "dapo"
	// LossGRPO averages each sequence's token losses, then the sequences.
	LossGRPO LossType = "grpo"
	// LossBNPO divides by the number of loss tokens in the micro-batch.
	LossBNPO LossType = "bnpo"
	// LossDrGRPO divides by micro-batch rows × MaxCompletionLength.
	LossDrGRPO LossType = "dr_grpo"
	// LossCISPO clips the importance weight itself (stop-gradient) and
	// multiplies it with A·logp (MiniMax-M1); normalised like dapo.
	LossCISPO LossType = "cispo"
	// LossSAPO replaces the hard clip with a temperature-controlled sigmoid
	// gate; normalised like grpo.
	LossSAPO LossType = "sapo"
	// LossLUSPO is GSPO with each sequence's loss scaled by its length;
	// it needs sequence-level importance sampling.
	LossLUSPO LossType = "luspo"
	// LossVESPO weights A·logp by a gamma-shaped function of the sequence
	// ratio (stop-gradient); normalised like dapo.
	LossVESPO LossType = "vespo"
)

// LossTypes lists every loss type, in TRL's documentation order.
func LossTypes() []LossType {
	return []LossType{LossDAPO, LossGRPO, LossBNPO, LossDrGRPO, LossCISPO, LossSAPO, LossLUSPO, LossVESPO}
}

// Valid reports whether l is a known loss type.
func (l LossType) Valid() bool {
	for _, k := range LossTypes() {
		if l == k {
			return true
		}
	}
	return false
}

// clipped reports whether l uses the PPO-style two-sided clip
// (-min(w·A, clip(w)·A)), to which Delta and the clip metrics apply.
func (l LossType) clipped() bool {
	switch l {
	case LossGRPO, LossBNPO, LossDrGRPO, LossDAPO, LossLUSPO:
		return true
	}
	return false
}

// ISLevel is the granularity of the importance ratio
// (TRL's importance_sampling_level).
type ISLevel string

// Importance-sampling levels.
const (
	// ISToken (the default) gives every token its own ratio exp(logp − old).
	ISToken ISLevel = "token"
	// ISSequence (GSPO) gives each sequence one ratio: exp of the mean
	// log-ratio over its loss tokens.
	ISSequence ISLevel = "sequence"
)

// ScaleRewards says what the group-centred rewards are divided by
// (TRL's scale_rewards).
type ScaleRewards string

// Reward scalings.
const (
	// ScaleGroup (the default; TRL's True) divides by the group's std.
	ScaleGroup ScaleRewards = "group"
	// ScaleBatch divides by the std of the whole generation batch (the mean
	// stays per group).
	ScaleBatch ScaleRewards = "batch"
	// ScaleNone (TRL's False) does not scale (Dr. GRPO).
	ScaleNone ScaleRewards = "none"
)

// Aggregation says how several reward functions combine
// (TRL's multi_objective_aggregation).
type Aggregation string

// Reward aggregations.
const (
	// SumThenNormalize (the default) sums the weighted rewards, then forms
	// group-relative advantages of the sum.
	SumThenNormalize Aggregation = "sum_then_normalize"
	// NormalizeThenSum (GDPO) normalises each function's rewards within its
	// group, sums them with the weights, then normalises the sum over the
	// batch; ScaleRewards is ignored.
	NormalizeThenSum Aggregation = "normalize_then_sum"
)

// ISCorrection is how the ratio between training and sampling log-probs
// corrects the loss when the two differ (TRL's
// vllm_importance_sampling_mode, with "none" for off).
type ISCorrection string

// Sampling-mismatch corrections. ρ = exp(old − sampling), per token or
// summed per sequence; [C_min, C_max] = [ISCorrectionClipMin,
// ISCorrectionClipMax].
const (
	ISCorrectionNone             ISCorrection = "none"              // no correction
	ISCorrectionTokenTruncate    ISCorrection = "token_truncate"    // ρ_t = clamp(ρ_t, C_min, C_max)
	ISCorrectionTokenMask        ISCorrection = "token_mask"        // ρ_t, or 0 outside [C_min, C_max]
	ISCorrectionSequenceTruncate ISCorrection = "sequence_truncate" // ρ_i = clamp(ρ_i, C_min, C_max)
	ISCorrectionSequenceMask     ISCorrection = "sequence_mask"     // ρ_i, or 0 outside [C_min, C_max] (TRL's default)
)

// Unlimited is the MaxToolCallingIterations value for no cap (TRL's None).
const Unlimited = -1

// KV cache storage types, the values of Config.KVCacheDType.
const (
	KVFloat32  = "float32"  // kernels.F32: exact
	KVBFloat16 = "bfloat16" // kernels.BF16: half the memory
)

// kvDType is the KV storage KVCacheDType asks for; ok is false for "" (the
// model's own setting).
func (c Config) kvDType() (d kernels.DType, ok bool) {
	switch c.KVCacheDType {
	case KVFloat32:
		return kernels.F32, true
	case KVBFloat16:
		return kernels.BF16, true
	}
	return 0, false
}

// Config holds the trainer's settings. Field docs give TRL's name and
// default; DefaultConfig sets those defaults, and Validate reports every
// inconsistent setting at once. The JSON form uses TRL's names, so a
// checkpoint's saved config reads like a GRPOConfig.
//
// Batch layout (one process, as TRL lays it out): PerDeviceTrainBatchSize
// completions form a micro-batch; an optimizer step accumulates
// GradientAccumulationSteps micro-batches; one generation produces
// GenerationBatchSize = PerDeviceTrainBatchSize × StepsPerGeneration
// completions, that is GenerationBatchSize / NumGenerations prompts each
// sampled NumGenerations times (rows [g·G, (g+1)·G) are group g), and its
// StepsPerGeneration micro-batches are trained on NumIterations times.
type Config struct {
	// --- generation ---

	// NumGenerations is G, completions sampled per prompt (num_generations,
	// 8); at least 2.
	NumGenerations int `json:"num_generations"`
	// NumGenerationsEval is G for Evaluate (num_generations_eval, None):
	// 0 means NumGenerations.
	NumGenerationsEval int `json:"num_generations_eval"`
	// MaxPromptLength caps the rendered prompt in tokens; a longer prompt is
	// an error naming its row. 0 (the default) means no cap. TRL removed
	// max_prompt_length in 0.26 and asks users to filter the dataset.
	MaxPromptLength int `json:"max_prompt_length"`
	// MaxCompletionLength caps the whole multi-turn completion, model and
	// tool/template tokens together (max_completion_length, 512).
	MaxCompletionLength int `json:"max_completion_length"`
	// MaxToolCallingIterations caps the tool-calling rounds of a rollout
	// (max_tool_calling_iterations, None): Unlimited (-1, the default) for
	// no cap, 0 to never execute tools.
	MaxToolCallingIterations int `json:"max_tool_calling_iterations"`
	// Temperature divides the logits, when sampling and when scoring
	// log-probs (temperature, 1.0); must be > 0 for training.
	Temperature float32 `json:"temperature"`
	// TopP keeps the smallest set of tokens with this cumulative probability
	// (top_p, 1.0 = all).
	TopP float32 `json:"top_p"`
	// TopK keeps the K most likely tokens (top_k, 0 = all).
	TopK int `json:"top_k"`
	// MinP drops tokens below MinP × the top probability (min_p, None = 0).
	MinP float32 `json:"min_p"`
	// EnableThinking is chat_template_kwargs {"enable_thinking": …} (None =
	// tokenizer.ThinkingUnset): ThinkingOff renders an empty think block in
	// every generation prompt and tool suffix.
	EnableThinking tokenizer.Thinking `json:"enable_thinking"`

	// --- optimisation ---

	// LearningRate is the peak rate (learning_rate, 1e-6).
	LearningRate float64 `json:"learning_rate"`
	// LRSchedule is the rate's schedule (lr_scheduler_type, "linear"):
	// constant, linear, cosine or warmup_stable_decay.
	LRSchedule model.ScheduleKind `json:"lr_scheduler_type"`
	// DecaySteps is warmup_stable_decay's decay: the rate stays at its
	// peak until the last DecaySteps optimizer steps, then falls along a
	// cosine to 0 (transformers' lr_scheduler_kwargs num_decay_steps).
	// Only that schedule reads it.
	DecaySteps int `json:"num_decay_steps"`
	// WarmupSteps ramps the rate from 0 over this many optimizer steps
	// (warmup_steps, 0). Set it or WarmupRatio, not both.
	WarmupSteps int `json:"warmup_steps"`
	// WarmupRatio is the warmup as a fraction of the run's optimizer steps,
	// rounded up (warmup_ratio, 0).
	WarmupRatio float64 `json:"warmup_ratio"`
	// WeightDecay is AdamW's decoupled weight decay (weight_decay, 0).
	WeightDecay float64 `json:"weight_decay"`
	// AdamBeta1 is AdamW's β1 (adam_beta1, 0.9).
	AdamBeta1 float64 `json:"adam_beta1"`
	// AdamBeta2 is AdamW's β2 (adam_beta2, 0.999).
	AdamBeta2 float64 `json:"adam_beta2"`
	// AdamEpsilon is AdamW's ε (adam_epsilon, 1e-8).
	AdamEpsilon float64 `json:"adam_epsilon"`
	// MaxGradNorm clips the global gradient norm before each step
	// (max_grad_norm, 1.0); 0 turns clipping off.
	MaxGradNorm float64 `json:"max_grad_norm"`
	// GradientCheckpointing recomputes each layer's activations in the
	// backward instead of keeping them (gradient_checkpointing, True).
	GradientCheckpointing bool `json:"gradient_checkpointing"`
	// MicroBatchTokens bounds the tokens (prompt and completion) whose
	// activations one training pass holds: a micro-batch's forward and
	// backward (and the scoring passes) run in groups of whole completions
	// of at most this many tokens, whose gradients add up, so activation
	// memory stays that of one group however long the completions or large
	// the micro-batch (Go trainer's own, 8192: the default micro-batch of 8
	// completions at 1,024 tokens in one pass, longer ones in groups; 0: the
	// whole micro-batch at once). A completion longer than it runs alone.
	MicroBatchTokens int `json:"micro_batch_tokens"`
	// KVCacheDType is how the rollouts' KV cache is stored: KVFloat32
	// (exact), KVBFloat16 (half the memory: 114,688 instead of 229,376
	// bytes per token at Qwen3-0.6B, so 64 rollouts × 1,024 tokens take
	// 7 GiB instead of 14; sampling log-probs then differ from training's
	// by the rounding of K and V, see model.KVOptions), or "" to keep the
	// model's own pool setting (model.SetKVOptions; float32 unless set).
	// The default is "": exact sampling log-probs, reused as the old
	// policy's when NumIterations > 1, and the setting a user made on the
	// model wins; set KVBFloat16 for large shapes. The trainer gives the
	// pool's memory back after each generation either way (model.TrimKV),
	// so the cache's peak does not last into learning.
	KVCacheDType string `json:"kv_cache_dtype"`
	// RolloutMatMulPrecision is the matmul precision of generation: the
	// prompts' prefills and every decode step of rollouts, in Step and in
	// Evaluate alike (evaluation is generation) (Go trainer's own,
	// RolloutExact). RolloutExact ("exact"; "" means the same) leaves the
	// backend as it is. RolloutBF16 ("bf16") runs them at
	// kernels.MatMulBF16 (activations rounded to bf16 for bf16 weights,
	// llama.cpp's arithmetic, faster on AVX512_BF16 CPUs) and puts the
	// backend's previous precision back right after each prefill and
	// step, so the training passes (old and reference log-probs, the loss
	// forward and backward) run at the backend's own setting,
	// kernels.MatMulExact unless the caller changed it: the split verl and TRL
	// make when vLLM samples in bf16 and the trainer scores in fp32. The
	// model's backend must then implement kernels.MatMulPrecisionSetter
	// and accept kernels.MatMulBF16 (kernels/cpu's Backend does; NewTrainer
	// refuses one that does not). Only bf16 weights are affected: with full
	// fine-tuning the trained weights are float32 masters and "bf16"
	// changes nothing (NewTrainer warns), so it is for LoRA on a bf16
	// model. The sampling log-probs then come from other numbers than
	// training's, so they are treated as a RolloutFunc's: a scoring pass
	// recomputes the old log-probs when the layout needs them
	// (Layout.NeedsOldLogProbs) or ISCorrection is on, and ISCorrection
	// corrects for the difference (sampling/* reports its size).
	RolloutMatMulPrecision string `json:"rollout_matmul_precision"`
	// BatchInvariantRollouts makes generation batch-invariant (Go
	// trainer's own; true by default; model.BatchOptions.BatchInvariant):
	// every prefill and decode step runs with the backend's
	// batch-invariant MatMul (cpu.Backend.SetBatchInvariant) and prompts
	// and tool responses are cut into chunks at fixed positions, so a
	// sequence's logits, sampled tokens and sampling log-probs do not
	// depend on which other sequences share its steps. In a multi-turn
	// batch those are the rollouts not waiting on a tool, which depends on
	// tool timing: without it two identical runs log sampling/* figures
	// that differ in the 8th digit (and could, rarely, sample another
	// token). Its cost is at batch 1 (a 3-row matmul in place of matVec:
	// decode about 1.5x slower on the tiny model) and in prefills of 112
	// rows and more (no packing); from 3 to 111 rows MatMul computes as it
	// does anyway (BENCHMARKS.md, issue 23). A backend without the mode
	// (not kernels/cpu) gets the chunking only. Where the backend's
	// attention is batch-invariant too (kernels.AttentionInvariant: the
	// GPU, kernels/cpu off AVX-512) the training passes compute as the
	// decode steps do (kernels/cpu: model.Trainable.SetBatchInvariant; the
	// GPU's kernels need no mode), so the sampled log-probs are the
	// trained ones bit for bit (sampling/sampling_logp_difference/max 0),
	// at a cost to the CPU training step (BENCHMARKS.md, issue 19).
	BatchInvariantRollouts bool `json:"batch_invariant_rollouts"`

	// --- batch layout (see the type's doc) ---

	// PerDeviceTrainBatchSize is the completions per micro-batch
	// (per_device_train_batch_size, 8).
	PerDeviceTrainBatchSize int `json:"per_device_train_batch_size"`
	// GradientAccumulationSteps is micro-batches per optimizer step
	// (gradient_accumulation_steps, 1).
	GradientAccumulationSteps int `json:"gradient_accumulation_steps"`
	// StepsPerGeneration is micro-batches per generation
	// (steps_per_generation, None): 0 means GradientAccumulationSteps, or
	// GenerationBatchSize / PerDeviceTrainBatchSize when that is set. Set it
	// or GenerationBatchSize, not both.
	StepsPerGeneration int `json:"steps_per_generation"`
	// GenerationBatchSize is completions per generation
	// (generation_batch_size, None): 0 means PerDeviceTrainBatchSize ×
	// StepsPerGeneration.
	GenerationBatchSize int `json:"generation_batch_size"`
	// NumIterations is μ, the passes over each generation batch
	// (num_iterations, 1).
	NumIterations int `json:"num_iterations"`
	// NumEpochs is passes over the dataset when MaxSteps is 0
	// (num_train_epochs, 3; whole epochs only here).
	NumEpochs int `json:"num_train_epochs"`
	// MaxSteps, if > 0, is the run's length in optimizer steps and
	// overrides NumEpochs (max_steps, -1 = off; 0 here). Training without a
	// dataset needs it.
	MaxSteps int `json:"max_steps"`
	// ShuffleDataset shuffles the rows each epoch from Seed
	// (shuffle_dataset, True).
	ShuffleDataset bool `json:"shuffle_dataset"`
	// Seed seeds the data order, sampling and adapter initialisation
	// (seed, 42).
	Seed uint64 `json:"seed"`

	// --- rewards and advantages ---

	// ScaleRewards is the advantage's divisor (scale_rewards, "group").
	ScaleRewards ScaleRewards `json:"scale_rewards"`
	// Aggregation combines several reward functions
	// (multi_objective_aggregation, "sum_then_normalize").
	Aggregation Aggregation `json:"multi_objective_aggregation"`
	// Reward weights (reward_weights, None = all 1) are given with each
	// function: WithReward(name, weight, fn). Env-owned rewards weigh 1.

	// --- loss ---

	// LossType is the policy loss (loss_type, "dapo").
	LossType LossType `json:"loss_type"`
	// ImportanceSamplingLevel is token or sequence (GSPO)
	// (importance_sampling_level, "token"). Every loss type takes either,
	// as TRL's _compute_loss computes them (Warnings repeats TRL's advice
	// where a combination is unusual).
	ImportanceSamplingLevel ISLevel `json:"importance_sampling_level"`
	// Beta weighs the k3 KL to the reference policy (the model with its
	// adapters off; no second copy) (beta, 0.0 = no reference pass).
	Beta float64 `json:"beta"`
	// Epsilon is the lower clip ε_low: ratios below 1−ε_low are clipped
	// (epsilon, 0.2).
	Epsilon float64 `json:"epsilon"`
	// EpsilonHigh is the upper clip: ratios above 1+ε_high are clipped
	// (epsilon_high, None). 0 means Epsilon. For cispo it is the absolute
	// cap on the ratio, not 1+ε: TRL's default then caps it at Epsilon
	// (0.2); ScaleRL recommends 5.
	EpsilonHigh float64 `json:"epsilon_high"`
	// Delta caps the unclipped ratio (two-sided GRPO, INTELLECT-2)
	// (delta, None). 0 means off; TRL recommends a value above
	// 1+EpsilonHigh. It acts on the clipped loss types only (grpo, bnpo,
	// dr_grpo, dapo, luspo).
	Delta float64 `json:"delta"`
	// MaskTruncatedCompletions gives no loss to completions cut off by the
	// token budget (mask_truncated_completions, False).
	MaskTruncatedCompletions bool `json:"mask_truncated_completions"`
	// EntropyCoef subtracts coef × the mean entropy of loss tokens (those
	// the entropy mask keeps, with TopEntropyQuantile < 1) from the loss
	// (entropy_coef, 0.0), whatever LossType's normalisation, as TRL does:
	// a micro-batch's mean over GradientAccumulationSteps for most types,
	// the generation batch's tokens for dapo, cispo and vespo
	// (EntropyWeights).
	EntropyCoef float64 `json:"entropy_coef"`
	// TopEntropyQuantile keeps in the policy loss (and the entropy bonus)
	// only tokens whose entropy is at least the (1−ρ) quantile of the
	// micro-batch's loss-token entropies (top_entropy_quantile, 1.0 = all).
	TopEntropyQuantile float64 `json:"top_entropy_quantile"`
	// UseBiasCorrectionKL multiplies the KL term by the importance ratio
	// (use_bias_correction_kl, False).
	UseBiasCorrectionKL bool `json:"use_bias_correction_kl"`
	// SAPOTemperaturePos is sapo's gate temperature for A > 0
	// (sapo_temperature_pos, 1.0).
	SAPOTemperaturePos float64 `json:"sapo_temperature_pos"`
	// SAPOTemperatureNeg is sapo's gate temperature for A ≤ 0
	// (sapo_temperature_neg, 1.05).
	SAPOTemperatureNeg float64 `json:"sapo_temperature_neg"`
	// VESPOKPos is vespo's gamma shape k for A ≥ 0 (vespo_k_pos, 2.0).
	VESPOKPos float64 `json:"vespo_k_pos"`
	// VESPOLambdaPos is vespo's gamma rate λ for A ≥ 0 (vespo_lambda_pos, 3.0).
	VESPOLambdaPos float64 `json:"vespo_lambda_pos"`
	// VESPOKNeg is vespo's gamma shape k for A < 0 (vespo_k_neg, 3.0).
	VESPOKNeg float64 `json:"vespo_k_neg"`
	// VESPOLambdaNeg is vespo's gamma rate λ for A < 0 (vespo_lambda_neg, 2.0).
	VESPOLambdaNeg float64 `json:"vespo_lambda_neg"`
	// OffPolicyMaskThreshold turns on DeepSeek-V3.2's off-policy sequence
	// mask (off_policy_mask_threshold, None = nil): a sequence with a
	// negative advantage whose mean over its loss tokens of sampling −
	// current log-prob exceeds it gets no policy loss. The sampling
	// log-probs are the sampler's (the engine's, a RolloutFunc's), so the
	// mask sees both the policy's drift since sampling and any
	// training–inference mismatch, as TRL's does with vLLM. TRL suggests
	// 0.5.
	OffPolicyMaskThreshold *float64 `json:"off_policy_mask_threshold"`
	// ISCorrection corrects for sampling log-probs that differ from
	// training's (vllm_importance_sampling_mode, "sequence_mask"; TRL applies
	// it only with vLLM). It acts only when old log-probs are recomputed by
	// a training forward; when sampling and training agree the ratio is 1.
	ISCorrection ISCorrection `json:"vllm_importance_sampling_mode"`
	// ISCorrectionClipMax is C_max for ISCorrection
	// (vllm_importance_sampling_clip_max, 3.0); 0 is TRL's None (no upper
	// bound).
	ISCorrectionClipMax float64 `json:"vllm_importance_sampling_clip_max"`
	// ISCorrectionClipMin is C_min for ISCorrection
	// (vllm_importance_sampling_clip_min, None = 0: no lower bound).
	// Truncate modes raise a smaller ratio to it, mask modes drop it.
	ISCorrectionClipMin float64 `json:"vllm_importance_sampling_clip_min"`

	// --- asynchronous training ---

	// MaxStaleness turns on asynchronous GRPO in Train (TRL's
	// AsyncGRPOTrainer max_staleness; verl's fully-async staleness,
	// prime-rl's max_async_level) when > 0: a producer plays and scores
	// the next generations while the learner trains on the current one,
	// each generation sampled with the policy of exactly MaxStaleness
	// optimizer steps before the learner starts on it (or the first
	// policy, early in a run), so that the policy that starts learning
	// from a generation is at most MaxStaleness steps ahead of the one
	// that sampled it (async/staleness/*). That is TRL's bound when a
	// generation feeds one optimizer step; one learnt over several
	// (Layout().OptimizerSteps() > 1) trains its later micro-batches up to
	// that many − 1 steps further on, as the synchronous trainer does.
	// 0 (the default) trains synchronously. It needs LoRA adapters (the older policy is a
	// snapshot of them) and the trainer's own rollouts (no RolloutFunc).
	// TRL's default is 4; a value of Layout().OptimizerSteps() samples
	// each generation while the previous one trains.
	MaxStaleness int `json:"max_staleness"`

	// --- rollouts (Go trainer) ---

	// ToolConcurrency bounds the tool calls running at once across
	// rollouts (16).
	ToolConcurrency int `json:"tool_concurrency"`
	// ToolTimeout is the deadline of each env reset and tool call (30s); 0
	// means none. A call past it is an env failure (the env's state is
	// unknown, a remote session may be lost): the rollout is played again
	// from the start on a fresh env, within RolloutAttempts and
	// RolloutRetryBudget. A call that ignores its context is abandoned at
	// the deadline (ErrAbandoned): left to finish on its own, its env
	// discarded when it does.
	ToolTimeout time.Duration `json:"tool_timeout"`
	// RolloutAttempts is how many times a rollout whose env failed is played
	// from the start on a fresh env (3, the first included). Tries that
	// cannot reach the env (env.ErrUnavailable: its server is down or
	// restarting) are not attempts: they go on until RolloutRetryBudget
	// (with 1, nothing is tried again).
	RolloutAttempts int `json:"rollout_attempts"`
	// RolloutRetryBudget bounds how long a rollout keeps retrying after its
	// env first failed (60s): no retry starts later than that. Retries wait
	// an exponential backoff with jitter (0.25 s doubling to 8 s), so the
	// default rides out an env server restart of 30 s, and a server that
	// stays down fails the rollout (and, when every rollout fails, the
	// step) about a minute after it went. 0 means no limit: an unreachable
	// env is then retried for ever.
	RolloutRetryBudget time.Duration `json:"rollout_retry_budget"`
	// RewardTimeout is the deadline of each reward function call and env
	// reward (60s); 0 means none. A reward past it, or one that panics,
	// fails its rollout (left out of the loss, logged and counted in
	// rollouts/failed); a call that ignores its context is abandoned
	// (ErrAbandoned) and the rollout's env discarded when it returns.
	RewardTimeout time.Duration `json:"reward_timeout"`

	// --- output ---

	// OutputDir receives checkpoints, the metrics JSONL, completions and
	// the plot (output_dir). "" (the default) writes no files.
	OutputDir string `json:"output_dir"`
	// LoggingSteps is TRL's logging_steps (10): the callbacks, the metrics
	// JSONL and the progress bar's figures get one line every LoggingSteps
	// optimizer steps, the steps' metrics combined by WindowMetrics (means;
	// the last num_tokens, epoch and learning_rate; minima and maxima of
	// min/max metrics), plus one for the steps left when Train ends or
	// stops. Logged steps are multiples of LoggingSteps, so a resumed
	// run's first line covers the steps from the resume to the next
	// multiple. 1 logs every step. StepReport.Metrics has every step's.
	LoggingSteps int `json:"logging_steps"`
	// SaveSteps is optimizer steps between checkpoints (save_steps, 500);
	// 0 means never. Checkpoints need OutputDir.
	SaveSteps int `json:"save_steps"`
	// SaveTotalLimit keeps only the newest this many checkpoints
	// (save_total_limit, None = 0 = keep all).
	SaveTotalLimit int `json:"save_total_limit"`
	// LogCompletions writes each step's completions to OutputDir
	// (log_completions, False).
	LogCompletions bool `json:"log_completions"`
}

// DefaultConfig returns TRL's GRPOConfig defaults (§5 of the spec) and the
// Go trainer's own.
func DefaultConfig() Config {
	return Config{
		NumGenerations:           8,
		MaxCompletionLength:      512,
		MaxToolCallingIterations: Unlimited,
		Temperature:              1,
		TopP:                     1,

		LearningRate:           1e-6,
		LRSchedule:             model.ScheduleLinear,
		AdamBeta1:              0.9,
		AdamBeta2:              0.999,
		AdamEpsilon:            1e-8,
		MaxGradNorm:            1,
		GradientCheckpointing:  true,
		MicroBatchTokens:       8192,
		RolloutMatMulPrecision: RolloutExact,
		BatchInvariantRollouts: true,

		PerDeviceTrainBatchSize:   8,
		GradientAccumulationSteps: 1,
		NumIterations:             1,
		NumEpochs:                 3,
		ShuffleDataset:            true,
		Seed:                      42,

		ScaleRewards: ScaleGroup,
		Aggregation:  SumThenNormalize,

		LossType:                LossDAPO,
		ImportanceSamplingLevel: ISToken,
		Epsilon:                 0.2,
		TopEntropyQuantile:      1,
		SAPOTemperaturePos:      1,
		SAPOTemperatureNeg:      1.05,
		VESPOKPos:               2,
		VESPOLambdaPos:          3,
		VESPOKNeg:               3,
		VESPOLambdaNeg:          2,
		ISCorrection:            ISCorrectionSequenceMask,
		ISCorrectionClipMax:     3,

		ToolConcurrency:    16,
		ToolTimeout:        30 * time.Second,
		RolloutAttempts:    3,
		RolloutRetryBudget: 60 * time.Second,
		RewardTimeout:      60 * time.Second,

		LoggingSteps: 10,
		SaveSteps:    500,
	}
}

// ConfigError is one invalid Config setting: the Go field, TRL's name for
// it, and what is wrong with what to change.
type ConfigError struct {
	Field   string // Go field name, e.g. "EpsilonHigh"
	TRLName string // e.g. "epsilon_high"; "" for fields TRL lacks
	Problem string // what is wrong and what to change
}

// Error implements error.
func (e *ConfigError) Error() string {
	if e.TRLName == "" {
		return fmt.Sprintf("grpo: config %s: %s", e.Field, e.Problem)
	}
	return fmt.Sprintf("grpo: config %s (%s): %s", e.Field, e.TRLName, e.Problem)
}

// EpsilonHighOrDefault is the upper clip in effect: EpsilonHigh, or Epsilon
// when EpsilonHigh is 0 (TRL's None).
func (c Config) EpsilonHighOrDefault() float64 {
	if c.EpsilonHigh == 0 {
		return c.Epsilon
	}
	return c.EpsilonHigh
}

// Layout is the batch layout a Config implies, with the defaults resolved.
type Layout struct {
	G                         int // completions per prompt (NumGenerations)
	MicroBatch                int // completions per micro-batch (PerDeviceTrainBatchSize)
	GradientAccumulationSteps int // micro-batches per optimizer step
	StepsPerGeneration        int // micro-batches per generation (per pass)
	GenerationBatchSize       int // completions per generation
	Prompts                   int // unique prompts per generation = GenerationBatchSize / G
	NumIterations             int // passes over each generation batch (μ)
}

// OptimizerSteps is the number of optimizer steps one generation feeds:
// StepsPerGeneration × NumIterations / GradientAccumulationSteps (Validate
// requires it to be whole).
func (l Layout) OptimizerSteps() int {
	return l.StepsPerGeneration * l.NumIterations / max(1, l.GradientAccumulationSteps)
}

// NeedsOldLogProbs reports whether the policy moves between sampling and
// training on a generation's data, so that old log-probs must come from
// the policy as it was at sampling time rather than be the current ones
// under a stop-gradient. TRL: gradient_accumulation_steps %
// (steps_per_generation × num_iterations) != 0.
func (l Layout) NeedsOldLogProbs() bool {
	passes := l.StepsPerGeneration * l.NumIterations
	return passes > 0 && l.GradientAccumulationSteps%passes != 0
}

// Layout resolves the batch layout (StepsPerGeneration and
// GenerationBatchSize defaults). Call Validate first; an invalid Config
// gives a layout with zero or inconsistent fields.
func (c Config) Layout() Layout {
	l := Layout{
		G:                         c.NumGenerations,
		MicroBatch:                c.PerDeviceTrainBatchSize,
		GradientAccumulationSteps: c.GradientAccumulationSteps,
		StepsPerGeneration:        c.StepsPerGeneration,
		GenerationBatchSize:       c.GenerationBatchSize,
		NumIterations:             c.NumIterations,
	}
	switch {
	case l.GenerationBatchSize == 0 && l.StepsPerGeneration == 0:
		l.StepsPerGeneration = l.GradientAccumulationSteps
		l.GenerationBatchSize = l.MicroBatch * l.StepsPerGeneration
	case l.StepsPerGeneration == 0 && l.MicroBatch > 0:
		l.StepsPerGeneration = l.GenerationBatchSize / l.MicroBatch
	case l.GenerationBatchSize == 0:
		l.GenerationBatchSize = l.MicroBatch * l.StepsPerGeneration
	}
	if l.G > 0 {
		l.Prompts = l.GenerationBatchSize / l.G
	}
	return l
}

// Sampling is the generation's sampling parameters.
func (c Config) Sampling() kernels.SamplingParams {
	return kernels.SamplingParams{Temperature: c.Temperature, TopK: c.TopK, TopP: c.TopP, MinP: c.MinP}
}

// RenderOptions are the chat-template options of every rendering the
// trainer and SFT do: the given tool schemas, an open assistant turn,
// EnableThinking, and the prefix-preserving training variant of the
// template (every assistant turn keeps its think block), so that the
// tokens SFT trains on are the tokens rollouts produce.
func (c Config) RenderOptions(tools []json.RawMessage) tokenizer.RenderOptions {
	return tokenizer.RenderOptions{Tools: tools, AddGenerationPrompt: true, EnableThinking: c.EnableThinking, KeepAllReasoning: true}
}

// Warmup is the warmup in optimizer steps for a run of totalSteps:
// WarmupSteps, or ⌈WarmupRatio × totalSteps⌉ as transformers rounds it
// but at most totalSteps − 1 (a 1-step run warms up for 0 steps).
func (c Config) Warmup(totalSteps int) int { return c.optimizer().warmup(totalSteps) }

// AdamW is the optimizer configuration for a run of totalSteps optimizer
// steps: AdamW with this Config's betas, ε, weight decay, clipping and
// learning-rate schedule.
func (c Config) AdamW(totalSteps int) model.AdamWConfig { return c.optimizer().adamW(totalSteps) }

func (c Config) optimizer() optimizerConfig {
	return optimizerConfig{lr: c.LearningRate, schedule: c.LRSchedule, warmupSteps: c.WarmupSteps, warmupRatio: c.WarmupRatio, decaySteps: c.DecaySteps,
		weightDecay: c.WeightDecay, maxGradNorm: c.MaxGradNorm, beta1: c.AdamBeta1, beta2: c.AdamBeta2, eps: c.AdamEpsilon}
}

// Warnings lists settings that are valid but probably not meant, each
// a sentence to log, where TRL warns likewise or recommends otherwise:
// sequence-level importance sampling with a loss type that sums tokens
// (bnpo, dr_grpo, dapo, cispo) weights each sequence by its completion
// length; luspo at token level and vespo at sequence level depart from
// their papers; delta at or below 1+epsilon_high cuts ratios inside the
// clip range, and delta with a loss type that has no clip does nothing;
// epsilon_high below epsilon narrows the upper clip.
func (c Config) Warnings() []string {
	var w []string
	if c.ImportanceSamplingLevel == ISSequence {
		switch c.LossType {
		case LossBNPO, LossDrGRPO, LossDAPO, LossCISPO:
			w = append(w, fmt.Sprintf("grpo: importance_sampling_level=sequence with loss_type=%s weights each sequence by its completion length "+
				"(the sequence ratio multiplies every token of a token-summed loss); loss_type=grpo averages per sequence instead", c.LossType))
		case LossVESPO:
			w = append(w, "grpo: vespo computes sequence-level importance weights itself; importance_sampling_level should be token (the default)")
		}
	}
	if c.LossType == LossLUSPO && c.ImportanceSamplingLevel != ISSequence {
		w = append(w, "grpo: loss_type=luspo with importance_sampling_level=token: set it to sequence to mirror the LUSPO paper's setup")
	}
	if c.Delta != 0 {
		switch {
		case !c.LossType.clipped():
			w = append(w, fmt.Sprintf("grpo: delta %v has no effect with loss_type=%s (it caps the clipped surrogate of grpo, bnpo, dr_grpo, dapo and luspo)", c.Delta, c.LossType))
		case c.Delta <= 1+c.EpsilonHighOrDefault():
			w = append(w, fmt.Sprintf("grpo: delta %v is not above 1+epsilon_high = %v: it caps ratios inside the clip range (TRL recommends delta > 1+ε)", c.Delta, 1+c.EpsilonHighOrDefault()))
		}
	}
	if c.LossType.clipped() && c.EpsilonHigh != 0 && c.EpsilonHigh < c.Epsilon {
		w = append(w, fmt.Sprintf("grpo: epsilon_high %v is below epsilon %v: the upper clip is narrower than the lower one (DAPO suggests 0.28)", c.EpsilonHigh, c.Epsilon))
	}
	return w
}

// Validate reports every invalid or inconsistent setting at once, joined
// (errors.Join); each is a *ConfigError naming the field and what to
// change. It returns nil for a usable Config.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, trl, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, TRLName: trl, Problem: fmt.Sprintf(format, args...)})
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

	// generation
	if c.NumGenerations < 2 {
		bad("NumGenerations", "num_generations", "%d: GRPO needs at least 2 completions per prompt to form a group baseline; set it to 2 or more", c.NumGenerations)
	}
	if c.NumGenerationsEval < 0 {
		bad("NumGenerationsEval", "num_generations_eval", "%d: must be ≥ 0 (0 uses NumGenerations)", c.NumGenerationsEval)
	}
	if c.MaxPromptLength < 0 {
		bad("MaxPromptLength", "max_prompt_length", "%d: must be ≥ 0 (0 = no cap)", c.MaxPromptLength)
	}
	if c.MaxCompletionLength < 1 {
		bad("MaxCompletionLength", "max_completion_length", "%d: must be ≥ 1", c.MaxCompletionLength)
	}
	if c.MaxToolCallingIterations < Unlimited {
		bad("MaxToolCallingIterations", "max_tool_calling_iterations", "%d: must be ≥ 0, or Unlimited (-1)", c.MaxToolCallingIterations)
	}
	if t := float64(c.Temperature); !finite(t) || t <= 0 {
		bad("Temperature", "temperature", "%v: training needs a temperature > 0 (greedy sampling gives G identical completions, and log-probs divide by it); greedy evaluation is an Evaluate option", c.Temperature)
	}
	if p := float64(c.TopP); !(p > 0 && p <= 1) {
		bad("TopP", "top_p", "%v: must be in (0, 1] (1 keeps every token)", c.TopP)
	}
	if c.TopK < 0 {
		bad("TopK", "top_k", "%d: must be ≥ 0 (0 keeps every token)", c.TopK)
	}
	if p := float64(c.MinP); !(p >= 0 && p <= 1) {
		bad("MinP", "min_p", "%v: must be in [0, 1] (0 = off)", c.MinP)
	}
	switch c.EnableThinking {
	case tokenizer.ThinkingUnset, tokenizer.ThinkingOn, tokenizer.ThinkingOff:
	default:
		bad("EnableThinking", "chat_template_kwargs", "%d: use tokenizer.ThinkingUnset, ThinkingOn or ThinkingOff", c.EnableThinking)
	}

	// optimisation
	if !finite(c.LearningRate) || c.LearningRate < 0 {
		bad("LearningRate", "learning_rate", "%v: must be finite and ≥ 0", c.LearningRate)
	}
	switch c.LRSchedule {
	case model.ScheduleConstant, model.ScheduleLinear, model.ScheduleCosine:
	case model.ScheduleWSD:
		if c.DecaySteps < 1 {
			bad("DecaySteps", "num_decay_steps", "%d with lr_scheduler_type %s: want at least 1 step of decay", c.DecaySteps, c.LRSchedule)
		}
	default:
		bad("LRSchedule", "lr_scheduler_type", "%q: use %q, %q, %q or %q", c.LRSchedule, model.ScheduleConstant, model.ScheduleLinear, model.ScheduleCosine, model.ScheduleWSD)
	}
	if c.WarmupSteps < 0 {
		bad("WarmupSteps", "warmup_steps", "%d: must be ≥ 0", c.WarmupSteps)
	}
	if !(c.WarmupRatio >= 0 && c.WarmupRatio < 1) {
		bad("WarmupRatio", "warmup_ratio", "%v: must be in [0, 1)", c.WarmupRatio)
	}
	if c.WarmupSteps > 0 && c.WarmupRatio > 0 {
		bad("WarmupRatio", "warmup_ratio", "%v set together with WarmupSteps %d: set only one", c.WarmupRatio, c.WarmupSteps)
	}
	if !finite(c.WeightDecay) || c.WeightDecay < 0 {
		bad("WeightDecay", "weight_decay", "%v: must be finite and ≥ 0", c.WeightDecay)
	}
	if !(c.AdamBeta1 >= 0 && c.AdamBeta1 < 1) {
		bad("AdamBeta1", "adam_beta1", "%v: must be in [0, 1)", c.AdamBeta1)
	}
	if !(c.AdamBeta2 >= 0 && c.AdamBeta2 < 1) {
		bad("AdamBeta2", "adam_beta2", "%v: must be in [0, 1)", c.AdamBeta2)
	}
	if !finite(c.AdamEpsilon) || c.AdamEpsilon <= 0 {
		bad("AdamEpsilon", "adam_epsilon", "%v: must be finite and > 0", c.AdamEpsilon)
	}
	if !finite(c.MaxGradNorm) || c.MaxGradNorm < 0 {
		bad("MaxGradNorm", "max_grad_norm", "%v: must be finite and ≥ 0 (0 = no clipping)", c.MaxGradNorm)
	}

	if c.MicroBatchTokens < 0 {
		bad("MicroBatchTokens", "micro_batch_tokens", "%d: must be ≥ 0 (0 = the whole micro-batch in one pass)", c.MicroBatchTokens)
	}
	if c.KVCacheDType != "" && c.KVCacheDType != KVFloat32 && c.KVCacheDType != KVBFloat16 {
		bad("KVCacheDType", "kv_cache_dtype", "%q: want %q, %q or \"\" (the model's own setting)", c.KVCacheDType, KVFloat32, KVBFloat16)
	}
	if _, err := c.rolloutPrecision(); err != nil {
		bad("RolloutMatMulPrecision", "rollout_matmul_precision", "%q: want %q or %q (\"\" means %q)", c.RolloutMatMulPrecision, RolloutExact, RolloutBF16, RolloutExact)
	}

	// batch layout
	layoutOK := true
	if c.PerDeviceTrainBatchSize < 1 {
		bad("PerDeviceTrainBatchSize", "per_device_train_batch_size", "%d: must be ≥ 1", c.PerDeviceTrainBatchSize)
		layoutOK = false
	}
	if c.GradientAccumulationSteps < 1 {
		bad("GradientAccumulationSteps", "gradient_accumulation_steps", "%d: must be ≥ 1", c.GradientAccumulationSteps)
		layoutOK = false
	}
	if c.NumIterations < 1 {
		bad("NumIterations", "num_iterations", "%d: must be ≥ 1", c.NumIterations)
		layoutOK = false
	}
	if c.StepsPerGeneration < 0 {
		bad("StepsPerGeneration", "steps_per_generation", "%d: must be ≥ 0 (0 = GradientAccumulationSteps)", c.StepsPerGeneration)
		layoutOK = false
	}
	if c.GenerationBatchSize < 0 {
		bad("GenerationBatchSize", "generation_batch_size", "%d: must be ≥ 0 (0 = derived)", c.GenerationBatchSize)
		layoutOK = false
	}
	if c.StepsPerGeneration > 0 && c.GenerationBatchSize > 0 {
		bad("GenerationBatchSize", "generation_batch_size", "%d set together with StepsPerGeneration %d: set only one (the other is derived)", c.GenerationBatchSize, c.StepsPerGeneration)
		layoutOK = false
	}
	if layoutOK {
		l := c.Layout()
		if c.GenerationBatchSize > 0 && c.GenerationBatchSize%c.PerDeviceTrainBatchSize != 0 {
			bad("GenerationBatchSize", "generation_batch_size", "%d is not a multiple of PerDeviceTrainBatchSize %d: make it one", c.GenerationBatchSize, c.PerDeviceTrainBatchSize)
		} else if c.NumGenerations >= 2 && l.GenerationBatchSize%c.NumGenerations != 0 {
			bad("GenerationBatchSize", "generation_batch_size", "%d (= PerDeviceTrainBatchSize %d × StepsPerGeneration %d) is not a multiple of NumGenerations %d: a generation must hold whole groups; change one of them",
				l.GenerationBatchSize, l.MicroBatch, l.StepsPerGeneration, c.NumGenerations)
		}
		if l.StepsPerGeneration > 0 && (l.StepsPerGeneration*l.NumIterations)%l.GradientAccumulationSteps != 0 {
			bad("GradientAccumulationSteps", "gradient_accumulation_steps", "%d does not divide StepsPerGeneration %d × NumIterations %d: an optimizer step would span two generations; make the product a multiple of it",
				l.GradientAccumulationSteps, l.StepsPerGeneration, l.NumIterations)
		}
	}
	if c.NumEpochs < 0 {
		bad("NumEpochs", "num_train_epochs", "%d: must be ≥ 0", c.NumEpochs)
	}
	if c.MaxSteps < 0 {
		bad("MaxSteps", "max_steps", "%d: must be ≥ 0 (0 = run NumEpochs)", c.MaxSteps)
	}
	if c.MaxSteps == 0 && c.NumEpochs == 0 {
		bad("MaxSteps", "max_steps", "0 with NumEpochs 0: the run would have no steps; set either")
	}

	// rewards and advantages
	switch c.ScaleRewards {
	case ScaleGroup, ScaleBatch, ScaleNone:
	default:
		bad("ScaleRewards", "scale_rewards", "%q: use %q, %q or %q", c.ScaleRewards, ScaleGroup, ScaleBatch, ScaleNone)
	}
	switch c.Aggregation {
	case SumThenNormalize, NormalizeThenSum:
	default:
		bad("Aggregation", "multi_objective_aggregation", "%q: use %q or %q", c.Aggregation, SumThenNormalize, NormalizeThenSum)
	}

	// loss: TRL's GRPOConfig rejects none of these settings but the two IS
	// clip checks; the others only keep values finite and signs sane.
	if !c.LossType.Valid() {
		bad("LossType", "loss_type", "%q: use one of %v", c.LossType, LossTypes())
	}
	switch c.ImportanceSamplingLevel {
	case ISToken, ISSequence:
	default:
		bad("ImportanceSamplingLevel", "importance_sampling_level", "%q: Unknown importance sampling level; possible values are %q and %q", c.ImportanceSamplingLevel, ISToken, ISSequence)
	}
	if !finite(c.Beta) || c.Beta < 0 {
		bad("Beta", "beta", "%v: must be finite and ≥ 0 (0 = no KL term)", c.Beta)
	}
	if !finite(c.Epsilon) || c.Epsilon < 0 {
		bad("Epsilon", "epsilon", "%v: must be finite and ≥ 0 (the lower clip is 1−ε)", c.Epsilon)
	}
	if !finite(c.EpsilonHigh) || c.EpsilonHigh < 0 {
		bad("EpsilonHigh", "epsilon_high", "%v: must be finite and ≥ 0 (0 = Epsilon)", c.EpsilonHigh)
	}
	if !finite(c.Delta) || c.Delta < 0 {
		bad("Delta", "delta", "%v: must be finite and ≥ 0 (0 = off)", c.Delta)
	}
	if !finite(c.EntropyCoef) {
		bad("EntropyCoef", "entropy_coef", "%v: must be finite", c.EntropyCoef)
	}
	if !(c.TopEntropyQuantile >= 0 && c.TopEntropyQuantile <= 1) {
		bad("TopEntropyQuantile", "top_entropy_quantile", "%v: must be in [0, 1] (1 keeps every token)", c.TopEntropyQuantile)
	}
	if c.LossType == LossSAPO {
		if !finite(c.SAPOTemperaturePos) || c.SAPOTemperaturePos <= 0 {
			bad("SAPOTemperaturePos", "sapo_temperature_pos", "%v: must be finite and > 0", c.SAPOTemperaturePos)
		}
		if !finite(c.SAPOTemperatureNeg) || c.SAPOTemperatureNeg <= 0 {
			bad("SAPOTemperatureNeg", "sapo_temperature_neg", "%v: must be finite and > 0", c.SAPOTemperatureNeg)
		}
	}
	if c.LossType == LossVESPO {
		// Any finite k and λ: φ = e^λ·w^k·e^{−λw} is defined for every k
		// (k = 0 weighs by e^{λ(1−w)}), and λ is raised to 1e-4, as TRL
		// takes them.
		for _, f := range []struct {
			field, trl string
			v          float64
		}{
			{"VESPOKPos", "vespo_k_pos", c.VESPOKPos}, {"VESPOLambdaPos", "vespo_lambda_pos", c.VESPOLambdaPos},
			{"VESPOKNeg", "vespo_k_neg", c.VESPOKNeg}, {"VESPOLambdaNeg", "vespo_lambda_neg", c.VESPOLambdaNeg},
		} {
			if !finite(f.v) {
				bad(f.field, f.trl, "%v: must be finite", f.v)
			}
		}
	}
	if th := c.OffPolicyMaskThreshold; th != nil && !finite(*th) {
		bad("OffPolicyMaskThreshold", "off_policy_mask_threshold", "%v: must be finite (nil = off)", *th)
	}
	switch c.ISCorrection {
	case ISCorrectionNone:
	case ISCorrectionTokenTruncate, ISCorrectionTokenMask, ISCorrectionSequenceTruncate, ISCorrectionSequenceMask:
		lo, hi := c.ISCorrectionClipMin, c.ISCorrectionClipMax
		switch {
		case !finite(hi) || hi < 0:
			bad("ISCorrectionClipMax", "vllm_importance_sampling_clip_max", "%v: must be finite and ≥ 0 (0 = None, no upper bound; TRL uses 3)", hi)
		case !finite(lo) || lo < 0:
			bad("ISCorrectionClipMin", "vllm_importance_sampling_clip_min", "%v: must be finite and ≥ 0 (0 = None, no lower bound)", lo)
		case lo > 0 && hi > 0 && lo >= hi:
			bad("ISCorrectionClipMin", "vllm_importance_sampling_clip_min", "vllm_importance_sampling_clip_min (%v) must be less than vllm_importance_sampling_clip_max (%v)", lo, hi)
		case lo == 0 && hi == 0 && (c.ISCorrection == ISCorrectionTokenTruncate || c.ISCorrection == ISCorrectionSequenceTruncate):
			bad("ISCorrectionClipMax", "vllm_importance_sampling_clip_max", "At least one of `vllm_importance_sampling_clip_min` or `vllm_importance_sampling_clip_max` must be set when `vllm_importance_sampling_mode` is a `*_truncate` mode (%q)", c.ISCorrection)
		}
	default:
		bad("ISCorrection", "vllm_importance_sampling_mode", "%q: use %q, %q, %q, %q or %q", c.ISCorrection,
			ISCorrectionNone, ISCorrectionTokenTruncate, ISCorrectionTokenMask, ISCorrectionSequenceTruncate, ISCorrectionSequenceMask)
	}

	if c.MaxStaleness < 0 {
		bad("MaxStaleness", "max_staleness", "%d: must be ≥ 0 (0 = synchronous)", c.MaxStaleness)
	}

	// rollouts
	if c.ToolConcurrency < 1 {
		bad("ToolConcurrency", "", "%d: must be ≥ 1", c.ToolConcurrency)
	}
	if c.ToolTimeout < 0 {
		bad("ToolTimeout", "", "%v: must be ≥ 0 (0 = no deadline)", c.ToolTimeout)
	}
	if c.RolloutAttempts < 1 {
		bad("RolloutAttempts", "", "%d: must be ≥ 1 (1 = no replay)", c.RolloutAttempts)
	}
	if c.RolloutRetryBudget < 0 {
		bad("RolloutRetryBudget", "", "%v: must be ≥ 0 (0 = no limit)", c.RolloutRetryBudget)
	}
	if c.RewardTimeout < 0 {
		bad("RewardTimeout", "", "%v: must be ≥ 0 (0 = no deadline)", c.RewardTimeout)
	}

	// output
	if c.LoggingSteps < 1 {
		bad("LoggingSteps", "logging_steps", "%d: must be ≥ 1", c.LoggingSteps)
	}
	if c.SaveSteps < 0 {
		bad("SaveSteps", "save_steps", "%d: must be ≥ 0 (0 = never)", c.SaveSteps)
	}
	if c.SaveTotalLimit < 0 {
		bad("SaveTotalLimit", "save_total_limit", "%d: must be ≥ 0 (0 = keep all)", c.SaveTotalLimit)
	}
	if c.LogCompletions && c.OutputDir == "" {
		bad("LogCompletions", "log_completions", "set without OutputDir: completions are written there; set OutputDir")
	}
	return errors.Join(errs...)
}
