package grpo

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"

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
// the env-owned rewards, into a RewardTable (NaN = no score). An env that
// fails giving its reward (envFailure) fails its rollout: score sets the
// rollout's Err and leaves its row unscored; other errors stop the step.
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
		for k, rf := range t.o.rewards {
			v, err := rf.fn(ctx, r)
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err := tab.Set(k, i, v, err); err != nil {
				return nil, fmt.Errorf("%w (row %v)", err, r.Row)
			}
		}
		if i >= len(insts) || insts[i] == nil {
			continue
		}
		name, ok := t.envRewardTypes[reflect.TypeOf(insts[i].Env)]
		if !ok {
			continue
		}
		k := len(t.o.rewards) + slices.Index(t.envRewards, name)
		v, has, err := insts[i].Reward(ctx)
		if !has {
			continue
		}
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil && envFailure(err) {
			// The episode is lost (a dead server, a lost session): the
			// rollout fails as if it had failed while playing, out of
			// the loss and its group's baseline.
			r.Err = fmt.Errorf("rollout %d (group %d): reward %q: %w", i, r.Group, name, err)
			if t.log != nil {
				t.log.Warn("grpo: rollout left out", "rollout", i, "group", r.Group, "cause", r.Err)
			}
			for k := range tab.Scores {
				tab.Scores[k][i] = math.NaN()
			}
			continue
		}
		if err := tab.Set(k, i, v, err); err != nil {
			return nil, fmt.Errorf("%w (row %v)", err, r.Row)
		}
	}
	return tab, nil
}
