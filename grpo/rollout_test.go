package grpo

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/envtest"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// newScripted makes a trainer over a tiny model whose turns come from
// script, with the counter env unless opts give another source.
func newScripted(t *testing.T, cfg Config, script func(rollout, turn int) string, opts ...Option) (*Trainer, *scriptDecoder) {
	t.Helper()
	m, tok := tinyModel(t, 1)
	return newScriptedOn(t, m, tok, cfg, script, opts...)
}

// newScriptedOn is newScripted over the model m.
func newScriptedOn(t *testing.T, m *model.Model, tok *tokenizer.Tokenizer, cfg Config, script func(rollout, turn int) string, opts ...Option) (*Trainer, *scriptDecoder) {
	t.Helper()
	if len(opts) == 0 {
		opts = []Option{WithEnv(env.FactoryFunc(func(context.Context) (env.Env, error) { return &counterEnv{}, nil })), WithReward("one", 1, constant(1))}
	}
	tr, err := NewTrainer(m, tok, cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { tr.Close() })
	d, f := scripted(tok, script)
	tr.eng.decoder = f
	return tr, d
}

func generateOnce(t *testing.T, tr *Trainer, rows []env.Row) *batchOut {
	t.Helper()
	gen, err := tr.generate(context.Background(), rows, tr.layout.G, tr.sampling(), 7)
	require.NoError(t, err)
	t.Cleanup(gen.release)
	return gen
}

// TestRolloutToolFrequencies is TRL's test_train_with_environment_factory:
// a valid call, a call to an unknown tool and plain text; only the two
// calling rows generate again; the env counters end at 1, 0, 0.
func TestRolloutToolFrequencies(t *testing.T) {
	script := func(r, turn int) string {
		if turn > 0 {
			return "Done."
		}
		switch r {
		case 0:
			return call("increment", `{"step": 1}`)
		case 1:
			return call("decrement", `{"step": 1}`)
		}
		return "No tools needed."
	}
	tr, d := newScripted(t, testConfig(3, 1), script)
	gen := generateOnce(t, tr, []env.Row{{"prompt": "Go: "}})
	require.Len(t, gen.rollouts, 3)

	calls, failures := 0, 0
	for i, r := range gen.rollouts {
		require.NoError(t, r.Err)
		calls += r.ToolCalls
		failures += r.ToolFailures
		assert.Equal(t, []int{1, 1, 0}[i], r.ToolCalls, "rollout %d", i)
		assert.Equal(t, 1, r.Attempts)
	}
	total := 0
	for _, n := range d.steps {
		total += n
	}
	assert.Equal(t, 5, total, "a second turn is generated only for the two calling rollouts (steps %v)", d.steps)
	assert.InDelta(t, 2.0/3, float64(calls)/3, 1e-12, "tools/call_frequency")
	assert.InDelta(t, 0.5, float64(failures)/float64(calls), 1e-12, "tools/failure_frequency")
	counters := []int{gen.rollouts[0].Env.(*counterEnv).n, gen.rollouts[1].Env.(*counterEnv).n, gen.rollouts[2].Env.(*counterEnv).n}
	assert.Equal(t, []int{1, 0, 0}, counters)

	m := Metrics{}
	require.NoError(t, ToolStats(m, []int{1, 1, 0}, []int{0, 1, 0}))
	assert.InDelta(t, 2.0/3, m[MetricToolsCallFrequency], 1e-12)
	assert.InDelta(t, 0.5, m[MetricToolsFailureFrequency], 1e-12)

	// The unknown tool's error went back to the model as the tool's response.
	c := gen.rollouts[1].Completion
	require.Len(t, c, 3)
	assert.Equal(t, "tool", c[1].Role)
	assert.Contains(t, c[1].Content, "error")
	assert.Contains(t, c[1].Content, "decrement")
}

// TestRolloutMask checks the token layout of a two-turn rollout: prompt,
// model turn (mask true), tool suffix (mask false, log-prob 0), model turn,
// all by concatenation, and the sequence the model saw is exactly that.
func TestRolloutMask(t *testing.T) {
	script := func(_, turn int) string {
		if turn == 0 {
			return call("increment", `{"step": 2}`)
		}
		return "The count is 2."
	}
	tr, _ := newScripted(t, testConfig(2, 1), script)
	gen := generateOnce(t, tr, []env.Row{{"prompt": "Count: "}})
	chat := tr.chat
	tok := chat.Tokenizer()
	r := gen.rollouts[0]

	opts := tr.cfg.RenderOptions(gen.insts[0].Tools.Schemas())
	prompt, err := chat.RenderIDs([]tokenizer.Message{{Role: "user", Content: "Count: Count up."}}, opts)
	require.NoError(t, err)
	assert.Equal(t, prompt, r.PromptIDs, "the reset observation joins the prompt")

	turn1 := append(tok.Encode(call("increment", `{"step": 2}`)), tok.EOS())
	suffix, err := chat.ToolSuffixIDs([]tokenizer.Message{{Role: "tool", Name: "increment", Content: "2"}}, opts)
	require.NoError(t, err)
	turn2 := append(tok.Encode("The count is 2."), tok.EOS())
	want := slices.Concat(turn1, suffix, turn2)
	assert.Equal(t, want, r.CompletionIDs)
	wantMask := slices.Concat(repeat(true, len(turn1)), repeat(false, len(suffix)), repeat(true, len(turn2)))
	assert.Equal(t, wantMask, r.Mask)
	for i, m := range r.Mask {
		if m {
			assert.Equal(t, float32(-0.5), r.LogProbs[i])
		} else {
			assert.Zero(t, r.LogProbs[i], "tool token %d", i)
		}
	}
	assert.Equal(t, 1, r.ToolCalls)
	assert.False(t, r.Truncated)
	require.Len(t, r.Completion, 3)
	assert.Equal(t, []string{"assistant", "tool", "assistant"}, []string{r.Completion[0].Role, r.Completion[1].Role, r.Completion[2].Role})

	// The whole conversation rendered with the training template is the
	// concatenation: nothing was re-tokenized.
	full, err := chat.RenderIDs(append(slices.Clone(r.Prompt), r.Completion...), tokenizer.RenderOptions{Tools: opts.Tools, EnableThinking: opts.EnableThinking, KeepAllReasoning: true})
	require.NoError(t, err)
	assert.Equal(t, slices.Concat(r.PromptIDs, r.CompletionIDs), append(full, tok.Encode("\n")...)[:len(r.PromptIDs)+len(r.CompletionIDs)])
}

func repeat(v bool, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestRolloutStops covers the loop's stop conditions: the iteration cap
// (0: tools never run), the shared token budget (a tool response that does
// not fit is dropped though the tool ran; a turn cut off is truncated), and
// malformed calls (answered with an error, counted, generated again).
func TestRolloutStops(t *testing.T) {
	always := func(_, turn int) string { return call("increment", `{"step": 1}`) }
	tests := []struct {
		name       string
		mutate     func(*Config)
		script     func(r, turn int) string
		calls      int
		failures   int
		counter    int
		truncated  bool
		turns      int
		lastIsTool bool
	}{
		{name: "cap 0 never runs tools", mutate: func(c *Config) { c.MaxToolCallingIterations = 0 }, script: always, turns: 1},
		// A call turn is 23 tokens, a tool suffix 18 (tiny tokenizer).
		{name: "cap 2", mutate: func(c *Config) { c.MaxToolCallingIterations, c.MaxCompletionLength = 2, 200 }, script: always, calls: 2, counter: 2, turns: 3},
		{name: "budget drops the response that does not fit", mutate: func(c *Config) { c.MaxCompletionLength = 40 }, script: always, calls: 1, counter: 1, turns: 1},
		{name: "budget cuts the next turn", mutate: func(c *Config) { c.MaxCompletionLength = 60 }, script: always, calls: 1, counter: 1, truncated: true, turns: 2},
		{name: "budget cuts a turn", mutate: func(c *Config) { c.MaxCompletionLength = 8 }, script: func(int, int) string { return strings.Repeat("words and more words ", 10) }, truncated: true, turns: 1},
		{name: "cut-off turn", script: func(int, int) string { return "I will call…" }, truncated: true, turns: 1},
		{name: "malformed call is answered and counted", mutate: func(c *Config) { c.MaxToolCallingIterations = 1 },
			script: func(_, turn int) string {
				if turn == 0 {
					return "<tool_call>\n{name: increment}\n</tool_call>"
				}
				return "Sorry."
			}, calls: 1, failures: 1, turns: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(2, 1)
			if tt.mutate != nil {
				tt.mutate(&cfg)
			}
			tr, _ := newScripted(t, cfg, tt.script)
			gen := generateOnce(t, tr, []env.Row{{"prompt": "Go: "}})
			r := gen.rollouts[0]
			require.NoError(t, r.Err)
			assert.Equal(t, tt.calls, r.ToolCalls, "calls")
			assert.Equal(t, tt.failures, r.ToolFailures, "failures")
			assert.Equal(t, tt.counter, r.Env.(*counterEnv).n, "counter")
			assert.Equal(t, tt.truncated, r.Truncated, "truncated")
			assistant := 0
			for _, m := range r.Completion {
				if m.Role == "assistant" {
					assistant++
				}
			}
			assert.Equal(t, tt.turns, assistant, "assistant turns")
			assert.LessOrEqual(t, len(r.CompletionIDs), cfg.MaxCompletionLength, "budget")
			assert.Len(t, r.Mask, len(r.CompletionIDs))
			assert.Len(t, r.LogProbs, len(r.CompletionIDs))
		})
	}
}

// slowEnv's tool sleeps for its delay, or fails the episode.
type slowEnv struct {
	delay time.Duration
	fail  error
}

func (s *slowEnv) Reset(context.Context, env.Row) (string, error) { return "", nil }

func (s *slowEnv) Wait(ctx context.Context) (string, error) {
	if s.fail != nil {
		return "", s.fail
	}
	select {
	case <-time.After(s.delay):
		return "waited", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (s *slowEnv) ToolDescriptions() map[string]string {
	return map[string]string{"Wait": "Waits."}
}

// TestRolloutSlowEnvDelaysOnlyItself: rollout 0's tool takes long; the
// others run their tools concurrently and keep generating meanwhile, so
// they finish their turns before it answers.
func TestRolloutSlowEnvDelaysOnlyItself(t *testing.T) {
	f := env.FactoryFunc(func(context.Context) (env.Env, error) { return &slowEnv{delay: time.Millisecond}, nil })
	script := func(r, turn int) string {
		if turn < 3 {
			return call("wait", `{}`)
		}
		return "Done."
	}
	cfg := testConfig(4, 1)
	tr, d := newScripted(t, cfg, script, WithEnv(f), WithReward("one", 1, constant(1)))
	// Make the probe instance (the first rollout to start gets it) slow.
	inst, err := tr.pools.(*env.Pool).Acquire(context.Background())
	require.NoError(t, err)
	inst.Env.(*slowEnv).delay = 300 * time.Millisecond
	inst.Release()

	begin := time.Now()
	gen := generateOnce(t, tr, []env.Row{{}})
	elapsed := time.Since(begin)
	for _, r := range gen.rollouts {
		require.NoError(t, r.Err)
		assert.Equal(t, 3, r.ToolCalls)
	}
	// Serial tool rounds would take 3 × 300 ms for rollout 0 alone plus
	// the others'; concurrent ones take about 900 ms in all.
	assert.Less(t, elapsed, 2*time.Second)
	// The fast rollouts' later turns were decoded while the slow one
	// waited: in lockstep there would be 4 steps of 4 requests.
	assert.Greater(t, len(d.steps), 4, "steps %v", d.steps)
}

// TestRolloutEnvFailureReplay: a tool failing with ErrEnvFailed replays the
// rollout on a fresh env; one failing on every attempt is reported with its
// cause, and a deadline is a failure too.
func TestRolloutEnvFailureReplay(t *testing.T) {
	boom := errors.New("backend died")
	var made atomic.Int32
	f := env.FactoryFunc(func(context.Context) (env.Env, error) {
		n := made.Add(1)
		switch n {
		case 2: // rollout 1's first env fails its episode
			return &slowEnv{fail: errors.Join(ErrEnvFailed, boom)}, nil
		}
		return &slowEnv{delay: time.Millisecond}, nil
	})
	script := func(_, turn int) string {
		if turn == 0 {
			return call("wait", `{}`)
		}
		return "Done."
	}
	cfg := testConfig(2, 1)
	tr, _ := newScripted(t, cfg, script, WithEnv(f), WithReward("one", 1, constant(1)))
	gen := generateOnce(t, tr, []env.Row{{}})
	require.Len(t, gen.rollouts, 2)
	for _, r := range gen.rollouts {
		require.NoError(t, r.Err)
		assert.Equal(t, 1, r.ToolCalls)
		assert.Zero(t, r.ToolFailures)
	}
	attempts := []int{gen.rollouts[0].Attempts, gen.rollouts[1].Attempts}
	slices.Sort(attempts)
	assert.Equal(t, []int{1, 2}, attempts, "one rollout was replayed once")

	// Every attempt fails: left out with the cause.
	cfg.RolloutAttempts = 2
	cfg.ToolTimeout = 50 * time.Millisecond
	bad := env.FactoryFunc(func(context.Context) (env.Env, error) { return &slowEnv{delay: time.Hour}, nil })
	tr2, _ := newScripted(t, cfg, script, WithEnv(bad), WithReward("one", 1, constant(1)))
	gen2 := generateOnce(t, tr2, []env.Row{{}})
	for _, r := range gen2.rollouts {
		require.Error(t, r.Err)
		assert.ErrorIs(t, r.Err, context.DeadlineExceeded)
		assert.Contains(t, r.Err.Error(), "after 2 attempt(s)")
		assert.Equal(t, 2, r.Attempts)
		assert.Nil(t, r.Env)
	}
}

// TestRolloutResetObservation: the env's first observation joins the
// prompt; the whole row (extra columns too) reaches Reset; with no prompt
// column the observation is the whole user message.
func TestRolloutResetObservation(t *testing.T) {
	sc := &envtest.Factory{Make: func(int) env.Env { return &envtest.Scripted{Observation: "Hello from the env."} }}
	tr, _ := newScripted(t, testConfig(2, 1), func(int, int) string { return "Hi." }, WithEnv(sc), WithReward("one", 1, constant(1)))
	gen := generateOnce(t, tr, []env.Row{{"level": 3}})
	r := gen.rollouts[0]
	require.Len(t, r.Prompt, 1)
	assert.Equal(t, tokenizer.Message{Role: "user", Content: "Hello from the env."}, r.Prompt[0])
	e := r.Env.(*envtest.Scripted)
	require.NotEmpty(t, e.Resets)
	assert.Equal(t, env.Row{"level": 3}, e.Resets[len(e.Resets)-1])
}

// TestRolloutGenerationError: a turn the model fails to generate (e.g. the
// context length) fails that rollout only; the step trains on the others.
func TestRolloutGenerationError(t *testing.T) {
	script := func(r, turn int) string {
		if r == 1 {
			return "!err"
		}
		return []string{"One.", "Two.", "Three."}[r%3]
	}
	i := 0
	varying := func(context.Context, *Rollout) (float64, error) { i++; return float64(i), nil }
	tr, _ := newScripted(t, testConfig(3, 1), script, WithEnv(counters()), WithReward("v", 1, varying))
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
	require.NoError(t, err)
	require.Error(t, rep.Rollouts[1].Err)
	assert.Contains(t, rep.Rollouts[1].Err.Error(), "context length")
	assert.NoError(t, rep.Rollouts[0].Err)
	assert.NoError(t, rep.Rollouts[2].Err)
	assert.Equal(t, 1.0, rep.Metrics[0][MetricRolloutsFailed])
	assert.Equal(t, 1, tr.State().GlobalStep)
}
