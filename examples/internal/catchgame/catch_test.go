package catchgame

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/envtest"
	"github.com/x/grpo"
	"github.com/x/tokenizer"
)

func TestGrid(t *testing.T) {
	c := New(rand.New(rand.NewPCG(1, 2)))
	obs, err := c.Reset(context.Background(), env.Row{"ball_column": int64(4)})
	require.NoError(t, err)
	assert.Equal(t, Intro+"....o\n.....\n.....\n.....\n.....\n.....\n.....\n.....\n.....\n..=..", obs)
}

// TestToolsAndReward plays scripted episodes and checks the replies and
// the reward, including the tool errors after the end.
func TestToolsAndReward(t *testing.T) {
	right := envtest.Call{Tool: "move", Args: `{"direction": "right"}`}
	left := envtest.Call{Tool: "move", Args: `{"direction": "left"}`}
	stay := envtest.Call{Tool: "stay", Args: `{}`}
	tests := []struct {
		name    string
		col     int64
		calls   []envtest.Call
		want    float64
		lastErr bool
	}{
		{name: "catch on the right", col: 4, calls: []envtest.Call{right, right, stay, stay, stay, stay, stay, stay, stay}, want: 1},
		{name: "miss", col: 0, calls: []envtest.Call{right, stay, stay, stay, stay, stay, stay, stay, stay}, want: 0},
		{name: "catch, then a call too many", col: 2, calls: []envtest.Call{stay, stay, stay, stay, stay, stay, stay, stay, stay, left}, want: 0.9, lastErr: true},
		{name: "unfinished", col: 1, calls: []envtest.Call{left}, want: 0},
		{name: "bad direction", col: 1, calls: []envtest.Call{{Tool: "move", Args: `{"direction": "up"}`}}, want: 0, lastErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(rand.New(rand.NewPCG(1, 2)))
			ep, err := envtest.Play(context.Background(), c, env.Row{"ball_column": tc.col}, tc.calls...)
			require.NoError(t, err)
			last := ep.Steps[len(ep.Steps)-1]
			assert.Equal(t, tc.lastErr, last.Err != nil, last.Response)
			got, err := Reward("")(context.Background(), &grpo.Rollout{Env: c})
			require.NoError(t, err)
			assert.InDelta(t, tc.want, got, 1e-12)
		})
	}
	_, err := Reward("catch")(context.Background(), &grpo.Rollout{EnvName: "wordle"})
	assert.ErrorIs(t, err, grpo.ErrNoScore, "another env's rollout gets no score")
}

func TestScriptedPlayerCatchesEverything(t *testing.T) {
	ctx := context.Background()
	cfg := grpo.DefaultConfig()
	cfg.EnableThinking, cfg.MaxCompletionLength = tokenizer.ThinkingOff, 1024
	for _, row := range Rows(5) {
		c := New(rand.New(rand.NewPCG(0, 0)))
		r, err := grpo.PlayScript(ctx, c, row, Expert, grpo.PlayOptions{Config: &cfg})
		require.NoError(t, err)
		assert.True(t, Caught(&c.Game), "from column %v", row["ball_column"])
		assert.Zero(t, r.ToolFailures)
		assert.Equal(t, "Caught it.", r.Completion[len(r.Completion)-1].Content)
	}
	convs, err := Conversations(ctx, grpo.PlayOptions{Config: &cfg})
	require.NoError(t, err)
	require.Len(t, convs, 5)
	chat, err := tokenizer.NewChat(tokenizer.Tiny())
	require.NoError(t, err)
	for _, c := range convs {
		assert.Len(t, c.Messages, 1+2*9+1, "nine moves")
		ids, err := chat.RenderIDs(c.Messages, tokenizer.RenderOptions{Tools: c.Tools, EnableThinking: tokenizer.ThinkingOff, KeepAllReasoning: true})
		require.NoError(t, err)
		assert.Less(t, len(ids), 1500)
	}
}
