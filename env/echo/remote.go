package echo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/x/env"
	"github.com/x/env/openenv"
)

// Result is one typed reset or step reply.
type Result struct {
	Observation Observation
	Reward      *float64
	Done        bool
}

// Client is a typed client of an echo server (ours or Python's). Like the
// underlying openenv.Client it serves one caller at a time.
type Client struct {
	c *openenv.Client
}

// Dial connects to the echo server at url (http://host:port).
func Dial(ctx context.Context, url string, opts ...openenv.Option) (*Client, error) {
	c, err := openenv.Dial(ctx, url, opts...)
	if err != nil {
		return nil, fmt.Errorf("echo: dial %s: %w", url, err)
	}
	return &Client{c: c}, nil
}

// Reset starts an episode.
func (c *Client) Reset(ctx context.Context) (Result, error) {
	r, err := c.c.Reset(ctx, map[string]any{})
	if err != nil {
		return Result{}, fmt.Errorf("echo: reset: %w", err)
	}
	return decode(r)
}

// Step sends a message.
func (c *Client) Step(ctx context.Context, a Action) (Result, error) {
	r, err := c.c.Step(ctx, a)
	if err != nil {
		return Result{}, fmt.Errorf("echo: step: %w", err)
	}
	return decode(r)
}

// State returns the session state.
func (c *Client) State(ctx context.Context) (State, error) {
	raw, err := c.c.State(ctx)
	if err != nil {
		return State{}, fmt.Errorf("echo: state: %w", err)
	}
	var s State
	if err := json.Unmarshal(raw, &s); err != nil {
		return State{}, fmt.Errorf("echo: decode state: %w", err)
	}
	return s, nil
}

// Close ends the session.
func (c *Client) Close() error { return c.c.Close() }

func decode(r openenv.Result) (Result, error) {
	var obs Observation
	if err := r.DecodeObservation(&obs); err != nil {
		return Result{}, fmt.Errorf("echo: decode observation: %w", err)
	}
	return Result{Observation: obs, Reward: r.Reward, Done: r.Done}, nil
}

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
