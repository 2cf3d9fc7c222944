package grpo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"

	"github.com/x/env"
	"github.com/x/model"
)

// RewardFunc scores one rollout; r.Env is the environment in its final
// state. Returning an error wrapping ErrNoScore is TRL's None: the rollout
// is left out of this function's mean. Any other error, NaN or ±Inf stops
// the step with the function's name and the row. A panic, or a call past
// Config.RewardTimeout, fails only the rollout (left out of the loss); a
// call that ignores its context is abandoned and must not touch r once
// ctx is done.
type RewardFunc func(ctx context.Context, r *Rollout) (float64, error)

// Option configures a Trainer.
type Option func(*options) error

type namedReward struct {
	name   string
	weight float64
	fn     RewardFunc
}

type options struct {
	factory   env.Factory
	factories map[string]env.Factory
	rewards   []namedReward
	rollout   RolloutFunc
	lora      *model.LoRAConfig
	log       *slog.Logger
	callbacks []Callback
	progress  io.Writer
}

// WithEnv plays every rollout against an environment from f, one pooled
// instance per rollout ("construct once, reset often").
func WithEnv(f env.Factory) Option {
	return func(o *options) error {
		if f == nil {
			return errors.New("grpo: WithEnv: nil factory")
		}
		if o.factory != nil || o.factories != nil {
			return errors.New("grpo: WithEnv: an environment is already set (use one WithEnv or one WithEnvs)")
		}
		o.factory = f
		return nil
	}
}

// WithEnvs plays each row against the environment its "environment"
// column (env.EnvironmentColumn) names; only that environment's tools are
// offered for the row. A row naming no environment of fs stops the step
// with an error listing the names.
func WithEnvs(fs map[string]env.Factory) Option {
	return func(o *options) error {
		if len(fs) == 0 {
			return errors.New("grpo: WithEnvs: no factories")
		}
		if o.factory != nil || o.factories != nil {
			return errors.New("grpo: WithEnvs: an environment is already set (use one WithEnv or one WithEnvs)")
		}
		for _, name := range slices.Sorted(maps.Keys(fs)) {
			if fs[name] == nil {
				return fmt.Errorf("grpo: WithEnvs: factory %q is nil", name)
			}
		}
		o.factories = maps.Clone(fs)
		return nil
	}
}

// WithReward adds a reward function with its weight in the summed reward
// (TRL's reward_funcs and reward_weights). Names must be unique.
func WithReward(name string, weight float64, fn RewardFunc) Option {
	return func(o *options) error {
		switch {
		case name == "":
			return errors.New("grpo: WithReward: empty name")
		case fn == nil:
			return fmt.Errorf("grpo: WithReward %q: nil function", name)
		case math.IsNaN(weight) || math.IsInf(weight, 0):
			return fmt.Errorf("grpo: WithReward %q: weight %v is not finite", name, weight)
		}
		for _, r := range o.rewards {
			if r.name == name {
				return fmt.Errorf("grpo: WithReward: %q given twice", name)
			}
		}
		o.rewards = append(o.rewards, namedReward{name, weight, fn})
		return nil
	}
}

// WithRolloutFunc hands generation to fn (TRL's rollout_func): the trainer
// then runs no tool loop and uses no environment; it scores, computes
// advantages and trains on what fn returns.
func WithRolloutFunc(fn RolloutFunc) Option {
	return func(o *options) error {
		if fn == nil {
			return errors.New("grpo: WithRolloutFunc: nil function")
		}
		o.rollout = fn
		return nil
	}
}

// WithLoRA trains LoRA adapters of shape cfg, attached (seeded by
// Config.Seed) when the model carries none. A model that already carries
// adapters trains them whatever this says; a model with none and no
// WithLoRA is fully fine-tuned.
func WithLoRA(cfg model.LoRAConfig) Option {
	return func(o *options) error {
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("grpo: WithLoRA: %w", err)
		}
		o.lora = &cfg
		return nil
	}
}

// WithLogger sets where the trainer reports rollouts left out after
// failing every attempt, and warnings (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		o.log = l
		return nil
	}
}

// WithCallback adds a function called with each optimizer step's metrics
// (a MetricsWriter's or Progress's Callback, or your own). A callback's
// error stops Train.
func WithCallback(cb Callback) Option {
	return func(o *options) error {
		if cb == nil {
			return errors.New("grpo: WithCallback: nil callback")
		}
		o.callbacks = append(o.callbacks, cb)
		return nil
	}
}

// WithProgress shows Train's progress bar (step, ETA, reward, loss) on w,
// as plain lines when w is not a terminal. nil shows none.
func WithProgress(w io.Writer) Option {
	return func(o *options) error {
		o.progress = w
		return nil
	}
}
