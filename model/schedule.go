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
	// ScheduleWSD (warmup, stable, decay) keeps the peak rate until the
	// last DecaySteps steps, then decays along half a cosine to 0 at
	// TotalSteps (transformers "warmup_stable_decay" with its default
	// cosine decay and min_lr_ratio 0).
	ScheduleWSD ScheduleKind = "warmup_stable_decay"
)

// Schedule gives the learning rate of each optimizer step. The zero value
// is not valid; set at least LR. It follows transformers'
// get_{constant,linear,cosine}_schedule_with_warmup and get_wsd_schedule
// exactly, including that the rate of step 0 is 0 when WarmupSteps > 0.
type Schedule struct {
	Kind        ScheduleKind // "" means ScheduleConstant
	LR          float64      // peak learning rate
	WarmupSteps int          // linear ramp from 0 over this many steps
	TotalSteps  int          // the run's length, where linear, cosine and WSD reach 0; ignored by constant
	DecaySteps  int          // WSD only: the decay's length, ending at TotalSteps
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
	case ScheduleWSD:
		if s.DecaySteps < 1 || s.WarmupSteps+s.DecaySteps > s.TotalSteps {
			return fmt.Errorf("schedule %s: %d decay steps: want at least 1 and, with %d warmup steps, at most the run's %d steps", s.Kind, s.DecaySteps, s.WarmupSteps, s.TotalSteps)
		}
	default:
		return fmt.Errorf("schedule: unknown kind %q (want constant, linear, cosine or warmup_stable_decay)", s.Kind)
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
	case ScheduleWSD:
		start := s.TotalSteps - s.DecaySteps // the stable phase's end
		if step < start {
			return 1
		}
		progress := float64(step-start) / float64(max(1, s.DecaySteps))
		return max(0, 0.5*(1+math.Cos(math.Pi*min(1, progress))))
	}
	return 1
}
