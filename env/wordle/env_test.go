package wordle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/envtest"
	"github.com/x/env/openenv"
	"github.com/x/env/wordle"
)

func guess(w string) envtest.Call {
	return envtest.Call{Tool: "guess", Args: fmt.Sprintf(`{"word":%q}`, w)}
}

// Test a reward function against Wordle in its final state.
func ExampleEnv() {
	ctx := context.Background()
	e, _ := wordle.NewFactory(wordle.Options{Seed: 1}).New(ctx)
	ep, err := envtest.Play(ctx, e, env.Row{"secret_word": "plant"},
		guess("crane"), guess("xyzzy"), guess("plant"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range ep.Steps {
		fmt.Println(s.Response)
	}
	game := &e.(*wordle.Env).Game
	fmt.Println("reward:", ep.Reward, "guesses used:", len(game.Guesses()))
	// Output:
	// You submitted [crane].
	// Feedback:
	// C R A N E
	// X X G G X
	// You have 5 guesses left.
	// You attempted an invalid move. Reason: 'xyzzy' is not an English word. Please resubmit a valid move and remember to follow the game rules to avoid penalties.
	// Correct! You guessed the word. The game is over.
	// reward: 1 guesses used: 2
}

func TestToolEnv(t *testing.T) {
	ctx := context.Background()
	f := wordle.NewFactory(wordle.Options{Seed: 5})
	e, err := f.New(ctx)
	require.NoError(t, err)

	ep, err := envtest.Play(ctx, e, env.Row{"secret_word": "plant"},
		guess("cr"), guess("no brackets here"), guess("plant"))
	require.NoError(t, err)
	assert.Equal(t, wordle.ToolIntro, ep.Observation)
	assert.Contains(t, ep.Steps[0].Response, "Your word must be exactly 5 letters.")
	assert.Equal(t, "That was a second invalid guess in a row, so the game is over.", ep.Steps[1].Response)
	assert.ErrorIs(t, ep.Steps[2].Err, wordle.ErrGameOver)
	assert.Equal(t, 0.0, ep.Reward)

	calls := []envtest.Call{guess("crane"), guess("slate"), guess("pilot"), guess("mound"), guess("fight"), guess("brick")}
	ep, err = envtest.Play(ctx, e, env.Row{"secret_word": "plant"}, calls...)
	require.NoError(t, err)
	assert.Equal(t, "You submitted [brick].\nFeedback:\nB R I C K\nX X X X X\nYou have 0 guesses left.\nThe game is over: you have used all 6 attempts.", ep.Steps[5].Response)
	assert.Equal(t, 0.0, ep.Reward)
	ep, err = envtest.Play(ctx, e, env.Row{"secret_word": "plant"}, calls[:5]...)
	require.NoError(t, err)
	assert.Equal(t, 0.0, ep.Reward, "unfinished: no reward yet")
	assert.Equal(t, 0.2, e.(*wordle.Env).Game.Completion(), "fight: 1 green")

	// Seeds: the same row seed gives the same secret; different envs of a
	// seeded factory draw reproducible secrets.
	secret := func(e env.Env, row env.Row) string {
		_, err := e.Reset(ctx, row)
		require.NoError(t, err)
		return e.(*wordle.Env).Game.Secret()
	}
	assert.Equal(t, secret(e, env.Row{"seed": 9}), secret(e, env.Row{"seed": 9.0}))
	a, _ := wordle.NewFactory(wordle.Options{Seed: 3}).New(ctx)
	b, _ := wordle.NewFactory(wordle.Options{Seed: 3}).New(ctx)
	for range 5 {
		assert.Equal(t, secret(a, nil), secret(b, nil))
	}
	_, err = e.Reset(ctx, env.Row{"secret_word": "abc"})
	assert.ErrorContains(t, err, "not five letters")
	_, err = e.Reset(ctx, env.Row{"seed": "x"})
	assert.ErrorContains(t, err, `"seed"`)
}

// TestLoopback plays full games of the remote tool env against our server
// over a WebSocket and checks it answers exactly like the in-process env.
func TestLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := httptest.NewServer(openenv.NewServer(wordle.NewEnvironmentFactory(wordle.Options{Seed: 4}), openenv.WithMaxSessions(2)))
	defer srv.Close()
	pool, err := env.NewPool(ctx, wordle.NewRemoteFactory(srv.URL))
	require.NoError(t, err)
	defer func() { assert.NoError(t, pool.Close()) }()
	local := wordle.NewEnv(wordle.DefaultDictionary(), nil)

	for _, game := range [][]string{
		{"crane", "crane", "slate", "xyzzy", "plant"},
		{"cr", "no brackets here"},
		{"crane", "slate", "pilot", "mound", "fight", "brick"},
		{"[plant]"},
	} {
		row := env.Row{"secret_word": "plant"}
		in, obs, err := pool.Start(ctx, row)
		require.NoError(t, err)
		localObs, err := local.Reset(ctx, row)
		require.NoError(t, err)
		assert.Equal(t, localObs, obs)
		for _, w := range game {
			args, _ := json.Marshal(wordle.GuessArgs{Word: w})
			resp, err := in.Tools.Call(ctx, "guess", args)
			require.NoError(t, err, w)
			want, err := local.Guess(ctx, wordle.GuessArgs{Word: w})
			require.NoError(t, err)
			assert.Equal(t, want, resp, "guess %s", w)
		}
		_, err = in.Tools.Call(ctx, "guess", json.RawMessage(`{"word":"after"}`))
		assert.Error(t, err, "no guess after the end")
		r, _, err := in.Reward(ctx)
		require.NoError(t, err)
		lr, _ := local.Reward(ctx)
		assert.Equal(t, lr, r)
		in.Release()
	}

	c, err := wordle.Dial(ctx, srv.URL)
	require.NoError(t, err)
	defer c.Close()
	seed := int64(8)
	r, err := c.Reset(ctx, wordle.ResetOptions{Seed: &seed})
	require.NoError(t, err)
	assert.Equal(t, 0.0, *r.Reward)
	r, err = c.Step(ctx, "[crane]")
	require.NoError(t, err)
	assert.Equal(t, wordle.EnvID, r.Observation.Prompt)
	st, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.StepCount)
	assert.Equal(t, 1, st.Turn)
	assert.Equal(t, wordle.SecretForSeed(wordle.DefaultDictionary(), 8), gjsonSecret(t, st.RawState))
}

func gjsonSecret(t *testing.T, raw json.RawMessage) string {
	var rs struct {
		GameState struct {
			SecretWord string `json:"secret_word"`
		} `json:"game_state"`
	}
	require.NoError(t, json.Unmarshal(raw, &rs))
	return rs.GameState.SecretWord
}
