package wordle

import (
	"context"
	"fmt"
	"strings"

	"github.com/x/env"
	"github.com/x/env/openenv"
)

// Result is one typed reset or step reply.
type Result = openenv.TypedResult[Observation]

// ResetOptions are the reset keys: Seed and EpisodeID for any server,
// SecretWord only for ours (a Python server ignores it).
type ResetOptions struct {
	Seed       *int64  `json:"seed,omitempty"`
	EpisodeID  *string `json:"episode_id,omitempty"`
	SecretWord *string `json:"secret_word,omitempty"`
}

// Client is a typed client of a Wordle server (ours or OpenEnv's
// textarena_env). It serves one caller at a time.
type Client struct {
	t *openenv.TypedClient[Observation, State]
}

// Dial connects to the server at url.
func Dial(ctx context.Context, url string, opts ...openenv.Option) (*Client, error) {
	t, err := openenv.DialTyped[Observation, State](ctx, "wordle", url, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{t: t}, nil
}

// Reset starts a game.
func (c *Client) Reset(ctx context.Context, o ResetOptions) (Result, error) {
	return c.t.Reset(ctx, o)
}

// Step sends one move (the raw text, e.g. "[crane]").
func (c *Client) Step(ctx context.Context, message string) (Result, error) {
	return c.t.Step(ctx, Action{Message: message})
}

// State returns the session state.
func (c *Client) State(ctx context.Context) (State, error) {
	return c.t.State(ctx)
}

// Close ends the session.
func (c *Client) Close() error { return c.t.Close() }

// Remote is the tool-style Wordle backed by a server, like TRL's Wordle
// environment class: the guess tool steps the server and answers with the
// new part of the transcript, worded as Env words it. It holds one session
// for its life.
type Remote struct {
	client *Client
	seen   string // the transcript so far
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

// ToolDescriptions describes the guess tool.
func (r *Remote) ToolDescriptions() map[string]string { return (&Env{}).ToolDescriptions() }

// Reset starts a game on the server; the row may give "secret_word" (our
// server only) or "seed".
func (r *Remote) Reset(ctx context.Context, row env.Row) (string, error) {
	var o ResetOptions
	secret, err := secretFromRow(row)
	if err != nil {
		return "", err
	}
	if secret != "" {
		o.SecretWord = &secret
	}
	if seed, ok, err := row.Int("seed"); err != nil {
		return "", err
	} else if ok {
		o.Seed = &seed
	}
	res, err := r.client.Reset(ctx, o)
	if err != nil {
		return "", err
	}
	r.seen, r.reward, r.done = res.Observation.Content(), 0, false
	return ToolIntro, nil
}

// Guess is the tool: one step on the server.
func (r *Remote) Guess(ctx context.Context, a GuessArgs) (string, error) {
	if r.done {
		return "", ErrGameOver
	}
	move := a.Word
	if !strings.ContainsAny(move, "[]") {
		move = "[" + move + "]"
	}
	res, err := r.client.Step(ctx, move)
	if err != nil {
		return "", err
	}
	content := res.Observation.Content()
	delta, ok := strings.CutPrefix(content, r.seen)
	if !ok {
		return "", fmt.Errorf("wordle: the server's transcript does not continue the previous one")
	}
	r.seen = content
	// delta is "\n[GAME] <move>" then "\n[GAME] <message>" per game message.
	msgs := strings.Split(strings.TrimPrefix(delta, "\n[GAME] "+move), "\n[GAME] ")[1:]
	if res.Reward != nil {
		r.reward = *res.Reward
	}
	r.done = res.Done
	won := res.Done && r.reward == 1 && len(msgs) == 0
	invalidEnd := res.Done && !won && len(msgs) == 0
	return toolResponse(msgs, res.Done, won, invalidEnd), nil
}

// Reward is the server's reward for the game.
func (r *Remote) Reward(ctx context.Context) (float64, error) { return r.reward, nil }

// Close ends the session.
func (r *Remote) Close() error { return r.client.Close() }
