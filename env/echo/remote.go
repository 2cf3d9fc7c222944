package echo

import (
	"context"
	"errors"

	"github.com/x/env"
	"github.com/x/env/openenv"
)

// Result is one typed reset or step reply.
type Result = openenv.TypedResult[Observation]

// Client is a typed client of an echo server (ours or Python's). Like the
// underlying openenv.Client it serves one caller at a time.
type Client struct {
	t *openenv.TypedClient[Observation, State]
}

// Dial connects to the echo server at url (http://host:port).
func Dial(ctx context.Context, url string, opts ...openenv.Option) (*Client, error) {
	t, err := openenv.DialTyped[Observation, State](ctx, "echo", url, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{t: t}, nil
}

// Reset starts an episode.
func (c *Client) Reset(ctx context.Context) (Result, error) {
	return c.t.Reset(ctx, map[string]any{})
}

// Step sends a message.
func (c *Client) Step(ctx context.Context, a Action) (Result, error) {
	return c.t.Step(ctx, a)
}

// State returns the session state.
func (c *Client) State(ctx context.Context) (State, error) {
	return c.t.State(ctx)
}

// Close ends the session.
func (c *Client) Close() error { return c.t.Close() }

// Remote is the tool-style echo env backed by a server: the same tool and
// reward as Env, each echo a step on the server. It holds one session
// (one WebSocket) for its life; close it to end the session.
type Remote struct {
	client *Client
	reward float64
	echoed bool
}

// NewRemoteFactory returns a factory of Remote envs, each dialing its own
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

// ToolDescriptions describes the echo tool.
func (r *Remote) ToolDescriptions() map[string]string {
	return map[string]string{"Echo": "Send a message to the environment, which echoes it back."}
}

// Reset resets the server session (reconnecting if it was lost).
func (r *Remote) Reset(ctx context.Context, row env.Row) (string, error) {
	if _, err := r.client.Reset(ctx); err != nil {
		return "", err
	}
	r.reward, r.echoed = 0, false
	return "", nil
}

// Echo is the tool: one step on the server.
func (r *Remote) Echo(ctx context.Context, a EchoArgs) (string, error) {
	if a.Message == "" {
		return "", errors.New("message must have at least 1 character")
	}
	res, err := r.client.Step(ctx, Action(a))
	if err != nil {
		return "", err
	}
	if res.Reward != nil {
		r.reward = *res.Reward
	}
	r.echoed = true
	return res.Observation.EchoedMessage, nil
}

// Reward is the server's reward for the last echo (0 before any).
func (r *Remote) Reward(ctx context.Context) (float64, error) {
	if !r.echoed {
		return 0, nil
	}
	return r.reward, nil
}

// Close ends the session.
func (r *Remote) Close() error { return r.client.Close() }
