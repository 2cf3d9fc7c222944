package openenv

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type typedEchoObs struct {
	EchoedMessage string `json:"echoed_message"`
	MessageLength int    `json:"message_length"`
}

type typedEchoState struct {
	EpisodeID string `json:"episode_id"`
	StepCount int    `json:"step_count"`
}

func TestTypedClient(t *testing.T) {
	_, hs := startServer(t, &echoFactory{})
	ctx := ctxTimeout(t, 5*time.Second)
	c, err := DialTyped[typedEchoObs, typedEchoState](ctx, "echo", hs.URL)
	require.NoError(t, err)
	defer c.Close()

	res, err := c.Reset(ctx, map[string]any{})
	require.NoError(t, err)
	assert.Equal(t, "Echo environment ready!", res.Observation.EchoedMessage)
	res, err = c.Step(ctx, echoAction{Message: "héllo"})
	require.NoError(t, err)
	assert.Equal(t, typedEchoObs{EchoedMessage: "héllo", MessageLength: 5}, res.Observation)
	require.NotNil(t, res.Reward)
	assert.InDelta(t, 0.5, *res.Reward, 1e-12)
	st, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, typedEchoState{EpisodeID: "ep-1", StepCount: 1}, st, "the test env numbers its episodes")

	_, err = c.Step(ctx, map[string]any{"message": ""})
	var se *ServerError
	require.ErrorAs(t, err, &se, "server errors stay typed through the wrapper")
	assert.ErrorContains(t, err, "echo: step: ")

	// An observation that does not fit O is an error naming the client.
	bad, err := DialTyped[struct {
		EchoedMessage int `json:"echoed_message"`
	}, typedEchoState](ctx, "strict", hs.URL)
	require.NoError(t, err)
	defer bad.Close()
	_, err = bad.Reset(ctx, map[string]any{})
	assert.ErrorContains(t, err, "strict: decode observation")

	_, err = DialTyped[typedEchoObs, typedEchoState](ctx, "echo", "http://127.0.0.1:1")
	assert.ErrorContains(t, err, "echo: dial http://127.0.0.1:1")
}
