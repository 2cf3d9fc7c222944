// Package env is the environment side of the trainer: the contract an
// environment satisfies, the factory and pool that give each rollout its
// own environment, and (in subpackages) the OpenEnv wire protocol, built-in
// environments and fakes for tests.
package env

import "context"

// Row is one dataset row: its columns by name. Reset receives it, so an
// environment can set itself up from the row (a secret word, a seed, a task).
type Row map[string]any

// Env is one environment instance, used by one rollout at a time.
//
// Reset starts a new episode from row and returns the initial observation
// text, which the trainer appends to the prompt ("" for none). Reset must
// fully reinitialise the instance: instances are pooled and reused across
// episodes ("construct once, reset often").
//
// The env's other exported methods are its tools; package tools says which
// methods qualify and how their arguments are described.
type Env interface {
	Reset(ctx context.Context, row Row) (string, error)
}

// Rewarder is an Env that owns its reward: Reward scores the episode in the
// env's current (final) state.
type Rewarder interface {
	Reward(ctx context.Context) (float64, error)
}

// Closer is an Env holding resources (a socket, a process) that must be
// released when the pool discards it.
type Closer interface {
	Close() error
}

// Factory makes environments. New must be safe for concurrent use; each
// Env it returns is used by one rollout at a time.
type Factory interface {
	New(ctx context.Context) (Env, error)
}

// FactoryFunc adapts a function to Factory.
type FactoryFunc func(ctx context.Context) (Env, error)

// New calls f.
func (f FactoryFunc) New(ctx context.Context) (Env, error) { return f(ctx) }
