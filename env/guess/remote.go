package guess

import (
	"context"
	"encoding/json"
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

// ResetOptions are the reset keys.
type ResetOptions struct {
	Seed      *int64  `json:"seed,omitempty"`
	EpisodeID *string `json:"episode_id,omitempty"`
	Target    *int64  `json:"target,omitempty"`
}

// Client is a typed client of a guess-the-number server. It serves one
// caller at a time.
type Client struct {
	c *openenv.Client
}

// Dial connects to the server at url.
func Dial(ctx context.Context, url string, opts ...openenv.Option) (*Client, error) {
	c, err := openenv.Dial(ctx, url, opts...)
	if err != nil {
		return nil, fmt.Errorf("guess: dial %s: %w", url, err)
	}
	return &Client{c: c}, nil
}

// Reset starts a game.
func (c *Client) Reset(ctx context.Context, o ResetOptions) (Result, error) {
	r, err := c.c.Reset(ctx, o)
	if err != nil {
		return Result{}, fmt.Errorf("guess: reset: %w", err)
	}
	return decode(r)
}

// Step sends a guess.
func (c *Client) Step(ctx context.Context, n int) (Result, error) {
	r, err := c.c.Step(ctx, Action{Guess: n})
	if err != nil {
		return Result{}, fmt.Errorf("guess: step: %w", err)
	}
	return decode(r)
}

// State returns the session state.
func (c *Client) State(ctx context.Context) (State, error) {
	raw, err := c.c.State(ctx)
	if err != nil {
		return State{}, fmt.Errorf("guess: state: %w", err)
	}
	var s State
	if err := json.Unmarshal(raw, &s); err != nil {
		return State{}, fmt.Errorf("guess: decode state: %w", err)
	}
	return s, nil
}

// Close ends the session.
func (c *Client) Close() error { return c.c.Close() }

func decode(r openenv.Result) (Result, error) {
	var obs Observation
	if err := r.DecodeObservation(&obs); err != nil {
		return Result{}, fmt.Errorf("guess: decode observation: %w", err)
	}
	return Result{Observation: obs, Reward: r.Reward, Done: r.Done}, nil
}

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
