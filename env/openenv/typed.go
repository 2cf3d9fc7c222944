package openenv

import (
	"context"
	"encoding/json"
	"fmt"
)

// TypedResult is a reset or step reply whose observation is decoded into O.
type TypedResult[O any] struct {
	Observation O
	Reward      *float64
	Done        bool
}

// TypedClient is a Client whose observations decode into O and whose state
// decodes into S. The built-in environments' clients are thin wrappers
// around one, adding their own action types. Errors are prefixed with the
// client's name. Like Client it serves one caller at a time.
type TypedClient[O, S any] struct {
	c    *Client
	name string
}

// DialTyped connects to the server at url; name prefixes errors (e.g.
// "wordle").
func DialTyped[O, S any](ctx context.Context, name, url string, opts ...Option) (*TypedClient[O, S], error) {
	c, err := Dial(ctx, url, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: dial %s: %w", name, url, err)
	}
	return &TypedClient[O, S]{c: c, name: name}, nil
}

// Reset starts an episode with the given reset options (any JSON object).
func (t *TypedClient[O, S]) Reset(ctx context.Context, opts any) (TypedResult[O], error) {
	r, err := t.c.Reset(ctx, opts)
	if err != nil {
		return TypedResult[O]{}, fmt.Errorf("%s: reset: %w", t.name, err)
	}
	return t.decode(r)
}

// Step sends one action.
func (t *TypedClient[O, S]) Step(ctx context.Context, action any) (TypedResult[O], error) {
	r, err := t.c.Step(ctx, action)
	if err != nil {
		return TypedResult[O]{}, fmt.Errorf("%s: step: %w", t.name, err)
	}
	return t.decode(r)
}

// State returns the session state.
func (t *TypedClient[O, S]) State(ctx context.Context) (S, error) {
	var s S
	raw, err := t.c.State(ctx)
	if err != nil {
		return s, fmt.Errorf("%s: state: %w", t.name, err)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("%s: decode state: %w", t.name, err)
	}
	return s, nil
}

// Close ends the session.
func (t *TypedClient[O, S]) Close() error { return t.c.Close() }

func (t *TypedClient[O, S]) decode(r Result) (TypedResult[O], error) {
	var obs O
	if err := json.Unmarshal(r.Observation, &obs); err != nil {
		return TypedResult[O]{}, fmt.Errorf("%s: decode observation: %w", t.name, err)
	}
	return TypedResult[O]{Observation: obs, Reward: r.Reward, Done: r.Done}, nil
}
