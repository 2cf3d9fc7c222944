package model

import (
	"fmt"
	"math"
)

// ScheduleKind names a learning-rate schedule, as transformers'
// SchedulerType spells it.
type ScheduleKind string

// Learning-rate schedules. Each ramps linearly from 0 over WarmupSteps
// first (no ramp when WarmupSteps is 0).
const (
	// ScheduleConstant keeps the peak rate after warmup
	// (transformers "constant" / "constant_with_warmup").
	ScheduleConstant ScheduleKind = "constant"
	// ScheduleLinear decays linearly to 0 at TotalSteps.
	ScheduleLinear ScheduleKind = "linear"
	// ScheduleCosine decays along half a cosine to 0 at TotalSteps.
	ScheduleCosine ScheduleKind = "cosine"
)

// Schedule gives the learning rate of each optimizer step. The zero value
// is not valid; set at least LR. It follows transformers'
// get_{constant,linear,cosine}_schedule_with_warmup exactly, including that
// the rate of step 0 is 0 when WarmupSteps > 0.
type Schedule struct {
	Kind        ScheduleKind // "" means ScheduleConstant
	LR          float64      // peak learning rate
	WarmupSteps int          // linear ramp from 0 over this many steps
	TotalSteps  int          // length of the decay (linear, cosine); ignored by constant
}

// Validate reports what is wrong with s, if anything.
func (s Schedule) Validate() error {
	switch {
	case !(s.LR >= 0) || math.IsInf(s.LR, 0):
		return fmt.Errorf("schedule: learning rate %v must be finite and >= 0", s.LR)
	case s.WarmupSteps < 0:
		return fmt.Errorf("schedule: warmup steps %d < 0", s.WarmupSteps)
	}
	switch s.Kind {
	case "", ScheduleConstant:
	case ScheduleLinear, ScheduleCosine:
		if s.TotalSteps <= s.WarmupSteps {
			return fmt.Errorf("schedule %s: total steps %d must exceed warmup steps %d", s.Kind, s.TotalSteps, s.WarmupSteps)
		}
	default:
		return fmt.Errorf("schedule: unknown kind %q (want constant, linear or cosine)", s.Kind)
	}
	return nil
}

// At is the learning rate of optimizer step `step`, counted from 0 (the
// number of steps already taken).
func (s Schedule) At(step int) float64 {
	return s.LR * s.factor(step)
}

func (s Schedule) factor(step int) float64 {
	if step < s.WarmupSteps {
		return float64(step) / float64(max(1, s.WarmupSteps))
	}
	switch s.Kind {
	case ScheduleLinear:
		return max(0, float64(s.TotalSteps-step)/float64(max(1, s.TotalSteps-s.WarmupSteps)))
	case ScheduleCosine:
		progress := float64(step-s.WarmupSteps) / float64(max(1, s.TotalSteps-s.WarmupSteps))
		return max(0, 0.5*(1+math.Cos(math.Pi*progress)))
	}
	return 1
}
