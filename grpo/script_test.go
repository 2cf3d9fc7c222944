package grpo

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/openenv"
	"github.com/x/tokenizer"
)

// TestPlayScriptIsTheTrainersRollout plays the same turns through the
// trainer (its rollout loop with generation replaced by text) and through
// PlayScript, and checks that a reward function would see the same
// Rollout: conversation, counts, tokens and mask.
func TestPlayScriptIsTheTrainersRollout(t *testing.T) {
	for _, tc := range []struct {
		name                string
		texts               []string            // what the model writes, turn by turn
		turns               []tokenizer.Message // the same turns for PlayScript
		maxLen              int
		calls, failures, n  int // expected ToolCalls, ToolFailures, the counter
		truncated           bool
		completionMsgs      int
		wantFailedResponses []string
	}{
		{
			name: "a call, a malformed call, bad arguments, an unknown tool, then text",
			texts: []string{call("increment", `{"step": 2}`), "<tool_call>{oops</tool_call>",
				call("increment", `{"step": "x"}`), call("decrement", `{}`), "Done."},
			turns: []tokenizer.Message{CallTurn("increment", `{"step": 2}`), TextTurn("<tool_call>{oops</tool_call>"),
				CallTurn("increment", `{"step": "x"}`), CallTurn("decrement", `{}`), TextTurn("Done.")},
			maxLen: 512, calls: 4, failures: 3, n: 2, completionMsgs: 9,
			wantFailedResponses: []string{"malformed tool call", "step", "decrement"},
		},
		{
			name:   "the budget cuts the first turn",
			texts:  []string{call("increment", `{"step": 2}`)},
			turns:  []tokenizer.Message{CallTurn("increment", `{"step": 2}`)},
			maxLen: 6, truncated: true, completionMsgs: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(2, 1)
			cfg.MaxCompletionLength = tc.maxLen
			tr, _ := newScripted(t, cfg, func(_, turn int) string { return tc.texts[turn] })
			row := env.Row{"prompt": "Count: "}
			want := generateOnce(t, tr, []env.Row{row}).rollouts[0]
			require.NoError(t, want.Err)

			e := &counterEnv{}
			got, err := PlayScript(context.Background(), e, row, Turns(tc.turns...), PlayOptions{Config: &cfg})
			require.NoError(t, err)
			assert.Same(t, e, got.Env, "the reward function sees the env in its final state")
			assert.Equal(t, tc.n, e.n)
			assert.Equal(t, tc.calls, got.ToolCalls)
			assert.Equal(t, tc.failures, got.ToolFailures)
			assert.Equal(t, tc.truncated, got.Truncated)
			require.Len(t, got.Completion, tc.completionMsgs)
			for _, w := range tc.wantFailedResponses {
				found := false
				for _, m := range got.Completion {
					found = found || m.Role == "tool" && strings.Contains(m.Content, "error") && strings.Contains(m.Content, w)
				}
				assert.True(t, found, "a tool response reports the failure about %q", w)
			}

			assert.Equal(t, want.ToolCalls, got.ToolCalls)
			assert.Equal(t, want.ToolFailures, got.ToolFailures)
			assert.Equal(t, want.Truncated, got.Truncated)
			assert.Equal(t, want.Prompt, got.Prompt)
			assert.Equal(t, want.Completion, got.Completion)
			assert.Equal(t, want.PromptIDs, got.PromptIDs)
			assert.Equal(t, want.CompletionIDs, got.CompletionIDs)
			assert.Equal(t, want.Mask, got.Mask)
			assert.Equal(t, want.Row, got.Row)
			assert.Equal(t, 1, got.Attempts)
		})
	}
}

// TestPlayScriptRewardFunction is the use PlayScript is for: a reward
// function called on the rollout, as in training.
func TestPlayScriptRewardFunction(t *testing.T) {
	penalty := func(ctx context.Context, r *Rollout) (float64, error) {
		return float64(r.Env.(*counterEnv).n) - 0.5*float64(r.ToolFailures), nil
	}
	for _, tc := range []struct {
		name  string
		turns []tokenizer.Message
		want  float64
	}{
		{"two good calls", []tokenizer.Message{CallTurn("increment", `{"step": 1}`), CallTurn("increment", `{"step": 2}`), TextTurn("3.")}, 3},
		{"one bad call", []tokenizer.Message{CallTurn("increment", `{"step": 1}`), CallTurn("increment", `{}`), TextTurn("1.")}, 0.5},
		{"no call", []tokenizer.Message{TextTurn("No.")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := PlayScript(context.Background(), &counterEnv{}, env.Row{}, Turns(tc.turns...), PlayOptions{})
			require.NoError(t, err)
			got, err := penalty(context.Background(), r)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestPlayScriptScriptReadsTheEpisode: a Script sees the env and the tool
// responses so far, as the SFT scripts of a warm start need.
func TestPlayScriptScriptReadsTheEpisode(t *testing.T) {
	script := func(ctx context.Context, r *Rollout) (tokenizer.Message, error) {
		c := r.Env.(*counterEnv)
		if c.n >= 3 {
			return TextTurn("Reached " + r.Completion[len(r.Completion)-1].Content + "."), nil
		}
		return CallTurn("increment", `{"step": 1}`), nil
	}
	e := &counterEnv{}
	r, err := PlayScript(context.Background(), e, env.Row{"prompt": "Count to three."}, script, PlayOptions{})
	require.NoError(t, err)
	assert.Equal(t, 3, e.n)
	assert.Equal(t, 3, r.ToolCalls)
	assert.Equal(t, "Reached 3.", r.Completion[len(r.Completion)-1].Content)
	assert.Equal(t, "Count to three.Count up.", r.Prompt[0].Content, "the row's prompt, then the reset observation")
}

func TestPlayScriptErrors(t *testing.T) {
	ctx := context.Background()
	_, err := PlayScript(ctx, &counterEnv{}, env.Row{}, Turns(CallTurn("increment", `{"step": 1}`)), PlayOptions{})
	assert.ErrorContains(t, err, "turn 2 of a script of 1", "the script ran out while the episode went on")

	cfg := DefaultConfig()
	cfg.EnableThinking = tokenizer.ThinkingOff
	_, err = PlayScript(ctx, &counterEnv{}, env.Row{}, Turns(tokenizer.Message{ReasoningContent: "hmm", Content: "x"}), PlayOptions{Config: &cfg})
	assert.ErrorContains(t, err, "thinking is off")

	_, err = PlayScript(ctx, nil, env.Row{}, Turns(), PlayOptions{})
	assert.Error(t, err)
}

// TestPlayScriptLocalAndRemoteIdentical: the same env in process and
// served by openenv.NewServer renders byte-identical prompts (tool schemas
// with their "return" included) and answers the same turns identically,
// failures included.
func TestPlayScriptLocalAndRemoteIdentical(t *testing.T) {
	ctx := context.Background()
	srv := startEnvServer(t)
	remote, err := openenv.RemoteFactory(srv.url()).New(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = remote.(env.Closer).Close() })

	tok := tokenizer.Tiny()
	turns := Turns(CallTurn("increment", `{"step": 2}`), CallTurn("increment", `{"step": "x"}`),
		CallTurn("decrement", `{}`), TextTurn("<tool_call>{oops</tool_call>"), TextTurn("Done."))
	row := env.Row{"prompt": "Count: "}
	local, err := PlayScript(ctx, &counterEnv{}, row, turns, PlayOptions{Tokenizer: tok})
	require.NoError(t, err)
	served, err := PlayScript(ctx, remote, row, turns, PlayOptions{Tokenizer: tok})
	require.NoError(t, err)

	prompt := tok.Decode(local.PromptIDs, false)
	assert.Contains(t, prompt, `"return": {"type": "string"}`, "the method's result schema is in the prompt")
	assert.Equal(t, prompt, tok.Decode(served.PromptIDs, false))
	assert.Equal(t, local.PromptIDs, served.PromptIDs)
	assert.Equal(t, local.Completion, served.Completion)
	assert.Equal(t, local.CompletionIDs, served.CompletionIDs)
	assert.Equal(t, local.ToolCalls, served.ToolCalls)
	assert.Equal(t, 3, served.ToolFailures)
	assert.Equal(t, local.ToolFailures, served.ToolFailures)
}
