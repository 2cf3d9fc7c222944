package grpo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/model"
)

// threeWay is TRL's scripted batch: rollout 0 increments, rollout 1 calls
// an unknown tool, rollout 2 answers in plain text; second turns finish.
func threeWay(r, turn int) string {
	if turn > 0 {
		return "Done."
	}
	switch r % 3 {
	case 0:
		return call("increment", `{"step": 1}`)
	case 1:
		return call("decrement", `{"step": 1}`)
	}
	return "No tools needed."
}

func counters() env.Factory {
	return env.FactoryFunc(func(context.Context) (env.Env, error) { return &counterEnv{}, nil })
}

func scoredCounters() env.Factory {
	return env.FactoryFunc(func(context.Context) (env.Env, error) { return &scoredCounter{}, nil })
}

func snapshot(ps []model.Param) [][]float32 {
	out := make([][]float32, len(ps))
	for i, p := range ps {
		out[i] = slices.Clone(p.Data.F32())
	}
	return out
}

func changed(t *testing.T, before [][]float32, ps []model.Param) bool {
	t.Helper()
	for i, p := range ps {
		if !slices.Equal(before[i], p.Data.F32()) {
			return true
		}
	}
	return false
}

// TestStepEnvOwnedReward is TRL's test_train_with_environment_owned_reward
// and ..._coexists_with_reward_funcs: the env's reward is a column named by
// its type, after the user's functions, weight 1; counters 1, 0, 0 give
// rewards/scoredCounter/mean = 1/3; the step trains.
func TestStepEnvOwnedReward(t *testing.T) {
	tests := []struct {
		name    string
		opts    []Option
		names   []string
		weights []float64
	}{
		{name: "env reward only", opts: []Option{WithEnv(scoredCounters())}, names: []string{"scoredCounter"}, weights: []float64{1}},
		{name: "with a reward function", opts: []Option{WithEnv(scoredCounters()), WithReward("format", 0.5, constant(1))},
			names: []string{"format", "scoredCounter"}, weights: []float64{0.5, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _ := newScripted(t, testConfig(3, 1), threeWay, tt.opts...)
			before := snapshot(tr.Params())
			rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Count: "}})
			require.NoError(t, err)
			assert.Equal(t, tt.names, rep.Scores.Names)
			assert.Equal(t, tt.weights, rep.Scores.Weights)
			require.Len(t, rep.Metrics, 1)
			m := rep.Metrics[0]
			assert.InDelta(t, 1.0/3, m[RewardMeanName("scoredCounter")], 1e-12)
			assert.InDelta(t, 2.0/3, m[MetricToolsCallFrequency], 1e-12)
			assert.InDelta(t, 0.5, m[MetricToolsFailureFrequency], 1e-12)
			assert.Equal(t, 1, tr.State().GlobalStep)
			assert.Equal(t, 1, tr.State().Generation)
			assert.True(t, changed(t, before, tr.Params()), "the step updated the weights")
			for _, r := range rep.Rollouts {
				assert.Nil(t, r.Env, "envs went back to the pool")
			}
		})
	}
}

// TestStepRewardWeights is TRL's test_reward_metric_reflects_reward_weights:
// constant rewards 1 and 0 with weights 0.7 and 0.3 log reward 0.7.
func TestStepRewardWeights(t *testing.T) {
	tr, _ := newScripted(t, testConfig(2, 1), threeWay, WithEnv(counters()),
		WithReward("one", 0.7, constant(1)), WithReward("zero", 0.3, constant(0)))
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
	require.NoError(t, err)
	m := rep.Metrics[0]
	assert.InDelta(t, 0.7, m[MetricReward], 1e-12)
	assert.InDelta(t, 1, m[RewardMeanName("one")], 1e-12)
	assert.InDelta(t, 0, m[RewardMeanName("zero")], 1e-12)
	assert.InDelta(t, 1, m[MetricFracRewardZeroStd], 1e-12, "constant rewards: every group has zero std")
	for _, a := range rep.Advantages {
		assert.Zero(t, a)
	}
}

// TestStepRewardSources covers None rewards, bad rewards and the extra
// columns a reward function sees.
func TestStepRewardSources(t *testing.T) {
	ctx := context.Background()
	t.Run("none next to a valid function trains", func(t *testing.T) {
		none := func(context.Context, *Rollout) (float64, error) { return 0, ErrNoScore }
		tr, _ := newScripted(t, testConfig(2, 1), threeWay, WithEnv(counters()), WithReward("none", 1, none), WithReward("one", 1, constant(1)))
		rep, err := tr.Step(ctx, []env.Row{{"prompt": "Go: "}})
		require.NoError(t, err)
		assert.True(t, math.IsNaN(rep.Metrics[0][RewardMeanName("none")]))
		assert.InDelta(t, 1, rep.Metrics[0][MetricReward], 1e-12)
	})
	t.Run("all none: advantage 0, reward NaN", func(t *testing.T) {
		none := func(context.Context, *Rollout) (float64, error) { return 0, ErrNoScore }
		tr, _ := newScripted(t, testConfig(2, 1), threeWay, WithEnv(counters()), WithReward("none", 1, none))
		rep, err := tr.Step(ctx, []env.Row{{"prompt": "Go: "}})
		require.NoError(t, err)
		for i := range rep.Rollouts {
			assert.True(t, math.IsNaN(rep.Rewards[i]))
			assert.Zero(t, rep.Advantages[i])
		}
	})
	for _, bad := range []struct {
		name string
		fn   RewardFunc
		want string
	}{
		{"nan", func(context.Context, *Rollout) (float64, error) { return math.NaN(), nil }, "NaN"},
		{"inf", func(context.Context, *Rollout) (float64, error) { return math.Inf(1), nil }, "Inf"},
		{"error", func(context.Context, *Rollout) (float64, error) { return 0, errors.New("judge offline") }, "judge offline"},
	} {
		t.Run(bad.name+" stops the step", func(t *testing.T) {
			tr, _ := newScripted(t, testConfig(2, 1), threeWay, WithEnv(counters()), WithReward("judge", 1, bad.fn))
			before := snapshot(tr.Params())
			_, err := tr.Step(ctx, []env.Row{{"prompt": "Go: ", "id": 7}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "judge")
			assert.Contains(t, err.Error(), bad.want)
			assert.Contains(t, err.Error(), "id:7", "the row is named")
			assert.False(t, changed(t, before, tr.Params()))
			assert.Zero(t, tr.State().GlobalStep)
		})
	}
	t.Run("extra columns reach rewards and Reset", func(t *testing.T) {
		var seen []any
		fn := func(_ context.Context, r *Rollout) (float64, error) {
			seen = append(seen, r.Row["answer"])
			return 1, nil
		}
		tr, _ := newScripted(t, testConfig(2, 1), threeWay, WithEnv(counters()), WithReward("answer", 1, fn))
		rep, err := tr.Step(ctx, []env.Row{{"prompt": "Go: ", "answer": 42}})
		require.NoError(t, err)
		assert.Equal(t, []any{42, 42}, seen)
		assert.Equal(t, 42, rep.Rollouts[0].Row["answer"])
	})
}

// TestStepMultipleEnvironments is TRL's test_train_with_multiple_environments
// and ..._unknown_environment_raises and ..._environment_owned_reward_mixed:
// each env offers only its tools, "environment" is not passed to Reset, the
// pools start with one instance each, unknown names are errors, and only the
// env type that owns a reward gets a column (NaN for the others' rows).
func TestStepMultipleEnvironments(t *testing.T) {
	var mu sync.Mutex
	var made []*scoredCounter
	fs := map[string]env.Factory{
		"counter": env.FactoryFunc(func(context.Context) (env.Env, error) {
			e := &scoredCounter{}
			mu.Lock()
			made = append(made, e)
			mu.Unlock()
			return e, nil
		}),
		"echo": env.FactoryFunc(func(context.Context) (env.Env, error) { return &echoEnv{}, nil }),
	}
	// Rollouts 0, 1 are the counter prompt's, 2, 3 the echo prompt's.
	script := func(r, turn int) string {
		switch {
		case turn > 0:
			return "Done."
		case r == 0:
			return call("increment", `{"step": 1}`)
		case r == 2:
			return call("shout", `{"text": "hi"}`)
		}
		return "Nothing."
	}
	tr, _ := newScripted(t, testConfig(2, 2), script, WithEnvs(fs))
	for _, name := range []string{"counter", "echo"} {
		p, ok := tr.router.Pool(name)
		require.True(t, ok)
		assert.Equal(t, 1, p.Size(), "one probe instance per env after NewTrainer")
	}
	rep, err := tr.Step(context.Background(), []env.Row{
		{"prompt": "Count: ", env.EnvironmentColumn: "counter"},
		{"prompt": "Shout: ", env.EnvironmentColumn: "echo"},
	})
	require.NoError(t, err)
	m := rep.Metrics[0]
	assert.InDelta(t, 0.5, m[MetricToolsCallFrequency], 1e-12)
	assert.InDelta(t, 0, m[MetricToolsFailureFrequency], 1e-12)
	assert.Equal(t, []string{"scoredCounter"}, rep.Scores.Names, "one env reward column")
	assert.Equal(t, []float64{1, 0}, rep.Scores.Scores[0][:2])
	assert.True(t, math.IsNaN(rep.Scores.Scores[0][2]) && math.IsNaN(rep.Scores.Scores[0][3]), "echo rows have no env reward")
	assert.Equal(t, "counter", rep.Rollouts[0].EnvName)
	assert.Equal(t, "echo", rep.Rollouts[2].EnvName)
	assert.Contains(t, rep.Rollouts[2].Completion[1].Content, "hi!")
	// Only the row's env's tools were rendered.
	tok := tr.chat.Tokenizer()
	assert.Contains(t, tok.Decode(rep.Rollouts[0].PromptIDs, false), `"increment"`)
	assert.NotContains(t, tok.Decode(rep.Rollouts[0].PromptIDs, false), `"shout"`)
	assert.Contains(t, tok.Decode(rep.Rollouts[2].PromptIDs, false), `"shout"`)
	mu.Lock()
	for _, e := range made {
		for _, row := range e.resets {
			assert.NotContains(t, row, env.EnvironmentColumn)
			assert.Equal(t, "Count: ", row["prompt"])
		}
	}
	mu.Unlock()

	_, err = tr.Step(context.Background(), []env.Row{{env.EnvironmentColumn: "chess"}, {env.EnvironmentColumn: "echo"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not among the environments")
	assert.Contains(t, err.Error(), "counter, echo")
}

// TestTrainerErrors is TRL's test_no_reward_source_raises and the dataset
// requirements, plus options misuse.
func TestTrainerErrors(t *testing.T) {
	m, tok := tinyModel(t, 1)
	cfg := testConfig(2, 1)
	tests := []struct {
		name string
		cfg  func(Config) Config
		opts []Option
		want string
	}{
		{name: "no reward source", opts: []Option{WithEnv(counters())}, want: "no reward source"},
		{name: "two env options", opts: []Option{WithEnv(counters()), WithEnvs(map[string]env.Factory{"a": counters()})}, want: "already set"},
		{name: "rollout func with env", opts: []Option{WithEnv(counters()), WithReward("r", 1, constant(1)), WithRolloutFunc(func(context.Context, []env.Row) ([]Generated, error) { return nil, nil })}, want: "cannot be combined"},
		{name: "duplicate reward", opts: []Option{WithReward("r", 1, constant(1)), WithReward("r", 1, constant(1))}, want: "given twice"},
		{name: "factory fails", opts: []Option{WithEnv(env.FactoryFunc(func(context.Context) (env.Env, error) { return nil, errors.New("no docker") })), WithReward("r", 1, constant(1))}, want: "no docker"},
		{name: "invalid config", cfg: func(c Config) Config { c.NumGenerations = 1; return c }, opts: []Option{WithReward("r", 1, constant(1))}, want: "NumGenerations"},
		{name: "beta with full fine-tuning", cfg: func(c Config) Config { c.Beta = 0.1; return c }, opts: []Option{WithReward("r", 1, constant(1))}, want: "LoRA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			if tt.cfg != nil {
				c = tt.cfg(c)
			}
			_, err := NewTrainer(m, tok, c, tt.opts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	t.Run("train without dataset", func(t *testing.T) {
		tr, _ := newScripted(t, cfg, threeWay, WithEnvs(map[string]env.Factory{"a": scoredCounters(), "b": scoredCounters()}))
		assert.ErrorContains(t, tr.Train(context.Background(), nil), "requires a dataset")
		c := cfg
		c.MaxSteps = 0
		tr2, _ := newScripted(t, c, threeWay, WithEnv(scoredCounters()))
		assert.ErrorContains(t, tr2.Train(context.Background(), nil), "MaxSteps")
		tr3, _ := newScripted(t, cfg, threeWay, WithReward("r", 1, constant(1)))
		assert.ErrorContains(t, tr3.Train(context.Background(), nil), "dataset is required") // no env to give the prompts
	})
	t.Run("env-owned data trains", func(t *testing.T) {
		c := cfg
		c.MaxSteps = 2
		tr, _ := newScripted(t, c, threeWay, WithEnv(scoredCounters()))
		require.NoError(t, tr.Train(context.Background(), nil))
		assert.Equal(t, 2, tr.State().GlobalStep)
	})
	t.Run("wrong row count", func(t *testing.T) {
		tr, _ := newScripted(t, cfg, threeWay)
		_, err := tr.Step(context.Background(), []env.Row{{}, {}})
		assert.ErrorContains(t, err, "takes 1 prompts")
	})
}

// TestStepMaskTruncatedCompletions is TRL's
// test_train_with_mask_truncated_completions_all_masked: every completion
// runs out of budget, so with the option on the loss is 0 and the weights
// do not move.
func TestStepMaskTruncatedCompletions(t *testing.T) {
	cfg := testConfig(2, 1)
	cfg.MaskTruncatedCompletions = true
	cfg.MaxCompletionLength = 6
	long := func(int, int) string { return "this answer goes on and on and on" }
	tr, _ := newScripted(t, cfg, long)
	before := snapshot(tr.Params())
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
	require.NoError(t, err)
	for _, r := range rep.Rollouts {
		require.True(t, r.Truncated)
	}
	assert.Zero(t, rep.Metrics[0][MetricLoss])
	assert.InDelta(t, 1, rep.Metrics[0][MetricCompletionsClippedRatio], 1e-12)
	assert.False(t, changed(t, before, tr.Params()), "parameters unchanged")

	// Without the option the same batch trains (rewards differ to give an advantage).
	cfg.MaskTruncatedCompletions = false
	i := 0
	varying := func(context.Context, *Rollout) (float64, error) { i++; return float64(i), nil }
	tr2, _ := newScripted(t, cfg, long, WithEnv(counters()), WithReward("v", 1, varying))
	before = snapshot(tr2.Params())
	_, err = tr2.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
	require.NoError(t, err)
	assert.True(t, changed(t, before, tr2.Params()))
}

// TestStepLayout is TRL's test_prepare_input_called_with_correct_data:
// B = 6, StepsPerGeneration = 4, G = 4, NumIterations = 2: a generation is
// 6 prompts × 4 rollouts, cut into 4 micro-batches of 6, each presented
// twice: 8 optimizer steps per generation. Real sampling here: the
// sampling log-probs serve as old log-probs (the policy moves within the
// generation) and agree with the training forward's.
func TestStepLayout(t *testing.T) {
	cfg := testConfig(4, 6)
	cfg.PerDeviceTrainBatchSize = 6
	cfg.StepsPerGeneration = 4
	cfg.NumIterations = 2
	cfg.MaxCompletionLength = 6
	cfg.MaxSteps = 8
	m, tok := tinyModel(t, 3)
	i := 0
	varying := func(context.Context, *Rollout) (float64, error) { i++; return float64(i % 5), nil }
	tr, err := NewTrainer(m, tok, cfg, WithReward("v", 1, varying))
	require.NoError(t, err)
	defer tr.Close()
	l := cfg.Layout()
	require.Equal(t, 6, l.Prompts)
	require.Equal(t, 8, l.OptimizerSteps())
	require.True(t, l.NeedsOldLogProbs())

	rows := make([]env.Row, 6)
	for k := range rows {
		rows[k] = env.Row{"prompt": fmt.Sprintf("Question %d?", k)}
	}
	var steps []int
	tr.o.callbacks = append(tr.o.callbacks, func(step int, _ Metrics) error { steps = append(steps, step); return nil })
	rep, err := tr.Step(context.Background(), rows)
	require.NoError(t, err)
	require.Len(t, rep.Rollouts, 24)
	for k, r := range rep.Rollouts {
		assert.Equal(t, k/4, r.Group, "rollout %d", k)
		assert.Equal(t, rows[k/4]["prompt"], r.Row["prompt"])
	}
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8}, steps)
	assert.Equal(t, 8, tr.State().GlobalStep)

	b, err := tr.prepare(context.Background(), &scoredGen{rs: rep.Rollouts, adv: Advantages{A: rep.Advantages, Loss: repeat(true, 24)}}, 0, Metrics{})
	require.NoError(t, err)
	mbs := tr.microBatches(b)
	require.Len(t, mbs, 4)
	var all []int
	for _, mb := range mbs {
		assert.Len(t, mb, 6)
		all = append(all, mb...)
	}
	slices.Sort(all)
	for k := range all {
		assert.Equal(t, k, all[k], "each rollout in exactly one micro-batch")
	}

	// The first optimizer step trains on the policy that sampled: its
	// sampling log-probs match the training forward's.
	first := rep.Metrics[0]
	assert.Less(t, first[MetricSamplingLogpDiffMax], 1e-3, "batched decoding and the training forward agree")
	assert.InDelta(t, 1, first[MetricSamplingISRatioMean], 1e-3)
}

// TestStepRolloutFunc is TRL's TestGRPORolloutDispatch: a rollout function
// replaces generation, its env mask becomes the loss mask, and what it
// returns is checked.
func TestStepRolloutFunc(t *testing.T) {
	m, tok := tinyModel(t, 1)
	cfg := testConfig(2, 1)
	// The function reports log-probs of 0 (probability 1), which the
	// sampling correction would rightly treat as a policy far from ours.
	cfg.ISCorrection = ISCorrectionNone
	eos := tok.EOS()
	var got []env.Row
	fn := func(_ context.Context, rows []env.Row) ([]Generated, error) {
		got = rows
		out := make([]Generated, len(rows))
		for i := range out {
			out[i] = Generated{
				PromptIDs:     tok.Encode("Say hi"),
				CompletionIDs: append(tok.Encode("hi there"), eos),
				Extra:         map[string]any{"turns": i},
			}
			n := len(out[i].CompletionIDs)
			out[i].LogProbs = make([]float32, n)
			out[i].Mask = repeat(true, n)
			out[i].Mask[0] = false // an env token
		}
		return out, nil
	}
	var extras []any
	rf := func(_ context.Context, r *Rollout) (float64, error) {
		extras = append(extras, r.Extra["turns"])
		return float64(r.Extra["turns"].(int)), nil
	}
	tr, err := NewTrainer(m, tok, cfg, WithRolloutFunc(fn), WithReward("turns", 1, rf))
	require.NoError(t, err)
	defer tr.Close()
	before := snapshot(tr.Params())
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "p"}})
	require.NoError(t, err)
	assert.Equal(t, []env.Row{{"prompt": "p"}, {"prompt": "p"}}, got, "each prompt row G times")
	assert.Equal(t, []any{0, 1}, extras)
	assert.False(t, rep.Rollouts[0].Mask[0])
	assert.False(t, rep.Rollouts[0].Truncated)
	assert.True(t, changed(t, before, tr.Params()))

	bad := func(_ context.Context, rows []env.Row) ([]Generated, error) {
		return []Generated{{PromptIDs: []int32{1}, CompletionIDs: []int32{2, 3}, LogProbs: []float32{0}}, {}}, nil
	}
	tr2, err := NewTrainer(m, tok, cfg, WithRolloutFunc(bad), WithReward("r", 1, constant(1)))
	require.NoError(t, err)
	_, err = tr2.Step(context.Background(), []env.Row{{}})
	assert.ErrorContains(t, err, "1 log-probs for 2 completion ids")
	tr2.Close()

	nan := func(_ context.Context, rows []env.Row) ([]Generated, error) {
		out := make([]Generated, len(rows))
		for i := range out {
			out[i] = Generated{PromptIDs: []int32{1}, CompletionIDs: []int32{2, eos}, LogProbs: []float32{-1, float32(math.NaN())}}
		}
		return out, nil
	}
	tr3, err := NewTrainer(m, tok, cfg, WithRolloutFunc(nan), WithReward("r", 1, constant(1)))
	require.NoError(t, err)
	defer tr3.Close()
	_, err = tr3.Step(context.Background(), []env.Row{{}})
	assert.ErrorContains(t, err, "rollout 0 has log-prob NaN at completion token 1")
}

// TestStepCancel: a cancelled context stops the step before any update.
func TestStepCancel(t *testing.T) {
	tr, _ := newScripted(t, testConfig(2, 1), threeWay)
	before := snapshot(tr.Params())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tr.Step(ctx, []env.Row{{"prompt": "Go: "}})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, TrainerState{}, tr.State())
	assert.False(t, changed(t, before, tr.Params()))
	// The trainer is usable afterwards.
	_, err = tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
	require.NoError(t, err)
	assert.Equal(t, 1, tr.State().GlobalStep)
}

// TestEvaluate plays greedily without training and reports eval/ metrics,
// keeping the envs until Release.
func TestEvaluate(t *testing.T) {
	tr, _ := newScripted(t, testConfig(3, 1), threeWay, WithEnv(scoredCounters()))
	before := snapshot(tr.Params())
	rep, err := tr.Evaluate(context.Background(), []env.Row{{"prompt": "Go: "}, {"prompt": "Again: "}}, EvalOptions{NumGenerations: 3, Greedy: true})
	require.NoError(t, err)
	require.Len(t, rep.Rollouts, 6)
	assert.InDelta(t, 1.0/3, rep.Metrics[EvalPrefix+MetricReward], 1e-12)
	assert.InDelta(t, 2.0/3, rep.Metrics[EvalPrefix+MetricToolsCallFrequency], 1e-12)
	assert.Equal(t, 1, rep.Rollouts[0].Env.(*scoredCounter).n)
	rep.Release()
	assert.Nil(t, rep.Rollouts[0].Env)
	assert.False(t, changed(t, before, tr.Params()))
	assert.Zero(t, tr.State().GlobalStep)
}

// TestStepDirection checks the sign of the whole update: one step raises
// the log-probability of the rewarded completion and lowers the other's,
// for every loss type.
func TestStepDirection(t *testing.T) {
	for _, lt := range []LossType{LossDAPO, LossGRPO, LossBNPO, LossDrGRPO} {
		t.Run(string(lt), func(t *testing.T) {
			cfg := testConfig(2, 1)
			cfg.LossType = lt
			cfg.LearningRate = 1e-3
			answers := []string{"Yes, seven.", "No idea at all."}
			script := func(r, _ int) string { return answers[r%2] }
			good := func(_ context.Context, r *Rollout) (float64, error) {
				if r.Completion[0].Content == answers[0] {
					return 1, nil
				}
				return 0, nil
			}
			tr, _ := newScripted(t, cfg, script, WithReward("good", 1, good))
			ctx := context.Background()
			gen := generateOnce(t, tr, []env.Row{{"prompt": "Answer: "}})
			seqs := make([]trainSeq, 2)
			for k, r := range gen.rollouts {
				seqs[k] = trainSeq{ids: slices.Concat(r.PromptIDs, r.CompletionIDs), start: len(r.PromptIDs), mask: r.Mask}
			}
			sum := func() [2]float64 {
				lp, err := tr.pol.logProbs(ctx, seqs, true)
				require.NoError(t, err)
				var s [2]float64
				for k := range lp {
					for _, v := range lp[k] {
						s[k] += float64(v)
					}
				}
				return s
			}
			before := sum()
			rep, err := tr.Step(ctx, []env.Row{{"prompt": "Answer: "}})
			require.NoError(t, err)
			require.Equal(t, answers[0], rep.Rollouts[0].Completion[0].Content)
			require.Greater(t, rep.Advantages[0], 0.0)
			after := sum()
			assert.Greater(t, after[0], before[0], "the rewarded completion became more likely")
			assert.Less(t, after[1], before[1], "the other became less likely")
		})
	}
}

// TestStepCancelDuringTools: cancelling while rollouts wait on slow tools
// stops the step promptly, leaves the weights and state as they were, and
// the trainer steps normally afterwards.
func TestStepCancelDuringTools(t *testing.T) {
	f := env.FactoryFunc(func(context.Context) (env.Env, error) { return &slowEnv{delay: 10 * time.Second}, nil })
	script := func(_, turn int) string {
		if turn == 0 {
			return call("wait", `{}`)
		}
		return "Done."
	}
	tr, _ := newScripted(t, testConfig(2, 1), script, WithEnv(f), WithReward("one", 1, constant(1)))
	before := snapshot(tr.Params())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := tr.Step(ctx, []env.Row{{}})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(begin), 3*time.Second, "the step did not wait for the tools")
	assert.Equal(t, TrainerState{}, tr.State())
	assert.False(t, changed(t, before, tr.Params()))

	// The cancelled step's envs were discarded, not leaked into the pool:
	// a step without tool calls runs on fresh ones.
	tr.eng.decoder = func(sampling, []int32) turnDecoder {
		_, f := scripted(tr.chat.Tokenizer(), func(int, int) string { return "Hi." })
		return f(sampling{}, nil)
	}
	_, err = tr.Step(context.Background(), []env.Row{{}})
	require.NoError(t, err)
	assert.Equal(t, 1, tr.State().GlobalStep)
}

// TestStepCancelMidGeneration cancels the context after the first of the
// two optimizer steps a generation feeds (NumIterations 2). Stopping there
// would leave the weights one step into a generation the state does not
// count, which no checkpoint could resume bit for bit; the generation is
// finished instead, and the next Step sees the cancellation.
func TestStepCancelMidGeneration(t *testing.T) {
	cfg := testConfig(2, 1)
	cfg.NumIterations = 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, tok := tinyModel(t, 1)
	tr, err := NewTrainer(m, tok, cfg, WithEnv(counters()), WithReward("one", 1, constant(1)),
		WithCallback(func(int, Metrics) error { cancel(); return nil }))
	require.NoError(t, err)
	t.Cleanup(func() { tr.Close() })
	_, f := scripted(tok, threeWay)
	tr.eng.decoder = f

	rep, err := tr.Step(ctx, []env.Row{{"prompt": "Go: "}})
	require.NoError(t, err)
	assert.Len(t, rep.Metrics, 2)
	st := tr.State()
	assert.Equal(t, 2, st.GlobalStep)
	assert.Equal(t, 1, st.Generation)
	_, err = tr.Step(ctx, []env.Row{{"prompt": "Go: "}})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, st, tr.State())
}

// TestStepPastMaxSteps: once the run has taken its MaxSteps optimizer
// steps, Step says so instead of generating a batch it cannot learn from.
func TestStepPastMaxSteps(t *testing.T) {
	cfg := testConfig(2, 1)
	cfg.MaxSteps = 1
	tr, _ := newScripted(t, cfg, threeWay)
	_, err := tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
	require.NoError(t, err)
	st := tr.State()
	_, err = tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
	assert.ErrorContains(t, err, "has taken its 1 optimizer steps")
	assert.Equal(t, st, tr.State())
}

// lostScored owns its reward but loses its episode when asked for the
// reward of one that called a tool: an env failure at scoring time.
type lostScored struct{ counterEnv }

func (c *lostScored) Increment(ctx context.Context, a incrementArgs) (string, error) {
	return c.counterEnv.Increment(ctx, a)
}

func (c *lostScored) Reward(context.Context) (float64, error) {
	if c.n != 0 {
		return 0, errors.Join(ErrEnvFailed, errors.New("session gone"))
	}
	return 1, nil
}

// TestStepEnvFailsAtScoring: an environment that fails while giving its
// reward (a lost session) fails that rollout, as a failure during the
// rollout does: it is left out of the loss and its group's baseline and
// counted, and the step goes on. Any other reward error stops the step.
func TestStepEnvFailsAtScoring(t *testing.T) {
	lost := env.FactoryFunc(func(context.Context) (env.Env, error) { return &lostScored{}, nil })
	tr, _ := newScripted(t, testConfig(3, 1), threeWay, WithEnv(lost), WithReward("one", 1, constant(1)))
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Count: "}})
	require.NoError(t, err)
	require.Error(t, rep.Rollouts[0].Err, "rollout 0 incremented the counter")
	assert.ErrorIs(t, rep.Rollouts[0].Err, ErrEnvFailed)
	assert.NoError(t, rep.Rollouts[1].Err)
	assert.NoError(t, rep.Rollouts[2].Err)
	assert.True(t, math.IsNaN(rep.Rewards[0]))
	assert.Equal(t, 0.0, rep.Advantages[0])
	require.Len(t, rep.Metrics, 1)
	assert.Equal(t, 1.0, rep.Metrics[0][MetricRolloutsFailed])
}

// TestEvaluateDrawsFollowState: Evaluate's draws derive from the state, so
// a trainer moved to another's state (as Resume does) samples what the
// other samples next.
func TestEvaluateDrawsFollowState(t *testing.T) {
	cfg := testConfig(2, 1)
	cfg.MaxCompletionLength = 16
	newTr := func() *Trainer {
		m, tok := tinyModel(t, 1)
		tr, err := NewTrainer(m, tok, cfg, WithEnv(counters()), WithReward("one", 1, constant(1)))
		require.NoError(t, err)
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	ids := func(rep *EvalReport) [][]int32 {
		var out [][]int32
		for _, r := range rep.Rollouts {
			out = append(out, r.CompletionIDs)
		}
		rep.Release()
		return out
	}
	ctx := context.Background()
	rows := []env.Row{{"prompt": "Go: "}}
	a := newTr()
	rep, err := a.Evaluate(ctx, rows, EvalOptions{})
	require.NoError(t, err)
	first := ids(rep)
	st := a.State()
	rep, err = a.Evaluate(ctx, rows, EvalOptions{})
	require.NoError(t, err)
	second := ids(rep)
	require.NotEqual(t, first, second, "successive evaluations draw anew")

	b := newTr()
	require.NoError(t, b.SetState(st))
	rep, err = b.Evaluate(ctx, rows, EvalOptions{})
	require.NoError(t, err)
	assert.Equal(t, second, ids(rep))
}
