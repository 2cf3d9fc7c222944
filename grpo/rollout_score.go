package grpo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/x/env"
)

// envRewardName is the reward column of an env type's own reward: the
// type's name without package or pointer (TRL uses the class name).
func envRewardName(e env.Env) string {
	t := reflect.TypeOf(e)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// probeEnvRewards returns the reward columns of the env types that own
// their reward, one per distinct type, in pool order, by looking at each
// pool's probe instance.
func probeEnvRewards(ctx context.Context, pools []*env.Pool) ([]string, map[reflect.Type]string, error) {
	var names []string
	types := map[reflect.Type]string{}
	for _, p := range pools {
		inst, err := p.Acquire(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("grpo: probe environment: %w", err)
		}
		e := inst.Env
		inst.Release()
		if _, ok := e.(env.Rewarder); !ok {
			continue
		}
		rt := reflect.TypeOf(e)
		if _, ok := types[rt]; ok {
			continue
		}
		name := envRewardName(e)
		if slices.Contains(names, name) {
			name = rt.String() // two types of one name in different packages
		}
		types[rt] = name
		names = append(names, name)
	}
	return names, types, nil
}

// score runs every reward function on every rollout that did not fail, and
// the env-owned rewards, into a RewardTable (NaN = no score). A reward that
// panics or passes Config.RewardTimeout, or an env that fails giving its
// reward (envFailure), fails its rollout: score sets the rollout's Err and
// leaves its row unscored. Other errors stop the step. A reward call left
// running past its deadline (ErrAbandoned) may still hold the rollout's
// env: that env is discarded when the call returns, and insts[i] set to
// nil so that nobody releases it meanwhile.
func (t *Trainer) score(ctx context.Context, rs []*Rollout, insts []*env.Instance) (*RewardTable, error) {
	names := make([]string, 0, len(t.o.rewards)+len(t.envRewards))
	weights := make([]float64, 0, cap(names))
	for _, r := range t.o.rewards {
		names = append(names, r.name)
		weights = append(weights, r.weight)
	}
	for _, n := range t.envRewards {
		names = append(names, n)
		weights = append(weights, 1)
	}
	tab, err := NewRewardTable(names, weights, len(rs))
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		if r.Err != nil {
			continue
		}
		var inst *env.Instance
		if i < len(insts) {
			inst = insts[i]
		}
		lost := false // the rollout failed in a reward
		for k, rf := range t.o.rewards {
			what := fmt.Sprintf("reward %q on rollout %d (group %d, row %v)", rf.name, i, r.Group, r.Row)
			v, fails, err := callReward(ctx, t.cfg.RewardTimeout, what, inst, func(c context.Context) (float64, error) { return rf.fn(c, r) })
			if errors.Is(err, ErrAbandoned) {
				r.Abandoned++
				if inst != nil { // the call discards it when it returns
					insts[i], inst = nil, nil
				}
			}
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if fails {
				t.leaveOut(tab, r, i, err)
				lost = true
				break
			}
			if err := tab.Set(k, i, v, err); err != nil {
				return nil, fmt.Errorf("%w (row %v)", err, r.Row)
			}
		}
		if lost || inst == nil {
			continue
		}
		name, ok := t.envRewardTypes[reflect.TypeOf(inst.Env)]
		if !ok {
			continue
		}
		k := len(t.o.rewards) + slices.Index(t.envRewards, name)
		type envReward struct {
			v   float64
			has bool
		}
		what := fmt.Sprintf("reward %q of the env of rollout %d (group %d, row %v)", name, i, r.Group, r.Row)
		er, fails, err := callReward(ctx, t.cfg.RewardTimeout, what, inst, func(c context.Context) (envReward, error) {
			v, has, err := inst.Reward(c)
			return envReward{v, has}, err
		})
		if errors.Is(err, ErrAbandoned) {
			r.Abandoned++
			insts[i] = nil // the call discards it when it returns
		}
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil && !er.has {
			continue
		}
		if fails {
			t.leaveOut(tab, r, i, err)
			continue
		}
		if envFailure(err) {
			// The episode is lost (a dead server, a lost session): the
			// rollout fails as if it had failed while playing, out of the
			// loss and its group's baseline.
			t.leaveOut(tab, r, i, fmt.Errorf("%s: %w", what, err))
			continue
		}
		if err := tab.Set(k, i, er.v, err); err != nil {
			return nil, fmt.Errorf("%w (row %v)", err, r.Row)
		}
	}
	return tab, nil
}

// callReward runs one reward call (a reward function, an env's Reward)
// with guarded under timeout (0: none). fails reports an error that fails
// the rollout rather than the step: the call panicked, or it passed its
// deadline (abandoned, or returning the deadline's error). An abandoned
// call discards inst (the rollout's env, which it may still be using)
// when it returns.
func callReward[T any](ctx context.Context, timeout time.Duration, what string, inst *env.Instance, f func(context.Context) (T, error)) (v T, fails bool, err error) {
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		rctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	v, err = guarded(rctx, what, f, func(T, error) {
		if inst != nil {
			_ = inst.Discard()
		}
	})
	var pe *env.PanicError
	var gp *panicError
	switch {
	case err == nil || ctx.Err() != nil:
		return v, false, err
	case errors.Is(err, ErrAbandoned), errors.As(err, &gp): // they name what
		return v, true, err
	case errors.As(err, &pe):
		return v, true, fmt.Errorf("%s: %w", what, err)
	case rctx.Err() != nil:
		return v, true, fmt.Errorf("%s: past RewardTimeout %v: %w", what, timeout, err)
	}
	return v, false, err
}

// leaveOut fails rollout i in a reward: its Err is set, its scores cleared.
func (t *Trainer) leaveOut(tab *RewardTable, r *Rollout, i int, err error) {
	r.Err = fmt.Errorf("rollout %d (group %d): %w", i, r.Group, err)
	if t.log != nil {
		t.log.Warn("grpo: rollout left out", "rollout", i, "group", r.Group, "cause", r.Err)
	}
	for k := range tab.Scores {
		tab.Scores[k][i] = math.NaN()
	}
}
