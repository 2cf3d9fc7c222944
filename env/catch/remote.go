package catch

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/x/env"
	"github.com/x/env/openenv"
)

// Result is one typed reset or step reply; its Reward is nil at reset, as
// OpenSpiel sends null.
type Result = openenv.TypedResult[Observation]

// ResetOptions are the reset keys: Seed for any server, BallColumn only
// for ours (a Python server ignores it).
type ResetOptions struct {
	Seed       *int64 `json:"seed,omitempty"`
	BallColumn *int   `json:"ball_column,omitempty"`
}

// Client is a typed client of an OpenSpiel catch server (ours or
// OpenEnv's). It serves one caller at a time.
type Client struct {
	t *openenv.TypedClient[Observation, State]
}

// Dial connects to the server at url.
func Dial(ctx context.Context, url string, opts ...openenv.Option) (*Client, error) {
	t, err := openenv.DialTyped[Observation, State](ctx, "catch", url, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{t: t}, nil
}

// Reset starts a game.
func (c *Client) Reset(ctx context.Context, o ResetOptions) (Result, error) {
	return c.t.Reset(ctx, o)
}

// Step sends an action id (0 left, 1 stay, 2 right).
func (c *Client) Step(ctx context.Context, actionID int) (Result, error) {
	return c.t.Step(ctx, Action{ActionID: actionID, GameName: "catch", GameParams: map[string]any{}})
}

// State returns the session state.
func (c *Client) State(ctx context.Context) (State, error) {
	return c.t.State(ctx)
}

// Close ends the session.
func (c *Client) Close() error { return c.t.Close() }

// Remote is the tool-style catch env backed by a server: the same move
// tool, text and reward as Env, each move a step on the server. It holds
// one session for its life.
type Remote struct {
	client *Client
	game   Game
	reward float64
	done   bool
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

// ToolDescriptions describes the move tool.
func (r *Remote) ToolDescriptions() map[string]string { return (&Env{}).ToolDescriptions() }

// Reset starts a game on the server; the row may set "seed" and
// "ball_column" as for Env.
func (r *Remote) Reset(ctx context.Context, row env.Row) (string, error) {
	var o ResetOptions
	if seed, ok, err := row.Int("seed"); err != nil {
		return "", err
	} else if ok {
		o.Seed = &seed
	}
	if col, ok, err := row.Int("ball_column"); err != nil {
		return "", err
	} else if ok {
		if col < 0 || col >= Columns {
			return "", fmt.Errorf("catch: ball_column %d is outside 0..%d", col, Columns-1)
		}
		c := int(col)
		o.BallColumn = &c
	}
	res, err := r.client.Reset(ctx, o)
	if err != nil {
		return "", err
	}
	if r.game, err = gameOf(res.Observation); err != nil {
		return "", err
	}
	r.reward, r.done = 0, false
	return Intro + r.game.Text(), nil
}

// Move is the tool: one step on the server.
func (r *Remote) Move(ctx context.Context, a MoveArgs) (string, error) {
	if r.done {
		return "", errors.New("catch: the game is over")
	}
	res, err := r.client.Step(ctx, direction(a.Direction))
	if err != nil {
		return "", err
	}
	if r.game, err = gameOf(res.Observation); err != nil {
		return "", err
	}
	if res.Done {
		r.done = true
		if res.Reward != nil {
			r.reward = math.Max(*res.Reward, 0)
		}
		// The observation cannot tell a catch from a miss under the
		// paddle's row; the reward can.
		if r.reward == 0 {
			return "You missed the ball. The game is over.", nil
		}
		return "You caught the ball! The game is over.", nil
	}
	return r.game.Text(), nil
}

// Reward is 1 if the ball was caught, else 0 (the server's ±1 clamped at
// 0, as TRL's Catch example does).
func (r *Remote) Reward(ctx context.Context) (float64, error) { return r.reward, nil }

// Close ends the session.
func (r *Remote) Close() error { return r.client.Close() }
