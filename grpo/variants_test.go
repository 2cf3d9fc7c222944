package grpo

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/model"
)

// TestStepEveryVariant trains one generation with each loss setting TRL
// users configure that the trainer formerly refused, and checks that the
// step moved the policy and logged the loss type's metrics under TRL's
// names.
func TestStepEveryVariant(t *testing.T) {
	th := 0.5
	tests := []struct {
		name string
		edit func(*Config)
		want []string // metrics the step must log
		not  []string // and must not
	}{
		{"luspo token", func(c *Config) { c.LossType = LossLUSPO }, []string{MetricClipRatioLowMin, MetricClipRatioHighMax}, nil},
		{"cispo sequence", func(c *Config) {
			c.LossType, c.EpsilonHigh, c.ImportanceSamplingLevel = LossCISPO, 0.28, ISSequence
		}, []string{MetricCISPOClipRatio}, []string{MetricClipRatioLowMin}},
		{"cispo default epsilon", func(c *Config) { c.LossType = LossCISPO }, []string{MetricCISPOClipRatio}, nil},
		{"sapo sequence", func(c *Config) { c.LossType, c.ImportanceSamplingLevel = LossSAPO, ISSequence }, nil, []string{MetricCISPOClipRatio}},
		{"vespo sequence", func(c *Config) { c.LossType, c.ImportanceSamplingLevel = LossVESPO, ISSequence }, []string{MetricVESPOPhiSeqMean}, nil},
		{"off-policy mask", func(c *Config) { c.OffPolicyMaskThreshold = &th }, []string{MetricClipRatioRegionMean}, nil},
		{"delta inside the clip", func(c *Config) { c.Delta = 1.1 }, []string{MetricClipRatioHighMean}, nil},
		{"entropy mask with entropy bonus", func(c *Config) { c.TopEntropyQuantile, c.EntropyCoef = 0.5, 0.01 }, []string{MetricEntropyLoss, MetricEntropyCoef}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(4, 1)
			cfg.MaxCompletionLength = 12
			cfg.NumIterations = 2 // old log-probs in the loss: ratios move off 1
			tt.edit(&cfg)
			require.NoError(t, cfg.Validate())
			m, tok := tinyModel(t, 3)
			i := 0
			tr, err := NewTrainer(m, tok, cfg, WithLoRA(model.LoRAConfig{R: 2, Alpha: 4}),
				WithReward("v", 1, func(context.Context, *Rollout) (float64, error) { i++; return float64(i % 3), nil }))
			require.NoError(t, err)
			defer tr.Close()
			before := snapshot(tr.Params())
			rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Count to three."}})
			require.NoError(t, err)
			assert.True(t, changed(t, before, tr.Params()), "the step trained")
			require.Len(t, rep.Metrics, 2)
			for _, m := range rep.Metrics {
				assert.False(t, math.IsNaN(m[MetricLoss]), "loss")
				for _, k := range tt.want {
					assert.Contains(t, m, k)
				}
				for _, k := range tt.not {
					assert.NotContains(t, m, k)
				}
			}
		})
	}
}

// TestSamplingMetricsBeforeThePolicyMoves: sampling/* compares the
// sampler's log-probs with the training forward's of the same policy, for
// every optimizer step of a generation alike, even when the generation
// feeds two optimizer steps and the second runs on a moved policy (whose
// log-probs are far from the sampler's, as the check after the step
// shows).
func TestSamplingMetricsBeforeThePolicyMoves(t *testing.T) {
	cfg := testConfig(4, 2)
	cfg.PerDeviceTrainBatchSize, cfg.StepsPerGeneration = 4, 2 // two optimizer steps per generation
	cfg.MaxCompletionLength = 12
	cfg.LearningRate = 0.1 // the policy moves a lot at the first step
	m, tok := tinyModel(t, 3)
	i := 0
	tr, err := NewTrainer(m, tok, cfg, WithLoRA(model.LoRAConfig{R: 2, Alpha: 4}),
		WithReward("v", 1, func(context.Context, *Rollout) (float64, error) { i++; return float64(i % 3), nil }))
	require.NoError(t, err)
	defer tr.Close()
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "One?"}, {"prompt": "Two?"}})
	require.NoError(t, err)
	require.Len(t, rep.Metrics, 2)
	first, second := rep.Metrics[0][MetricSamplingLogpDiffMax], rep.Metrics[1][MetricSamplingLogpDiffMax]
	assert.Equal(t, first, second, "one figure per generation")
	assert.Less(t, first, 1e-3, "the sampler and the training forward of the same policy")

	b, masks, err := tr.lossBatch(rep.Rollouts, Advantages{A: rep.Advantages, Loss: repeat(true, len(rep.Rollouts))})
	require.NoError(t, err)
	moved, err := tr.pol.logProbs(context.Background(), b.seqs, true)
	require.NoError(t, err)
	drift := 0.0
	for j := range moved {
		for k, ok := range masks[j] {
			if ok {
				drift = math.Max(drift, math.Abs(float64(moved[j][k]-b.sampler[j][k])))
			}
		}
	}
	assert.Greater(t, drift, 100*math.Max(first, 1e-6), "after the steps the policy's log-probs moved far from the sampler's")
}

// TestSamplingCorrectionClipMin: a RolloutFunc's log-probs far below the
// policy's (ratios ≫ 1) with truncate and both bounds: the ratio in use
// is clamped to [clip_min, clip_max]; with a lower bound only and
// sampling log-probs far above (ratios ≪ 1) it is raised to clip_min.
func TestSamplingCorrectionClipMin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lp       float32
		min, max float64
		want     float64 // every ratio in use
	}{
		{"upper", -30, 0.5, 2, 2},
		{"lower", 0, 0.5, 0, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, tok := tinyModel(t, 3)
			cfg := testConfig(2, 1)
			cfg.ISCorrection = ISCorrectionTokenTruncate
			cfg.ISCorrectionClipMin, cfg.ISCorrectionClipMax = tc.min, tc.max
			fn := func(_ context.Context, rows []env.Row) ([]Generated, error) {
				out := make([]Generated, len(rows))
				for i := range out {
					ids := append(tok.Encode("hi there"), tok.EOS())
					lp := make([]float32, len(ids))
					for k := range lp {
						lp[k] = tc.lp
					}
					out[i] = Generated{PromptIDs: tok.Encode("Say hi"), CompletionIDs: ids, LogProbs: lp}
				}
				return out, nil
			}
			n := 0
			tr, err := NewTrainer(m, tok, cfg, WithRolloutFunc(fn), WithReward("v", 1, func(context.Context, *Rollout) (float64, error) { n++; return float64(n), nil }))
			require.NoError(t, err)
			defer tr.Close()
			rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "p"}})
			require.NoError(t, err)
			mt := rep.Metrics[0]
			assert.InDelta(t, tc.want, mt[MetricSamplingISRatioMin], 1e-12)
			assert.InDelta(t, tc.want, mt[MetricSamplingISRatioMax], 1e-12)
		})
	}
}

// TestEntropyBonusIsTheMeanEntropy: whatever the loss type's
// normalisation, the entropy bonus is coef × the mean entropy of the loss
// tokens (per accumulation step), as TRL's _compute_loss computes it:
// entropy_loss = −coef·entropy on a one-micro-batch step, and the loss the
// backend computed differs from the same step's without the bonus by
// exactly entropy_loss. Completions of different lengths, so that a mean
// of per-completion means (grpo's policy weights) or a division by
// MaxCompletionLength (dr_grpo's) would not pass for it; luspo's policy
// weights summed each completion's entropies.
func TestEntropyBonusIsTheMeanEntropy(t *testing.T) {
	texts := []string{"Hi.", "Hello there, how are you?", "One two three four five six seven eight nine ten.", "Ok"}
	for _, lt := range LossTypes() {
		for _, level := range []ISLevel{ISToken, ISSequence} {
			if level == ISSequence && lt != LossLUSPO && lt != LossGRPO {
				continue
			}
			t.Run(string(lt)+"_"+string(level), func(t *testing.T) {
				step := func(coef float64) Metrics {
					cfg := testConfig(4, 1)
					cfg.LossType, cfg.ImportanceSamplingLevel, cfg.EntropyCoef = lt, level, coef
					tr, _ := newScripted(t, cfg, func(r, _ int) string { return texts[r%len(texts)] },
						WithEnv(counters()), WithReward("len", 1, func(_ context.Context, r *Rollout) (float64, error) {
							return float64(len(r.CompletionIDs) % 3), nil
						}))
					rep, err := tr.Step(context.Background(), []env.Row{{}})
					require.NoError(t, err)
					require.Len(t, rep.Metrics, 1)
					return rep.Metrics[0]
				}
				with, without := step(0.1), step(0)
				require.Positive(t, with[MetricEntropy])
				assert.InEpsilon(t, -0.1*with[MetricEntropy], with[MetricEntropyLoss], 1e-5, "entropy_loss = −coef × mean entropy")
				assert.InDelta(t, without[MetricLoss], with[MetricLoss]-with[MetricEntropyLoss], 1e-6, "the backend's bonus is entropy_loss")
			})
		}
	}
}
