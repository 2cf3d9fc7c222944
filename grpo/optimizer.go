package grpo

import (
	"math"

	"github.com/x/model"
)

// optimizerConfig is what GRPO's Config and SFTConfig say about the
// optimizer: both runs build their AdamW and learning-rate schedule here
// (adamW) and step it through the same policy (policy.step).
type optimizerConfig struct {
	lr                float64
	schedule          model.ScheduleKind
	warmupSteps       int
	warmupRatio       float64
	decaySteps        int // warmup_stable_decay's decay
	weightDecay       float64
	maxGradNorm       float64 // 0 = no clipping
	beta1, beta2, eps float64
}

// warmup is the warmup in optimizer steps for a run of total steps:
// warmupSteps, or ⌈warmupRatio × total⌉ as transformers rounds it, but
// never every step of the run (at most total − 1): a ratio is a share of
// the run, and rounding it up to the whole of a very short run (one step
// at ratio 0.1) would leave a decaying schedule no step to decay in and
// train at rate 0 (transformers does the latter).
func (o optimizerConfig) warmup(total int) int {
	if o.warmupSteps > 0 {
		return o.warmupSteps
	}
	return min(int(math.Ceil(o.warmupRatio*float64(total))), max(total-1, 0))
}

// adamW is the optimizer of a run of total optimizer steps.
func (o optimizerConfig) adamW(total int) model.AdamWConfig {
	return model.AdamWConfig{
		Beta1:       float32(o.beta1),
		Beta2:       float32(o.beta2),
		Eps:         float32(o.eps),
		WeightDecay: float32(o.weightDecay),
		MaxGradNorm: o.maxGradNorm,
		Schedule: model.Schedule{
			Kind:        o.schedule,
			LR:          o.lr,
			WarmupSteps: o.warmup(total),
			TotalSteps:  total,
			DecaySteps:  o.decaySteps,
		},
	}
}
