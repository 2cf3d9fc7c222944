package guess

import (
	"context"

	"github.com/x/env"
	"github.com/x/env/openenv"
)

// Result is one typed reset or step reply.
type Result = openenv.TypedResult[Observation]

// ResetOptions are the reset keys.
type ResetOptions struct {
	Seed      *int64  `json:"seed,omitempty"`
	EpisodeID *string `json:"episode_id,omitempty"`
	Target    *int64  `json:"target,omitempty"`
}

// Client is a typed client of a guess-the-number server. It serves one
// caller at a time.
type Client struct {
	t *openenv.TypedClient[Observation, State]
}

// Dial connects to the server at url.
func Dial(ctx context.Context, url string, opts ...openenv.Option) (*Client, error) {
	t, err := openenv.DialTyped[Observation, State](ctx, "guess", url, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{t: t}, nil
}

// Reset starts a game.
func (c *Client) Reset(ctx context.Context, o ResetOptions) (Result, error) {
	return c.t.Reset(ctx, o)
}

// Step sends a guess.
func (c *Client) Step(ctx context.Context, n int) (Result, error) {
	return c.t.Step(ctx, Action{Guess: n})
}

// State returns the session state.
func (c *Client) State(ctx context.Context) (State, error) {
	return c.t.State(ctx)
}

// Close ends the session.
func (c *Client) Close() error { return c.t.Close() }

// Remote is the tool-style game backed by a server: the guess tool steps
// the server and answers with its message. It holds one session.
type Remote struct {
	client *Client
	reward float64
}

// NewRemoteFactory returns a factory of Remote envs, each with its own
// session on the server at url.
func NewRemoteFactory(url string, opts ...openenv.Option) env.Factory {
	return env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		c, err := Dial(ctx, url, opts...)
		if err != nil {
			return nil, err
		}
		return &Remote{client: c}, nil
	})
}

// ToolDescriptions describes the guess tool.
func (r *Remote) ToolDescriptions() map[string]string { return (&Env{}).ToolDescriptions() }

// Reset starts a game on the server; the row may give "target" or "seed".
func (r *Remote) Reset(ctx context.Context, row env.Row) (string, error) {
	var o ResetOptions
	if t, ok, err := row.Int("target"); err != nil {
		return "", err
	} else if ok {
		o.Target = &t
	}
	if s, ok, err := row.Int("seed"); err != nil {
		return "", err
	} else if ok {
		o.Seed = &s
	}
	res, err := r.client.Reset(ctx, o)
	if err != nil {
		return "", err
	}
	r.reward = 0
	return res.Observation.Message, nil
}

// Guess is the tool: one step on the server.
func (r *Remote) Guess(ctx context.Context, a GuessArgs) (string, error) {
	res, err := r.client.Step(ctx, a.Number)
	if err != nil {
		return "", err
	}
	if res.Reward != nil {
		r.reward = *res.Reward
	}
	return res.Observation.Message, nil
}

// Reward is the server's reward for the game.
func (r *Remote) Reward(ctx context.Context) (float64, error) { return r.reward, nil }

// Close ends the session.
func (r *Remote) Close() error { return r.client.Close() }
