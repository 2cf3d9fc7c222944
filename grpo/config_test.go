package grpo

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/model"
	"github.com/x/tokenizer"
)

// configFields returns the Field of every *ConfigError joined in err.
func configFields(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var fields []string
	for _, e := range errs {
		var ce *ConfigError
		require.True(t, errors.As(e, &ce), "error %v is not a *ConfigError", e)
		fields = append(fields, ce.Field)
	}
	return fields
}

func TestDefaultConfigMatchesTRL(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.Validate())
	assert.Equal(t, 8, c.NumGenerations)
	assert.Equal(t, 512, c.MaxCompletionLength)
	assert.Equal(t, Unlimited, c.MaxToolCallingIterations)
	assert.Equal(t, float32(1), c.Temperature)
	assert.Equal(t, float32(1), c.TopP)
	assert.Equal(t, 0, c.TopK)
	assert.Equal(t, 1e-6, c.LearningRate)
	assert.Equal(t, model.ScheduleLinear, c.LRSchedule)
	assert.Equal(t, 0.0, c.Beta)
	assert.Equal(t, 0.2, c.Epsilon)
	assert.Equal(t, 0.2, c.EpsilonHighOrDefault())
	assert.Equal(t, 0.0, c.Delta)
	assert.Equal(t, LossDAPO, c.LossType)
	assert.Equal(t, ISToken, c.ImportanceSamplingLevel)
	assert.Equal(t, ScaleGroup, c.ScaleRewards)
	assert.Equal(t, SumThenNormalize, c.Aggregation)
	assert.False(t, c.MaskTruncatedCompletions)
	assert.Equal(t, 1, c.NumIterations)
	assert.Equal(t, 8, c.PerDeviceTrainBatchSize)
	assert.Equal(t, 1, c.GradientAccumulationSteps)
	assert.Equal(t, 1.0, c.MaxGradNorm)
	assert.Equal(t, uint64(42), c.Seed)
	assert.Equal(t, 10, c.LoggingSteps)
	assert.Equal(t, 1.05, c.SAPOTemperatureNeg)
	assert.Equal(t, [4]float64{2, 3, 3, 2}, [4]float64{c.VESPOKPos, c.VESPOLambdaPos, c.VESPOKNeg, c.VESPOLambdaNeg})
	assert.Equal(t, ISCorrectionSequenceMask, c.ISCorrection)
	assert.Equal(t, 3.0, c.ISCorrectionClipMax)
	assert.Zero(t, c.ISCorrectionClipMin)
	assert.Nil(t, c.OffPolicyMaskThreshold)
	assert.Equal(t, RolloutExact, c.RolloutMatMulPrecision, "the Go trainer's own: rollouts as training computes")

	l := c.Layout()
	assert.Equal(t, Layout{G: 8, MicroBatch: 8, GradientAccumulationSteps: 1, StepsPerGeneration: 1, GenerationBatchSize: 8, Prompts: 1, NumIterations: 1}, l)
	assert.Equal(t, 1, l.OptimizerSteps())
	assert.False(t, l.NeedsOldLogProbs(), "defaults: the ratio is exactly 1, old = sg(logp)")
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*Config)
		fields []string // every field Validate must name, in order
	}{
		{"defaults", func(*Config) {}, nil},
		{"one generation", func(c *Config) { c.NumGenerations = 1 }, []string{"NumGenerations"}},
		{"generation batch not a multiple of G", func(c *Config) { c.NumGenerations = 3 }, []string{"GenerationBatchSize"}},
		{"generation batch not a multiple of micro-batch", func(c *Config) { c.GenerationBatchSize = 12 }, []string{"GenerationBatchSize"}},
		{"generation batch and steps per generation both set", func(c *Config) { c.GenerationBatchSize = 16; c.StepsPerGeneration = 2 }, []string{"GenerationBatchSize"}},
		{"generation batch 16 of 8 prompts ok", func(c *Config) { c.GenerationBatchSize = 16; c.NumGenerations = 4 }, nil},
		{"steps per generation not a multiple of accumulation", func(c *Config) { c.GradientAccumulationSteps = 2; c.StepsPerGeneration = 3 }, []string{"GradientAccumulationSteps"}},
		{"zero micro-batch", func(c *Config) { c.PerDeviceTrainBatchSize = 0 }, []string{"PerDeviceTrainBatchSize"}},
		{"zero iterations", func(c *Config) { c.NumIterations = 0 }, []string{"NumIterations"}},
		{"negative micro-batch tokens", func(c *Config) { c.MicroBatchTokens = -1 }, []string{"MicroBatchTokens"}},
		{"micro-batch tokens 0 ok (whole micro-batch)", func(c *Config) { c.MicroBatchTokens = 0 }, nil},
		{"unknown KV dtype", func(c *Config) { c.KVCacheDType = "fp8" }, []string{"KVCacheDType"}},
		{"KV dtype names are exact", func(c *Config) { c.KVCacheDType = "bf16" }, []string{"KVCacheDType"}},
		{"bfloat16 KV ok", func(c *Config) { c.KVCacheDType = KVBFloat16 }, nil},
		{"float32 KV ok", func(c *Config) { c.KVCacheDType = KVFloat32 }, nil},
		{"unknown rollout precision", func(c *Config) { c.RolloutMatMulPrecision = "fp8" }, []string{"RolloutMatMulPrecision"}},
		{"rollout precision names are exact", func(c *Config) { c.RolloutMatMulPrecision = "BF16" }, []string{"RolloutMatMulPrecision"}},
		{"bf16 rollouts ok", func(c *Config) { c.RolloutMatMulPrecision = RolloutBF16 }, nil},
		{"empty rollout precision ok (exact)", func(c *Config) { c.RolloutMatMulPrecision = "" }, nil},
		// TRL accepts these (some with a warning, see TestConfigWarnings).
		{"epsilon_high below epsilon ok", func(c *Config) { c.EpsilonHigh = 0.1 }, nil},
		{"epsilon_high 0.28 ok", func(c *Config) { c.EpsilonHigh = 0.28 }, nil},
		{"epsilon 1 ok", func(c *Config) { c.Epsilon = 1 }, nil},
		{"negative epsilon", func(c *Config) { c.Epsilon = -0.1 }, []string{"Epsilon"}},
		{"delta inside clip range ok", func(c *Config) { c.Delta = 1.2 }, nil},
		{"delta above 1+eps_high ok", func(c *Config) { c.Delta = 4 }, nil},
		{"delta below 1+eps_high (0.28) ok", func(c *Config) { c.EpsilonHigh = 0.28; c.Delta = 1.25 }, nil},
		{"delta with sapo ok", func(c *Config) { c.LossType = LossSAPO; c.Delta = 4 }, nil},
		{"negative delta", func(c *Config) { c.Delta = -1 }, []string{"Delta"}},
		{"unknown loss type", func(c *Config) { c.LossType = "ppo" }, []string{"LossType"}},
		{"sequence IS with cispo ok", func(c *Config) {
			c.LossType = LossCISPO
			c.EpsilonHigh = 5
			c.ImportanceSamplingLevel = ISSequence
		}, nil},
		{"sequence IS with sapo ok", func(c *Config) { c.LossType = LossSAPO; c.ImportanceSamplingLevel = ISSequence }, nil},
		{"sequence IS with vespo ok", func(c *Config) { c.LossType = LossVESPO; c.ImportanceSamplingLevel = ISSequence }, nil},
		{"sequence IS with grpo ok (GSPO)", func(c *Config) { c.LossType = LossGRPO; c.ImportanceSamplingLevel = ISSequence }, nil},
		{"luspo at token level ok", func(c *Config) { c.LossType = LossLUSPO }, nil},
		{"luspo at sequence level ok", func(c *Config) { c.LossType = LossLUSPO; c.ImportanceSamplingLevel = ISSequence }, nil},
		{"unknown IS level", func(c *Config) { c.ImportanceSamplingLevel = "row" }, []string{"ImportanceSamplingLevel"}},
		{"cispo with the epsilon fallback ok (TRL's default: cap 0.2)", func(c *Config) { c.LossType = LossCISPO }, nil},
		{"cispo with epsilon_high 0.28 ok", func(c *Config) { c.LossType = LossCISPO; c.EpsilonHigh = 0.28 }, nil},
		{"cispo with cap 5 ok", func(c *Config) { c.LossType = LossCISPO; c.EpsilonHigh = 5 }, nil},
		{"off-policy mask ok", func(c *Config) { th := 0.5; c.OffPolicyMaskThreshold = &th }, nil},
		{"off-policy mask NaN", func(c *Config) { th := math.NaN(); c.OffPolicyMaskThreshold = &th }, []string{"OffPolicyMaskThreshold"}},
		{"sapo temperature 0", func(c *Config) { c.LossType = LossSAPO; c.SAPOTemperatureNeg = 0 }, []string{"SAPOTemperatureNeg"}},
		{"vespo lambda NaN", func(c *Config) { c.LossType = LossVESPO; c.VESPOLambdaPos = math.NaN() }, []string{"VESPOLambdaPos"}},
		// TRL takes any k and raises λ to 1e-4.
		{"vespo k 0 and lambda 0 ok", func(c *Config) { c.LossType = LossVESPO; c.VESPOKPos, c.VESPOLambdaNeg = 0, 0 }, nil},
		{"unknown scale", func(c *Config) { c.ScaleRewards = "true" }, []string{"ScaleRewards"}},
		{"unknown aggregation", func(c *Config) { c.Aggregation = "sum" }, []string{"Aggregation"}},
		{"negative beta", func(c *Config) { c.Beta = -0.1 }, []string{"Beta"}},
		{"greedy training", func(c *Config) { c.Temperature = 0 }, []string{"Temperature"}},
		{"top_p 0", func(c *Config) { c.TopP = 0 }, []string{"TopP"}},
		{"top_k negative", func(c *Config) { c.TopK = -1 }, []string{"TopK"}},
		{"min_p 2", func(c *Config) { c.MinP = 2 }, []string{"MinP"}},
		{"thinking 7", func(c *Config) { c.EnableThinking = 7 }, []string{"EnableThinking"}},
		{"thinking off ok", func(c *Config) { c.EnableThinking = tokenizer.ThinkingOff }, nil},
		{"tool iterations -2", func(c *Config) { c.MaxToolCallingIterations = -2 }, []string{"MaxToolCallingIterations"}},
		{"tool iterations 0 ok", func(c *Config) { c.MaxToolCallingIterations = 0 }, nil},
		{"completion length 0", func(c *Config) { c.MaxCompletionLength = 0 }, []string{"MaxCompletionLength"}},
		{"unknown schedule", func(c *Config) { c.LRSchedule = "step" }, []string{"LRSchedule"}},
		{"wsd without decay", func(c *Config) { c.LRSchedule = model.ScheduleWSD }, []string{"DecaySteps"}},
		{"wsd ok", func(c *Config) { c.LRSchedule = model.ScheduleWSD; c.DecaySteps = 3 }, nil},
		{"warmup steps and ratio", func(c *Config) { c.WarmupSteps = 10; c.WarmupRatio = 0.1 }, []string{"WarmupRatio"}},
		{"adam beta2 1", func(c *Config) { c.AdamBeta2 = 1 }, []string{"AdamBeta2"}},
		{"infinite lr", func(c *Config) { c.LearningRate = math.Inf(1) }, []string{"LearningRate"}},
		{"no steps", func(c *Config) { c.NumEpochs = 0 }, []string{"MaxSteps"}},
		{"max steps without epochs ok", func(c *Config) { c.NumEpochs = 0; c.MaxSteps = 10 }, nil},
		{"entropy quantile 1.5", func(c *Config) { c.TopEntropyQuantile = 1.5 }, []string{"TopEntropyQuantile"}},
		{"IS correction unknown", func(c *Config) { c.ISCorrection = "clip" }, []string{"ISCorrection"}},
		// TRL's two IS checks, with its words.
		{"IS clip min ≥ max", func(c *Config) { c.ISCorrectionClipMin = 3 }, []string{"ISCorrectionClipMin"}},
		{"IS truncate without bounds", func(c *Config) { c.ISCorrection = ISCorrectionTokenTruncate; c.ISCorrectionClipMax = 0 }, []string{"ISCorrectionClipMax"}},
		{"IS mask without bounds ok", func(c *Config) { c.ISCorrectionClipMax = 0 }, nil},
		{"IS both bounds ok", func(c *Config) { c.ISCorrectionClipMin = 0.5; c.ISCorrectionClipMax = 2 }, nil},
		{"IS lower bound only ok", func(c *Config) {
			c.ISCorrection = ISCorrectionSequenceTruncate
			c.ISCorrectionClipMin = 0.5
			c.ISCorrectionClipMax = 0
		}, nil},
		{"IS negative cap", func(c *Config) { c.ISCorrectionClipMax = -1 }, []string{"ISCorrectionClipMax"}},
		{"IS none ignores bounds", func(c *Config) { c.ISCorrection = ISCorrectionNone; c.ISCorrectionClipMax = 0 }, nil},
		{"tool concurrency 0", func(c *Config) { c.ToolConcurrency = 0 }, []string{"ToolConcurrency"}},
		{"negative tool timeout", func(c *Config) { c.ToolTimeout = -time.Second }, []string{"ToolTimeout"}},
		{"zero attempts", func(c *Config) { c.RolloutAttempts = 0 }, []string{"RolloutAttempts"}},
		{"negative retry budget", func(c *Config) { c.RolloutRetryBudget = -1 }, []string{"RolloutRetryBudget"}},
		{"logging steps 0", func(c *Config) { c.LoggingSteps = 0 }, []string{"LoggingSteps"}},
		{"log completions without output dir", func(c *Config) { c.LogCompletions = true }, []string{"LogCompletions"}},
		{"log completions with output dir ok", func(c *Config) { c.LogCompletions = true; c.OutputDir = "out" }, nil},
		{"every problem at once", func(c *Config) {
			c.NumGenerations = 1
			c.EpsilonHigh = -0.1
			c.LossType = "ppo"
			c.ScaleRewards = "x"
			c.RolloutAttempts = 0
		}, []string{"NumGenerations", "ScaleRewards", "LossType", "EpsilonHigh", "RolloutAttempts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			got := configFields(t, err)
			assert.Equal(t, tt.fields, got, "error: %v", err)
			if err != nil {
				// Each message says what to change: it names the field.
				for _, f := range tt.fields {
					assert.Contains(t, err.Error(), "config "+f)
				}
			}
		})
	}
}

func TestConfigLayout(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(*Config)
		want     Layout
		optSteps int
		needsOld bool
	}{
		{"TRL layout test: B=6, spg=4, G=4, mu=2", func(c *Config) {
			c.PerDeviceTrainBatchSize = 6
			c.StepsPerGeneration = 4
			c.NumGenerations = 4
			c.NumIterations = 2
		}, Layout{G: 4, MicroBatch: 6, GradientAccumulationSteps: 1, StepsPerGeneration: 4, GenerationBatchSize: 24, Prompts: 6, NumIterations: 2}, 8, true},
		{"generation batch given", func(c *Config) {
			c.PerDeviceTrainBatchSize = 4
			c.GenerationBatchSize = 16
			c.NumGenerations = 4
		}, Layout{G: 4, MicroBatch: 4, GradientAccumulationSteps: 1, StepsPerGeneration: 4, GenerationBatchSize: 16, Prompts: 4, NumIterations: 1}, 4, true},
		{"accumulation = steps per generation: on-policy", func(c *Config) {
			c.PerDeviceTrainBatchSize = 4
			c.GradientAccumulationSteps = 4
			c.NumGenerations = 4
		}, Layout{G: 4, MicroBatch: 4, GradientAccumulationSteps: 4, StepsPerGeneration: 4, GenerationBatchSize: 16, Prompts: 4, NumIterations: 1}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			require.NoError(t, c.Validate())
			l := c.Layout()
			assert.Equal(t, tt.want, l)
			assert.Equal(t, tt.optSteps, l.OptimizerSteps())
			assert.Equal(t, tt.needsOld, l.NeedsOldLogProbs())
		})
	}
}

func TestConfigSchedule(t *testing.T) {
	c := DefaultConfig()
	c.LearningRate = 1e-4
	c.WarmupRatio = 0.1
	a := c.AdamW(25)
	require.NoError(t, a.Validate())
	assert.Equal(t, 3, a.Schedule.WarmupSteps, "ceil(0.1 × 25) as transformers rounds")
	assert.Equal(t, model.ScheduleLinear, a.Schedule.Kind)
	assert.Equal(t, 25, a.Schedule.TotalSteps)
	for total, want := range map[int]int{1: 0, 2: 1, 10: 1, 11: 2} {
		assert.Equal(t, want, c.Warmup(total), "a ratio's warm-up never takes the whole run of %d steps", total)
		require.NoError(t, c.AdamW(total).Validate(), "a linear decay over %d steps after the warm-up", total)
	}
	assert.Equal(t, float32(0.999), a.Beta2)
	assert.Equal(t, float32(0), a.WeightDecay, "HF's weight_decay default is 0")
	assert.Equal(t, 1.0, a.MaxGradNorm)

	c.WarmupRatio = 0
	c.WarmupSteps = 5
	assert.Equal(t, 5, c.Warmup(100))

	// warmup_stable_decay: the peak until the last DecaySteps, then down to 0.
	c.LRSchedule, c.DecaySteps = model.ScheduleWSD, 30
	w := c.AdamW(100)
	require.NoError(t, w.Validate())
	assert.Equal(t, 30, w.Schedule.DecaySteps)
	assert.Equal(t, 1e-4, w.Schedule.At(69), "stable until step 100 − 30")
	assert.InDelta(t, 0.5e-4, w.Schedule.At(85), 1e-12, "half way down the cosine")
	assert.Error(t, c.AdamW(20).Validate(), "5 warm-up and 30 decay steps do not fit a 20-step run")
	s := c.Sampling()
	assert.Equal(t, float32(1), s.Temperature)
	assert.Equal(t, float32(1), s.TopP)
}

func TestConfigJSONUsesTRLNames(t *testing.T) {
	c := DefaultConfig()
	c.EpsilonHigh = 0.28
	b, err := json.Marshal(c)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"num_generations", "max_completion_length", "loss_type", "epsilon_high", "scale_rewards", "importance_sampling_level", "per_device_train_batch_size", "micro_batch_tokens", "kv_cache_dtype", "rollout_matmul_precision"} {
		assert.Contains(t, m, k)
	}
	assert.Equal(t, "dapo", m["loss_type"])
	var back Config
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, c, back)
}

func TestLossTypesValid(t *testing.T) {
	names := []string{}
	for _, l := range LossTypes() {
		assert.True(t, l.Valid())
		names = append(names, string(l))
	}
	assert.True(t, slices.Equal(names, []string{"dapo", "grpo", "bnpo", "dr_grpo", "cispo", "sapo", "luspo", "vespo"}))
	assert.False(t, LossType("DAPO").Valid())
}

func TestConfigRenderOptions(t *testing.T) {
	c := DefaultConfig()
	c.EnableThinking = tokenizer.ThinkingOff
	tools := []json.RawMessage{json.RawMessage(`{"type":"function"}`)}
	o := c.RenderOptions(tools)
	assert.Equal(t, tokenizer.RenderOptions{Tools: tools, AddGenerationPrompt: true, EnableThinking: tokenizer.ThinkingOff, KeepAllReasoning: true}, o)
}

// §8.16: sequence-level IS with a token-summed loss warns (bnpo, dr_grpo,
// dapo, cispo), not with grpo; TRL's other loss warnings (luspo at token
// level, vespo at sequence level) and its delta advice likewise.
func TestConfigWarnings(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string // "" = no warning
	}{
		{"bnpo sequence", func(c *Config) { c.LossType, c.ImportanceSamplingLevel = LossBNPO, ISSequence }, "weights each sequence by its completion length"},
		{"dr_grpo sequence", func(c *Config) { c.LossType, c.ImportanceSamplingLevel = LossDrGRPO, ISSequence }, "weights each sequence by its completion length"},
		{"dapo sequence", func(c *Config) { c.ImportanceSamplingLevel = ISSequence }, "weights each sequence by its completion length"},
		{"cispo sequence", func(c *Config) { c.LossType, c.EpsilonHigh, c.ImportanceSamplingLevel = LossCISPO, 5, ISSequence }, "weights each sequence by its completion length"},
		{"grpo sequence", func(c *Config) { c.LossType, c.ImportanceSamplingLevel = LossGRPO, ISSequence }, ""},
		{"luspo sequence", func(c *Config) { c.LossType, c.ImportanceSamplingLevel = LossLUSPO, ISSequence }, ""},
		{"luspo token", func(c *Config) { c.LossType = LossLUSPO }, "LUSPO paper"},
		{"vespo sequence", func(c *Config) { c.LossType, c.ImportanceSamplingLevel = LossVESPO, ISSequence }, "vespo computes sequence-level"},
		{"delta inside the clip", func(c *Config) { c.Delta = 1.2 }, "not above 1+epsilon_high"},
		{"delta with sapo", func(c *Config) { c.LossType, c.Delta = LossSAPO, 4 }, "no effect"},
		{"delta 4", func(c *Config) { c.Delta = 4 }, ""},
		{"epsilon_high below epsilon", func(c *Config) { c.EpsilonHigh = 0.1 }, "narrower"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			require.NoError(t, c.Validate())
			w := c.Warnings()
			if tt.want == "" {
				assert.Empty(t, w)
				return
			}
			require.Len(t, w, 1)
			assert.Contains(t, w[0], tt.want)
		})
	}
	assert.Empty(t, DefaultConfig().Warnings())
}
