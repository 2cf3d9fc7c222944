package grpo

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/model"
)

// specMetrics are the metric names of spec §6 (TRL's logged metrics) that
// a training run logs, with the loss type that logs each (clip ratios are
// the clipped family's; "" any). Not logged: aux_loss (MoE models only;
// Qwen3 dense has none), total_flos (FLOPs are not counted), the Liger
// path's "clip_ratio" (no Liger path), TRL's profiling/* timers (ours are
// time/*) and log_metric names (TRL's reward-function hook).
var specMetrics = map[string]LossType{
	MetricNumTokens: "", MetricCompletionsMeanLength: "", MetricCompletionsMinLength: "", MetricCompletionsMaxLength: "",
	MetricCompletionsClippedRatio: "", MetricCompletionsMeanTermLength: "", MetricCompletionsMinTermLength: "",
	MetricCompletionsMaxTermLength: "", MetricToolsCallFrequency: "", MetricToolsFailureFrequency: "",
	RewardMeanName("len"): "", RewardStdName("len"): "", MetricReward: "", MetricRewardStd: "", MetricFracRewardZeroStd: "",
	MetricSamplingLogpDiffMean: "", MetricSamplingLogpDiffMax: "",
	MetricSamplingISRatioMin: "", MetricSamplingISRatioMean: "", MetricSamplingISRatioMax: "",
	MetricKL: "", MetricEntropy: "",
	MetricClipRatioLowMean: LossDAPO, MetricClipRatioHighMean: LossDAPO, MetricClipRatioRegionMean: LossDAPO,
	MetricClipRatioLowMin: LossDAPO, MetricClipRatioHighMax: LossDAPO,
	MetricCISPOClipRatio: LossCISPO, MetricVESPOPhiSeqMean: LossVESPO,
	MetricPolicyLoss: "", MetricEntropyCoef: "",
	MetricStepTime: "", MetricLoss: "", MetricGradNorm: "", MetricLearningRate: "", MetricEpoch: "",
	MetricTrainRuntime: "", MetricTrainSamplesPerSecond: "", MetricTrainStepsPerSecond: "", MetricTrainLoss: "",
}

// ourMetrics are logged beyond §6: the loss's other terms, failed and
// replayed rollouts, abandoned calls and the phases' timings.
var ourMetrics = []string{MetricKLLoss, MetricEntropyLoss, MetricRolloutsFailed, MetricRolloutsReplayed, MetricRolloutsAbandoned,
	MetricTimeGeneration, MetricTimeTools, MetricTimeScoring, MetricTimeBackward, MetricTimeOptimizer}

// TestSpecMetricsLogged trains two steps with each loss type that logs
// metrics of its own (β > 0 for kl, an entropy bonus for entropy_coef)
// and requires every §6 name, and ours, in the metrics log.
func TestSpecMetricsLogged(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	logged := map[string]bool{}
	for _, lt := range []LossType{LossDAPO, LossCISPO, LossVESPO} {
		t.Run(string(lt), func(t *testing.T) {
			cfg := testConfig(2, 1)
			cfg.LossType, cfg.Beta, cfg.EntropyCoef = lt, 0.04, 0.01
			cfg.MaxSteps, cfg.OutputDir = 2, t.TempDir()
			if lt == LossCISPO {
				cfg.EpsilonHigh = 5
			}
			tr, _ := newScripted(t, cfg, threeWay, WithEnv(counters()), WithLoRA(model.LoRAConfig{R: 2, Alpha: 4}),
				WithReward("len", 1, func(_ context.Context, r *Rollout) (float64, error) { return float64(len(r.CompletionIDs)), nil }))
			require.NoError(t, tr.Train(context.Background(), NewDataset([]env.Row{{"prompt": "Go: "}})))
			lines, err := ReadMetrics(filepath.Join(cfg.OutputDir, MetricsFile))
			require.NoError(t, err)
			require.Len(t, lines, 2)
			for _, l := range lines {
				for k := range l.Metrics {
					logged[k] = true
				}
			}
			for name, by := range specMetrics {
				if by == lt {
					assert.Contains(t, lines[1].Metrics, name)
				}
			}
			last := lines[1].Metrics
			assert.InDelta(t, last[MetricLoss], last[MetricPolicyLoss]+last[MetricKLLoss]+last[MetricEntropyLoss], 1e-6, "the terms add up to the loss")
			assert.InDelta(t, (lines[0].Metrics[MetricLoss]+last[MetricLoss])/2, last[MetricTrainLoss], 1e-12)
			assert.NotContains(t, lines[0].Metrics, MetricTrainRuntime, "the end-of-run figures are on the last step only")
		})
	}
	for name := range specMetrics {
		assert.True(t, logged[name], "§6 metric %q is logged", name)
	}
	for _, name := range ourMetrics {
		assert.True(t, logged[name], "metric %q is logged", name)
	}
}
