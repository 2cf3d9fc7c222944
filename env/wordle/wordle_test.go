package wordle_test

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

	"github.com/x/env/openenv"
	"github.com/x/env/wordle"
)

var uuidRE = regexp.MustCompile(`"episode_id":"[0-9a-f-]{36}"`)

// TestReplayRecordedGames replays wordle.json, recorded from OpenEnv's
// textarena_env (TextArena 0.7.4) with the secret "plant", against our
// server over a WebSocket, comparing every reply byte for byte (episode
// ids aside). Upstream draws the secret; our reset option secret_word
// fixes it.
func TestReplayRecordedGames(t *testing.T) {
	raw, err := os.ReadFile("testdata/wordle.json")
	require.NoError(t, err)
	var tr struct {
		Frames []struct {
			SentRaw string `json:"sent_raw"`
			RecvRaw string `json:"recv_raw"`
		} `json:"frames"`
	}
	require.NoError(t, json.Unmarshal(raw, &tr))

	srv := httptest.NewServer(openenv.NewServer(wordle.NewEnvironmentFactory(wordle.Options{Seed: 1})))
	defer srv.Close()
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
	require.NoError(t, err)
	defer c.Close()
	n := 0
	for _, f := range tr.Frames {
		if f.SentRaw == "" || f.RecvRaw == "" {
			continue
		}
		sent := f.SentRaw
		if sent == `{"type": "reset"}` {
			sent = `{"type": "reset", "data": {"secret_word": "plant"}}`
		}
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		require.NoError(t, c.WriteMessage(websocket.TextMessage, []byte(sent)))
		_, got, err := c.ReadMessage()
		require.NoError(t, err)
		norm := func(s string) string { return uuidRE.ReplaceAllString(s, `"episode_id":"<uuid>"`) }
		assert.Equal(t, norm(f.RecvRaw), norm(string(got)), "reply to %s", f.SentRaw)
		n++
	}
	assert.Equal(t, 19, n, "frames replayed, state frames included")
}

func TestScore(t *testing.T) {
	for _, tc := range []struct{ secret, guess, want string }{
		{"plant", "crane", "XXGGX"},
		{"plant", "slate", "XGGYX"},
		{"plant", "pilot", "GXYXG"},
		{"abbey", "babes", "YYGGX"},
		{"apple", "papal", "YYGXY"},
		{"eerie", "geese", "XGYXG"},
		{"llama", "hello", "XXYYX"},
		{"plant", "plant", "GGGGG"},
	} {
		assert.Equal(t, tc.want, wordle.Score(tc.secret, tc.guess), "%s/%s", tc.secret, tc.guess)
	}
}

func TestDictionary(t *testing.T) {
	d := wordle.DefaultDictionary()
	secrets := d.Secrets()
	assert.GreaterOrEqual(t, len(secrets), 300)
	assert.GreaterOrEqual(t, d.Size(), 1500)
	seen := map[string]bool{}
	for _, w := range secrets {
		assert.Regexp(t, `^[a-z]{5}$`, w)
		assert.False(t, seen[w], "duplicate secret %s", w)
		seen[w] = true
		assert.True(t, d.Allowed(w), "secret %s must be an allowed guess", w)
	}
	for _, w := range []string{"plant", "crane", "slate", "pilot", "mound", "fight", "brick", "apple"} {
		assert.True(t, d.Allowed(w), w)
	}
	assert.False(t, d.Allowed("xyzzy"))
	assert.False(t, d.Allowed("Plant"), "lookups are exact: the game lower-cases guesses")
}

func TestGameRules(t *testing.T) {
	d := wordle.DefaultDictionary()
	var g wordle.Game
	g.Reset(d, "plant")
	assert.Equal(t, []string{"You attempted an invalid move. Reason: You tried submitting a word in the wrong format. Please make sure to use squared brackets. Please resubmit a valid move and remember to follow the game rules to avoid penalties."},
		g.Step("[crane"))
	assert.Equal(t, []string{"You submitted [crane].\nFeedback:\nC R A N E\nX X G G X\nYou have 5 guesses left."},
		g.Step("My guess: [CRANE] and [slate]"), "first bracketed word, lower-cased; a valid move forgives the earlier invalid one")
	assert.Contains(t, g.Step("[toolong]")[0], "Your word must be exactly 5 letters.")
	assert.Empty(t, g.Step("[crane]"), "a second invalid move in a row ends the game without a message")
	assert.True(t, g.Done())
	assert.False(t, g.Won())
	assert.Equal(t, 0.4, g.Reward(), "completion of the last valid guess: 2 greens")

	g.Reset(d, "plant")
	for _, w := range []string{"crane", "slate", "pilot", "mound", "fight"} {
		g.Step(w) // no brackets: wrapped
	}
	msgs := g.Step("[brick]")
	assert.Equal(t, []string{"You submitted [brick].\nFeedback:\nB R I C K\nX X X X X\nYou have 0 guesses left."}, msgs)
	assert.True(t, g.Done())
	assert.Equal(t, 0.0, g.Reward())
	assert.Equal(t, 6, g.Turn())

	g.Reset(d, "plant")
	g.Step("[slate]")
	for range 5 {
		g.Step("[slate]") // repeat: invalid, then game over
	}
	assert.True(t, g.Done())
	assert.Equal(t, 0.5, g.Reward(), "slate: 2 greens + 1 yellow")

	g.Reset(d, "plant")
	assert.Empty(t, g.Step("[plant]"), "a win adds no message")
	assert.True(t, g.Won())
	assert.Equal(t, 1.0, g.Reward())
	g.Step("[plane]")
	assert.Equal(t, 1.0, g.Reward(), "the result sticks after the end")

	assert.Panics(t, func() { g.Reset(d, "PLANT") })
}

func TestEnvironmentSignalsAndSeeds(t *testing.T) {
	ctx := context.Background()
	f := wordle.NewEnvironmentFactory(wordle.Options{})
	e, err := f.NewEnvironment(ctx)
	require.NoError(t, err)
	secretOf := func(opts string) string {
		_, err := e.Reset(ctx, json.RawMessage(opts))
		require.NoError(t, err)
		raw, err := e.State(ctx)
		require.NoError(t, err)
		var st struct {
			RawState struct {
				GameState struct {
					SecretWord string `json:"secret_word"`
				} `json:"game_state"`
			} `json:"raw_state"`
		}
		require.NoError(t, json.Unmarshal(raw, &st))
		return st.RawState.GameState.SecretWord
	}
	assert.Equal(t, secretOf(`{"seed":42}`), secretOf(`{"seed":42}`))
	assert.Equal(t, "rocky", secretOf(`{"secret_word":"ROCKY"}`))
	_, err = e.Reset(ctx, json.RawMessage(`{"secret_word":"toolong"}`))
	assert.ErrorContains(t, err, "not five letters")

	var ve *openenv.ValidationError
	_, err = e.Step(ctx, json.RawMessage(`{"message":1}`))
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "string_type", ve.Errors[0].Type)
	_, err = e.Step(ctx, json.RawMessage(`{"msg":"x"}`))
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, []string{"missing", "extra_forbidden"}, []string{ve.Errors[0].Type, ve.Errors[1].Type})

	r, err := e.Step(ctx, json.RawMessage(`{"message":"I think ROCKS"}`))
	require.NoError(t, err)
	var obs wordle.Observation
	require.NoError(t, r.DecodeObservation(&obs))
	assert.Contains(t, obs.Content(), "[I think ROCKS]")
	require.NotNil(t, obs.Info.RewardSignals)
	assert.Equal(t, 1.0, float64(obs.Info.RewardSignals.Repetitions))
}
