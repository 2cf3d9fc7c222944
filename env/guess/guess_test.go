package guess_test

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
	"github.com/x/env/guess"
	"github.com/x/env/internal/pyjson"
	"github.com/x/env/openenv"
)

func call(n any) envtest.Call {
	return envtest.Call{Tool: "guess", Args: fmt.Sprintf(`{"number":%v}`, n)}
}

func TestGame(t *testing.T) {
	var g guess.Game
	require.NoError(t, g.Reset(guess.Rules{}, 13))
	assert.Equal(t, guess.Rules{Max: 20, MaxGuesses: 7}, g.Rules, "defaults: 1..20, binary search (5) + 2")
	for _, tc := range []struct {
		n    int
		hint string
	}{{10, guess.Higher}, {15, guess.Lower}, {13, guess.Correct}} {
		h, err := g.Guess(tc.n)
		require.NoError(t, err)
		assert.Equal(t, tc.hint, h)
	}
	assert.True(t, g.Done())
	assert.InDelta(t, 1-2.0/7, g.Reward(), 1e-12)
	_, err := g.Guess(13)
	assert.ErrorIs(t, err, guess.ErrGameOver)

	require.NoError(t, g.Reset(guess.Rules{Max: 4, MaxGuesses: 2}, 4))
	_, err = g.Guess(5)
	assert.ErrorContains(t, err, "outside 1..4")
	assert.Empty(t, g.Guesses, "an out-of-range guess does not count")
	_, _ = g.Guess(1)
	_, _ = g.Guess(2)
	assert.True(t, g.Done())
	assert.Equal(t, 0.0, g.Reward())
	assert.Error(t, g.Reset(guess.Rules{Max: 4}, 0))

	require.NoError(t, g.Reset(guess.Rules{}, 7))
	_, _ = g.Guess(7)
	assert.Equal(t, 1.0, g.Reward(), "first-guess find")
}

func TestToolEnv(t *testing.T) {
	ctx := context.Background()
	e, err := guess.NewFactory(guess.Options{Seed: 1}).New(ctx)
	require.NoError(t, err)
	ep, err := envtest.Play(ctx, e, env.Row{"target": 13}, call(10), call(25), call(`"x"`), call(15), call(13), call(1))
	require.NoError(t, err)
	assert.Equal(t, "I am thinking of a whole number from 1 to 20. Find it with as few guesses as you can: call the guess tool with a number and I will say whether mine is higher or lower. You have 7 guesses.", ep.Observation)
	assert.Equal(t, "My number is higher than 10. 6 guess(es) left.", ep.Steps[0].Response)
	assert.Equal(t, `{"error": "guess: 25 is outside 1..20"}`, ep.Steps[1].Response)
	assert.Error(t, ep.Steps[2].Err)
	assert.Equal(t, "My number is lower than 15. 5 guess(es) left.", ep.Steps[3].Response)
	assert.Equal(t, "Correct! The number is 13. You found it in 3 guess(es).", ep.Steps[4].Response)
	assert.ErrorIs(t, ep.Steps[5].Err, guess.ErrGameOver)
	assert.InDelta(t, 1-2.0/7, ep.Reward, 1e-12)

	small := guess.NewEnv(guess.Rules{Max: 3, MaxGuesses: 1}, nil)
	ep, err = envtest.Play(ctx, small, env.Row{"target": 3}, call(1))
	require.NoError(t, err)
	assert.Equal(t, "My number is higher than 1. You are out of guesses; the number was 3.", ep.Steps[0].Response)
	assert.Equal(t, 0.0, ep.Reward)

	_, err = e.Reset(ctx, env.Row{"target": 21})
	assert.ErrorContains(t, err, "outside 1..20")
	_, err = e.Reset(ctx, env.Row{"seed": 5})
	require.NoError(t, err)
	a := e.(*guess.Env).Game.Target
	_, _ = e.Reset(ctx, env.Row{"seed": 5})
	assert.Equal(t, a, e.(*guess.Env).Game.Target)
	assert.Equal(t, guess.TargetForSeed(guess.Rules{}, 5), a)
}

func TestEnvironment(t *testing.T) {
	ctx := context.Background()
	e := guess.NewEnvironment(guess.Rules{}, pyjson.Seeds(2, 0))
	r, err := e.Reset(ctx, json.RawMessage(`{"target":6,"episode_id":"g-1"}`))
	require.NoError(t, err)
	assert.Equal(t, `{"hint":"","message":"I am thinking of a whole number from 1 to 20. Find it with as few guesses as you can: call the guess tool with a number and I will say whether mine is higher or lower. You have 7 guesses.","guesses":0,"remaining":7,"max_number":20}`, string(r.Observation))
	r, err = e.Step(ctx, json.RawMessage(`{"guess":"6"}`))
	require.NoError(t, err)
	assert.True(t, r.Done)
	assert.Equal(t, 1.0, *r.Reward)
	st, err := e.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, `{"episode_id":"g-1","step_count":1,"max_number":20,"max_guesses":7,"found":true}`, string(st))
	_, err = e.Step(ctx, json.RawMessage(`{"guess":3}`))
	assert.ErrorIs(t, err, guess.ErrGameOver)
	for action, typ := range map[string]string{`{}`: "missing", `{"guess":1.5}`: "int_from_float", `{"guess":1,"x":2}`: "extra_forbidden"} {
		_, err := e.Step(ctx, json.RawMessage(action))
		var ve *openenv.ValidationError
		require.ErrorAs(t, err, &ve)
		assert.Equal(t, typ, ve.Errors[0].Type)
	}
	_, err = e.Reset(ctx, nil)
	require.NoError(t, err)
	_, err = e.Step(ctx, json.RawMessage(`{"guess":0}`))
	assert.ErrorContains(t, err, "outside 1..20")
}

func TestLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := httptest.NewServer(openenv.NewServer(guess.NewEnvironmentFactory(guess.Options{Seed: 3})))
	defer srv.Close()
	pool, err := env.NewPool(ctx, guess.NewRemoteFactory(srv.URL))
	require.NoError(t, err)
	defer func() { assert.NoError(t, pool.Close()) }()
	local := guess.NewEnv(guess.Rules{}, nil)
	for _, target := range []int{1, 13, 20} {
		row := env.Row{"target": target}
		in, obs, err := pool.Start(ctx, row)
		require.NoError(t, err)
		lobs, _ := local.Reset(ctx, row)
		assert.Equal(t, lobs, obs)
		lo, hi := 1, 20
		for {
			mid := (lo + hi) / 2
			resp, err := in.Tools.Call(ctx, "guess", json.RawMessage(fmt.Sprintf(`{"number":%d}`, mid)))
			require.NoError(t, err)
			lresp, _ := local.Guess(ctx, guess.GuessArgs{Number: mid})
			assert.Equal(t, lresp, resp)
			if mid == target {
				break
			}
			if mid < target {
				lo = mid + 1
			} else {
				hi = mid - 1
			}
		}
		_, err = in.Tools.Call(ctx, "guess", json.RawMessage(`{"number":99}`))
		assert.Error(t, err)
		r, _, err := in.Reward(ctx)
		require.NoError(t, err)
		lr, _ := local.Reward(ctx)
		assert.Equal(t, lr, r)
		assert.Greater(t, r, 0.0)
		in.Release()
	}
	c, err := guess.Dial(ctx, srv.URL)
	require.NoError(t, err)
	defer c.Close()
	seed := int64(1)
	_, err = c.Reset(ctx, guess.ResetOptions{Seed: &seed})
	require.NoError(t, err)
	res, err := c.Step(ctx, guess.TargetForSeed(guess.Rules{}, 1))
	require.NoError(t, err)
	assert.Equal(t, guess.Correct, res.Observation.Hint)
	st, err := c.State(ctx)
	require.NoError(t, err)
	assert.True(t, st.Found)
}

// FuzzStep: arbitrary actions never panic a session.
func FuzzStep(f *testing.F) {
	for _, s := range []string{`{"guess":5}`, `{"guess":"7"}`, `{"guess":-1}`, `{"guess":1e300}`, `{}`, `[]`, `{"guess":true}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, action string) {
		e := guess.NewEnvironment(guess.Rules{}, pyjson.Seeds(1, 0))
		for range 9 {
			r, err := e.Step(context.Background(), json.RawMessage(action))
			if err != nil {
				return
			}
			var obs guess.Observation
			require.NoError(t, r.DecodeObservation(&obs))
		}
	})
}
