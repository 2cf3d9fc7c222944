package warmstart

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/grpo"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// adder is a two-tool env: add to a total, then submit it; the reward is
// 1 when the submitted total is the row's target.
type adder struct {
	target, total int
	submitted     bool
}

type addArgs struct {
	Amount int `json:"amount" desc:"how much to add, 1 to 9"`
}

func (a *adder) Reset(ctx context.Context, row env.Row) (string, error) {
	t, _, err := row.Int("target")
	a.target, a.total, a.submitted = int(t), 0, false
	return fmt.Sprintf("Reach %d: add, then submit.", t), err
}

func (a *adder) Add(ctx context.Context, x addArgs) (string, error) {
	if x.Amount < 1 || x.Amount > 9 {
		return "", fmt.Errorf("amount %d is not 1 to 9", x.Amount)
	}
	a.total += x.Amount
	return fmt.Sprint(a.total), nil
}

func (a *adder) Submit(ctx context.Context) (string, error) {
	if a.submitted {
		return "", errors.New("already submitted")
	}
	a.submitted = true
	if a.total == a.target {
		return "correct", nil
	}
	return "wrong", nil
}

func (a *adder) ToolDescriptions() map[string]string {
	return map[string]string{"Add": "Add an amount to the total.", "Submit": "Submit the total."}
}

func (a *adder) Reward(ctx context.Context) (float64, error) {
	if a.submitted && a.total == a.target {
		return 1, nil
	}
	return 0, nil
}

func adders() env.Factory {
	return env.FactoryFunc(func(context.Context) (env.Env, error) { return &adder{}, nil })
}

// expert adds the target in one call, submits, and says so.
func expert(ctx context.Context, r *grpo.Rollout) (tokenizer.Message, error) {
	a := r.Env.(*adder)
	switch {
	case a.total < a.target:
		return grpo.CallTurn("add", fmt.Sprintf(`{"amount": %d}`, a.target-a.total)), nil
	case !a.submitted:
		return grpo.CallTurn("submit", `{}`), nil
	}
	return grpo.TextTurn("Reached it."), nil
}

func rows(targets ...int) []env.Row {
	out := make([]env.Row, len(targets))
	for i, t := range targets {
		out[i] = env.Row{"target": int64(t)}
	}
	return out
}

func testConfig() grpo.Config {
	cfg := grpo.DefaultConfig()
	cfg.NumGenerations, cfg.PerDeviceTrainBatchSize, cfg.MaxSteps = 4, 8, 1
	cfg.MaxCompletionLength, cfg.EnableThinking = 96, tokenizer.ThinkingOff
	cfg.Temperature, cfg.TopK = 0.8, 10
	return cfg
}

func TestLoadEmbedded(t *testing.T) {
	p, err := Load(Options{Hidden: 32, Seed: 3}, nil)
	require.NoError(t, err)
	assert.True(t, p.Embedded())
	assert.Equal(t, 32, p.Model.Config.HiddenSize)
	assert.Equal(t, tokenizer.TinyVocabSize, p.Model.Config.VocabSize, "sized to the embedded tokenizer")
	assert.Contains(t, p.Description, "random weights (seed 3)")
	out := filepath.Join(t.TempDir(), "saved")
	require.NoError(t, p.Save(out))
	tmp := p.Dir
	p.Close()
	assert.NoDirExists(t, tmp, "Close removes the embedded model's folder")

	back, err := Load(Options{Dir: out}, cpu.New(1))
	require.NoError(t, err)
	defer back.Close()
	assert.False(t, back.Embedded())
	assert.Equal(t, 32, back.Model.Config.HiddenSize)
	assert.Equal(t, tokenizer.TinyVocabSize, back.Tokenizer.VocabSize())
}

// TestLoadErrors: a -model that is not a checkpoint is reported as such,
// in terms of what a Hugging Face folder holds.
func TestLoadErrors(t *testing.T) {
	p, err := Load(Options{Hidden: 32}, cpu.New(1))
	require.NoError(t, err)
	noTok := filepath.Join(t.TempDir(), "no-tokenizer")
	require.NoError(t, model.SaveCheckpoint(noTok, p.Model))
	p.Close()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"missing folder", Options{Dir: filepath.Join(t.TempDir(), "qwen3-0.6b")}, "qwen3-0.6b does not exist (want a Hugging Face Qwen3 folder"},
		{"empty folder", Options{Dir: t.TempDir()}, "has neither config.json nor *.safetensors"},
		{"no tokenizer.json", Options{Dir: noTok}, "has no tokenizer.json"},
		{"odd hidden", Options{Hidden: 40}, "multiple of 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.o, cpu.New(1))
			assert.ErrorContains(t, err, tc.want)
			assert.NotContains(t, err.Error(), "rawConfig")
		})
	}
}

func TestConversations(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	convs, err := Conversations(ctx, adders(), rows(3, 7), expert, grpo.PlayOptions{Config: &cfg})
	require.NoError(t, err)
	require.Len(t, convs, 2)
	c := convs[1]
	require.Len(t, c.Tools, 2)
	assert.Contains(t, string(c.Tools[0]), `"name":"add"`)
	roles := make([]string, len(c.Messages))
	for i, m := range c.Messages {
		roles[i] = m.Role
	}
	assert.Equal(t, []string{"user", "assistant", "tool", "assistant", "tool", "assistant"}, roles)
	assert.Equal(t, "Reach 7: add, then submit.", c.Messages[0].Content)
	assert.Equal(t, `{"amount": 7}`, string(c.Messages[1].ToolCalls[0].Arguments))
	assert.Equal(t, "correct", c.Messages[4].Content)

	// The conversations train: every one encodes under the trainer's template.
	chat, err := tokenizer.NewChat(tokenizer.Tiny())
	require.NoError(t, err)
	for _, c := range convs {
		_, err := grpo.EncodeConversation(chat, c, cfg.EnableThinking)
		require.NoError(t, err)
	}
}

func TestConversationsRefusesWhatWouldTeachFailures(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	tooMuch := func(ctx context.Context, r *grpo.Rollout) (tokenizer.Message, error) {
		if r.ToolCalls == 0 {
			return grpo.CallTurn("add", `{"amount": 12}`), nil
		}
		return grpo.TextTurn("Oops."), nil
	}
	_, err := Conversations(ctx, adders(), rows(12), tooMuch, grpo.PlayOptions{Config: &cfg})
	assert.ErrorContains(t, err, "1 of the script's 1 tool calls failed")
	assert.ErrorContains(t, err, "amount 12 is not 1 to 9")

	cfg.MaxCompletionLength = 8
	_, err = Conversations(ctx, adders(), rows(3), expert, grpo.PlayOptions{Config: &cfg})
	assert.ErrorContains(t, err, "longer than MaxCompletionLength")
}

// TestReportVerdicts: the two ways GRPO has nothing to learn, and the
// advice for each.
func TestReportVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Report
		want []string // "" = no problem
	}{
		{"varied, working calls", Report{Rollouts: 8, Working: 5, NoCall: 3, FracZeroStd: 0.5, MaxReward: 1}, nil},
		{"no working call", Report{Rollouts: 8, NoCall: 6, CallsFailed: 2, FracZeroStd: 0.5, MaxReward: 0.2}, []string{"no rollout made a tool call that worked", "warm start longer"}},
		{"all win", Report{Rollouts: 8, Working: 8, FracZeroStd: 1, MinReward: 1, MaxReward: 1}, []string{"all scored the same", "warm start shorter"}},
		{"all lose", Report{Rollouts: 8, Working: 8, FracZeroStd: 1}, []string{"all scored the same", "warm start longer"}},
		{"every env failed", Report{Failed: 8}, []string{"all 8 rollouts failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.problem()
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNoSignal)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// TestCheckRandomModel: a model with random weights cannot call a tool,
// and Check says so.
func TestCheckRandomModel(t *testing.T) {
	ctx := context.Background()
	p, err := Load(Options{Hidden: 32, Seed: 1}, cpu.New(2))
	require.NoError(t, err)
	defer p.Close()
	tr, err := grpo.NewTrainer(p.Model, p.Tokenizer, testConfig(), grpo.WithEnv(adders()))
	require.NoError(t, err)
	defer tr.Close()
	rep, err := Check(ctx, tr, rows(3, 5), CheckOptions{})
	require.ErrorIs(t, err, ErrNoSignal)
	assert.ErrorContains(t, err, "no rollout made a tool call that worked")
	assert.Equal(t, 8, rep.Rollouts)
	assert.Zero(t, rep.Working)
	assert.Equal(t, 0.0, rep.MaxReward)
	assert.Contains(t, rep.String(), "8 rollouts: 0 with a working tool call")
}

// TestWarmStartGivesGRPOSignal is the package's promise end to end: the
// embedded model, a scripted warm start on the env, and Check passing.
func TestWarmStartGivesGRPOSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	p, err := Load(Options{Seed: 1}, cpu.New(2))
	require.NoError(t, err)
	defer p.Close()
	cfg := testConfig()
	convs, err := Conversations(ctx, adders(), rows(1, 2, 3, 4, 5, 6, 7, 8, 9), expert, grpo.PlayOptions{Config: &cfg})
	require.NoError(t, err)
	sc := grpo.DefaultSFTConfig()
	// 40 steps leave every sampled call failing (Check says so); 80 make
	// the calls work while the amounts still vary.
	sc.MaxSteps, sc.LearningRate, sc.BatchSize, sc.EnableThinking = 80, 3e-3, 8, cfg.EnableThinking
	_, err = SFT(ctx, p, convs, sc)
	require.NoError(t, err)
	tr, err := grpo.NewTrainer(p.Model, p.Tokenizer, cfg, grpo.WithEnv(adders()))
	require.NoError(t, err)
	defer tr.Close()
	rep, err := Check(ctx, tr, rows(2, 5, 8), CheckOptions{})
	t.Logf("after %d SFT steps: %s", sc.MaxSteps, rep)
	require.NoError(t, err)
	assert.Positive(t, rep.Working)
	assert.Less(t, rep.FracZeroStd, 1.0)
	assert.False(t, math.IsNaN(rep.MeanReward))
}
