package echo_test

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
	"github.com/x/env/echo"
	"github.com/x/env/envtest"
	"github.com/x/env/openenv"
)

type transcript struct {
	Frames []struct {
		Conn    string `json:"conn"`
		Event   string `json:"event"`
		SentRaw string `json:"sent_raw"`
		Sent    any    `json:"sent"`
		RecvRaw string `json:"recv_raw"`
	} `json:"frames"`
}

var uuidRE = regexp.MustCompile(`"episode_id":"[0-9a-f-]{36}"`)

// TestReplayRecordedSession replays the reset/step/state frames recorded
// from the Python echo server against ours over a real WebSocket and
// compares the replies byte for byte (episode ids are random upstream, so
// they are compared as UUIDs).
func TestReplayRecordedSession(t *testing.T) {
	raw, err := os.ReadFile("testdata/ws_session.json")
	require.NoError(t, err)
	var tr transcript
	require.NoError(t, json.Unmarshal(raw, &tr))

	srv := httptest.NewServer(openenv.NewServer(echo.NewEnvironmentFactory(echo.Options{Seed: 1}), openenv.WithMaxSessions(4)))
	defer srv.Close()
	conns := map[string]*websocket.Conn{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	compared := 0
	for _, f := range tr.Frames {
		if f.SentRaw == "" || f.RecvRaw == "" || !envFrame(f.Sent) {
			continue
		}
		c := conns[f.Conn]
		if c == nil {
			c, _, err = websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
			require.NoError(t, err)
			conns[f.Conn] = c
		}
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		require.NoError(t, c.WriteMessage(websocket.TextMessage, []byte(f.SentRaw)))
		_, got, err := c.ReadMessage()
		require.NoError(t, err)
		want := uuidRE.ReplaceAllString(f.RecvRaw, `"episode_id":"<uuid>"`)
		assert.Equal(t, want, uuidRE.ReplaceAllString(string(got), `"episode_id":"<uuid>"`), "reply to %s", f.SentRaw)
		compared++
	}
	assert.Equal(t, 15, compared, "frames replayed")
}

// envFrame reports whether a recorded frame exercises the environment
// (reset, step with data, plain state) rather than frame-level handling.
func envFrame(v any) bool {
	sent, ok := v.(map[string]any)
	if !ok {
		return false
	}
	switch sent["type"] {
	case "reset":
		return true
	case "step":
		_, ok := sent["data"]
		return ok
	case "state":
		return len(sent) == 1
	}
	return false
}

func TestEnvironmentDirect(t *testing.T) {
	ctx := context.Background()
	f := echo.NewEnvironmentFactory(echo.Options{Seed: 7})
	e, err := f.NewEnvironment(ctx)
	require.NoError(t, err)
	tests := []struct {
		action string
		obs    string
		reward float64
		errs   string
	}{
		{`{"message":"Hello"}`, `{"echoed_message":"Hello","message_length":5}`, 0.5, ""},
		{`{"message":"héllo wörld","metadata":{"k":1}}`, `{"echoed_message":"héllo wörld","message_length":11}`, 11 * 0.1, ""},
		{`{"message":"<&>"}`, `{"echoed_message":"<&>","message_length":3}`, 0.30000000000000004, ""},
		{`{"message":""}`, "", 0, "string_too_short"},
		{`{"message":5}`, "", 0, "string_type"},
		{`{}`, "", 0, "missing"},
		{`{"message":"x","bogus":1}`, "", 0, "extra_forbidden"},
		{`{"message":"x","metadata":3}`, "", 0, "dict_type"},
		{`"x"`, "", 0, "model_type"},
	}
	for _, tc := range tests {
		r, err := e.Step(ctx, json.RawMessage(tc.action))
		if tc.errs != "" {
			var ve *openenv.ValidationError
			require.ErrorAs(t, err, &ve, tc.action)
			assert.Equal(t, tc.errs, ve.Errors[0].Type, tc.action)
			continue
		}
		require.NoError(t, err, tc.action)
		assert.Equal(t, tc.obs, string(r.Observation))
		require.NotNil(t, r.Reward)
		assert.InDelta(t, tc.reward, *r.Reward, 1e-15) // exact up to the float product's rounding
		assert.False(t, r.Done)
	}
	st, err := e.State(ctx)
	require.NoError(t, err)
	assert.Regexp(t, `^\{"episode_id":"[0-9a-f-]{36}","step_count":3\}$`, string(st))

	// Same seed, same episode ids.
	a, _ := echo.NewEnvironmentFactory(echo.Options{Seed: 3}).NewEnvironment(ctx)
	b, _ := echo.NewEnvironmentFactory(echo.Options{Seed: 3}).NewEnvironment(ctx)
	sa, _ := a.State(ctx)
	sb, _ := b.State(ctx)
	assert.Equal(t, string(sa), string(sb))
}

func TestDescriber(t *testing.T) {
	raw, err := os.ReadFile("testdata/http.json")
	require.NoError(t, err)
	var rec struct {
		Exchanges []struct {
			Path     string          `json:"path"`
			Response json.RawMessage `json:"response"`
		} `json:"exchanges"`
	}
	require.NoError(t, json.Unmarshal(raw, &rec))
	f := echo.NewEnvironmentFactory(echo.Options{})
	var d openenv.Describer = f
	for _, x := range rec.Exchanges {
		switch x.Path {
		case "/schema":
			var s struct{ Action, Observation json.RawMessage }
			require.NoError(t, json.Unmarshal(x.Response, &s))
			assert.JSONEq(t, string(s.Action), string(d.ActionSchema()))
			assert.JSONEq(t, string(s.Observation), string(d.ObservationSchema()))
		case "/metadata":
			got, _ := json.Marshal(d.Metadata())
			assert.JSONEq(t, string(x.Response), string(got))
		}
	}
}

func TestInProcessEnv(t *testing.T) {
	ctx := context.Background()
	e, err := echo.NewEnv(ctx)
	require.NoError(t, err)
	ep, err := envtest.Play(ctx, e, env.Row{"prompt": "say hi"},
		envtest.Call{Tool: "echo", Args: `{"message":"hi"}`},
		envtest.Call{Tool: "echo", Args: `{"message":""}`},
		envtest.Call{Tool: "echo", Args: `{"message":"Hello, World!"}`},
	)
	require.NoError(t, err)
	assert.Equal(t, "", ep.Observation)
	assert.Equal(t, "hi", ep.Steps[0].Response)
	assert.Equal(t, `{"error": "message must have at least 1 character"}`, ep.Steps[1].Response)
	assert.Equal(t, "Hello, World!", ep.Steps[2].Response)
	assert.True(t, ep.HasReward)
	assert.InDelta(t, 1.3, ep.Reward, 1e-12)
	assert.Equal(t, []string{"hi", "Hello, World!"}, e.(*echo.Env).Echoed)

	ep, err = envtest.Play(ctx, e, nil)
	require.NoError(t, err)
	assert.Equal(t, 0.0, ep.Reward, "reset clears the episode")
}

// TestLoopback runs full episodes of the remote tool env through a pool
// against our server over a real WebSocket.
func TestLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := httptest.NewServer(openenv.NewServer(echo.NewEnvironmentFactory(echo.Options{Seed: 1}), openenv.WithMaxSessions(4)))
	defer srv.Close()

	pool, err := env.NewPool(ctx, echo.NewRemoteFactory(srv.URL))
	require.NoError(t, err)
	defer func() { assert.NoError(t, pool.Close()) }()
	for _, msg := range []string{"Hello", "Hello, World!"} {
		in, obs, err := pool.Start(ctx, env.Row{"prompt": "x"})
		require.NoError(t, err)
		assert.Equal(t, "", obs)
		r0, _, err := in.Reward(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0.0, r0)
		args, _ := json.Marshal(echo.EchoArgs{Message: msg})
		resp, err := in.Tools.Call(ctx, "echo", args)
		require.NoError(t, err)
		assert.Equal(t, msg, resp)
		_, err = in.Tools.Call(ctx, "echo", json.RawMessage(`{"message":""}`))
		assert.Error(t, err)
		r, ok, err := in.Reward(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, echo.Reward(msg), r, "the server's reward, bit for bit")
		in.Release()
	}
	assert.Equal(t, 1, pool.Size())

	c, err := echo.Dial(ctx, srv.URL)
	require.NoError(t, err)
	defer c.Close()
	r, err := c.Reset(ctx)
	require.NoError(t, err)
	assert.Equal(t, echo.ReadyMessage, r.Observation.EchoedMessage)
	r, err = c.Step(ctx, echo.Action{Message: "abc"})
	require.NoError(t, err)
	assert.Equal(t, echo.Observation{EchoedMessage: "abc", MessageLength: 3}, r.Observation)
	_, err = c.Step(ctx, echo.Action{Message: ""})
	var se *openenv.ServerError
	require.ErrorAs(t, err, &se)
	st, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.StepCount)
	require.NotNil(t, st.EpisodeID)
}
