package catch_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/catch"
	"github.com/x/env/envtest"
	"github.com/x/env/internal/pyjson"
	"github.com/x/env/openenv"
)

var uuidRE = regexp.MustCompile(`"episode_id":"[^"]*"`)

// TestReplayExpected plays openspiel_catch_expected.json (derived from
// OpenSpiel's and OpenEnv's source) against our server over a WebSocket.
// Upstream draws the ball's column; the transcript fixes it at 0, which
// our reset option ball_column reproduces.
func TestReplayExpected(t *testing.T) {
	raw, err := os.ReadFile("testdata/openspiel_catch_expected.json")
	require.NoError(t, err)
	var tr struct {
		Frames []struct {
			Send map[string]any  `json:"send"`
			Recv json.RawMessage `json:"recv"`
		} `json:"frames"`
	}
	require.NoError(t, json.Unmarshal(raw, &tr))
	require.Len(t, tr.Frames, 11)

	srv := httptest.NewServer(openenv.NewServer(catch.NewEnvironmentFactory(catch.Options{Seed: 1})))
	defer srv.Close()
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
	require.NoError(t, err)
	defer c.Close()
	for i, f := range tr.Frames {
		send := f.Send
		if send["type"] == "reset" {
			send = map[string]any{"type": "reset", "data": map[string]any{"ball_column": 0}}
		}
		msg, _ := json.Marshal(send)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		require.NoError(t, c.WriteMessage(websocket.TextMessage, msg))
		_, got, err := c.ReadMessage()
		require.NoError(t, err)
		var recv any
		require.NoError(t, json.Unmarshal(f.Recv, &recv))
		compact, _ := json.Marshal(recv)
		want := uuidRE.ReplaceAllString(string(compact), `"episode_id":"x"`)
		assert.JSONEq(t, want, uuidRE.ReplaceAllString(string(got), `"episode_id":"x"`), "frame %d", i)
		if send["type"] != "state" {
			info := regexp.MustCompile(`"info_state":\[[^\]]*\]`).Find(got)
			require.NotNil(t, info, "frame %d", i)
			assert.NotRegexp(t, `[\[,][01][,\]]`, string(info), "info_state floats are written as Python floats")
		}
	}
}

func TestEnvironmentRules(t *testing.T) {
	ctx := context.Background()
	e := catch.NewEnvironment(pyjson.Seeds(5, 0))
	r, err := e.Reset(ctx, json.RawMessage(`{"ball_column":4,"episode_id":"ep-7"}`))
	require.NoError(t, err)
	assert.Nil(t, r.Reward, "reward is null at reset")
	var obs catch.Observation
	require.NoError(t, r.DecodeObservation(&obs))
	assert.Equal(t, catch.Initial, obs.GamePhase)
	for range 8 {
		r, err = e.Step(ctx, json.RawMessage(`{"action_id":2}`))
		require.NoError(t, err)
		require.NotNil(t, r.Reward)
		assert.Equal(t, 0.0, *r.Reward)
		assert.False(t, r.Done)
	}
	r, err = e.Step(ctx, json.RawMessage(`{"action_id":"2"}`)) // lax int, paddle clamped at column 4
	require.NoError(t, err)
	assert.True(t, r.Done)
	assert.Equal(t, 1.0, *r.Reward)
	require.NoError(t, r.DecodeObservation(&obs))
	assert.Equal(t, catch.Terminal, obs.GamePhase)
	assert.Equal(t, []int{}, obs.LegalActions)
	assert.Equal(t, catch.TerminalPlayer, obs.CurrentPlayerID)

	r, err = e.Step(ctx, json.RawMessage(`{"action_id":0}`))
	require.NoError(t, err, "a step after the end starts a new game")
	assert.Nil(t, r.Reward)
	assert.False(t, r.Done)
	st, err := e.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, `{"episode_id":"ep-7","step_count":10,"game_name":"catch","agent_player":0,"opponent_policy":"random","game_params":{},"num_players":1}`, string(st))

	// A miss: ball in column 0, paddle pushed right.
	_, err = e.Reset(ctx, json.RawMessage(`{"ball_column":0}`))
	require.NoError(t, err)
	for range 9 {
		r, err = e.Step(ctx, json.RawMessage(`{"action_id":2,"game_name":"catch","game_params":{}}`))
		require.NoError(t, err)
	}
	assert.Equal(t, -1.0, *r.Reward)

	for action, typ := range map[string]string{
		`{}`: "missing", `{"action_id":1.5}`: "int_from_float", `{"action_id":"x"}`: "int_parsing",
		`{"action_id":1,"extra":1}`: "extra_forbidden", `{"action_id":1,"game_params":[]}`: "dict_type",
		`{"action_id":1,"game_name":3}`: "string_type", `[]`: "model_type",
	} {
		_, err := e.Step(ctx, json.RawMessage(action))
		var ve *openenv.ValidationError
		require.ErrorAs(t, err, &ve, action)
		assert.Equal(t, typ, ve.Errors[0].Type, action)
	}
	_, err = e.Reset(ctx, nil)
	require.NoError(t, err)
	_, err = e.Step(ctx, json.RawMessage(`{"action_id":7}`))
	assert.ErrorContains(t, err, "action 7 is not legal")
	_, err = e.Reset(ctx, json.RawMessage(`{"ball_column":9}`))
	assert.ErrorContains(t, err, "outside 0..4")

	// Seeds make games reproducible.
	cols := func(seed uint64) []int {
		f := catch.NewEnvironmentFactory(catch.Options{Seed: seed})
		x, _ := f.NewEnvironment(ctx)
		var out []int
		for range 10 {
			r, _ := x.Reset(ctx, nil)
			var o catch.Observation
			require.NoError(t, r.DecodeObservation(&o))
			for i, v := range o.InfoState[:5] {
				if v == 1 {
					out = append(out, i)
				}
			}
		}
		return out
	}
	assert.Equal(t, cols(11), cols(11))
	assert.NotEqual(t, cols(11), cols(12))
}

func TestInProcessEnv(t *testing.T) {
	ctx := context.Background()
	e := catch.NewEnv(pyjson.Seeds(1, 0))
	calls := []envtest.Call{{Tool: "move", Args: `{"direction":"left"}`}, {Tool: "move", Args: `{"direction":"left"}`}}
	for range 7 {
		calls = append(calls, envtest.Call{Tool: "move", Args: `{"direction":"stay"}`})
	}
	calls = append(calls, envtest.Call{Tool: "move", Args: `{"direction":"stay"}`}, envtest.Call{Tool: "move", Args: `{"direction":"up"}`})
	ep, err := envtest.Play(ctx, e, env.Row{"ball_column": 0}, calls...)
	require.NoError(t, err)
	assert.Equal(t, catch.Intro+"Ball: row 1/10, column 1/5\nPaddle: column 3/5\nThe ball is 2 column(s) to the LEFT of the paddle.\n9 move(s) left.", ep.Observation)
	assert.Equal(t, "Ball: row 2/10, column 1/5\nPaddle: column 2/5\nThe ball is 1 column(s) to the LEFT of the paddle.\n8 move(s) left.", ep.Steps[0].Response)
	assert.Equal(t, "You caught the ball! The game is over.", ep.Steps[8].Response)
	assert.Equal(t, `{"error": "catch: the game is over"}`, ep.Steps[9].Response)
	assert.ErrorContains(t, ep.Steps[10].Err, `must be one of "left", "stay", "right"`)
	assert.Equal(t, 1.0, ep.Reward)

	ep, err = envtest.Play(ctx, e, env.Row{"ball_column": 4}, calls[:9]...)
	require.NoError(t, err)
	assert.Equal(t, "You missed the ball: it landed in column 5, your paddle is in column 1. The game is over.", ep.Steps[8].Response)
	assert.Equal(t, 0.0, ep.Reward)

	_, err = envtest.Play(ctx, e, env.Row{"ball_column": 5})
	assert.ErrorContains(t, err, "outside 0..4")
	_, err = envtest.Play(ctx, e, env.Row{"seed": "abc"})
	assert.ErrorContains(t, err, `"seed"`)

	// Seeded factories are reproducible.
	first := func(seed uint64) string {
		x, _ := catch.NewFactory(catch.Options{Seed: seed}).New(ctx)
		obs, _ := x.Reset(ctx, env.Row{})
		return obs
	}
	assert.Equal(t, first(3), first(3))
}

// TestLoopback plays full episodes of the remote tool env against our
// server over a real WebSocket, catching and missing.
func TestLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := httptest.NewServer(openenv.NewServer(catch.NewEnvironmentFactory(catch.Options{Seed: 2})))
	defer srv.Close()
	pool, err := env.NewPool(ctx, catch.NewRemoteFactory(srv.URL))
	require.NoError(t, err)
	defer func() { assert.NoError(t, pool.Close()) }()

	local := catch.NewEnv(pyjson.Seeds(9, 0))
	for _, tc := range []struct {
		col    int
		moves  []string
		reward float64
	}{
		{0, []string{"left", "left", "stay", "stay", "stay", "stay", "stay", "stay", "stay"}, 1},
		{4, []string{"left", "left", "stay", "stay", "stay", "stay", "stay", "stay", "stay"}, 0},
	} {
		in, obs, err := pool.Start(ctx, env.Row{"ball_column": tc.col})
		require.NoError(t, err)
		localObs, err := local.Reset(ctx, env.Row{"ball_column": tc.col})
		require.NoError(t, err)
		assert.Equal(t, localObs, obs, "remote and in-process envs describe the game alike")
		for i, m := range tc.moves {
			args, _ := json.Marshal(catch.MoveArgs{Direction: m})
			resp, err := in.Tools.Call(ctx, "move", args)
			require.NoError(t, err)
			localResp, _ := local.Move(ctx, catch.MoveArgs{Direction: m})
			if i < len(tc.moves)-1 {
				assert.Equal(t, localResp, resp)
			}
		}
		_, err = in.Tools.Call(ctx, "move", json.RawMessage(`{"direction":"stay"}`))
		assert.Error(t, err, "no move after the end")
		r, _, err := in.Reward(ctx)
		require.NoError(t, err)
		assert.Equal(t, tc.reward, r)
		in.Release()
	}

	c, err := catch.Dial(ctx, srv.URL)
	require.NoError(t, err)
	defer c.Close()
	seed := int64(4)
	r, err := c.Reset(ctx, catch.ResetOptions{Seed: &seed})
	require.NoError(t, err)
	assert.Nil(t, r.Reward)
	assert.Len(t, r.Observation.InfoState, 50)
	r, err = c.Step(ctx, catch.Stay)
	require.NoError(t, err)
	assert.Equal(t, catch.Playing, r.Observation.GamePhase)
	st, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.StepCount)
	assert.Equal(t, "catch", st.GameName)
}
