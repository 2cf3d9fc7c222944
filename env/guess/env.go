package guess

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/x/env"
	"github.com/x/env/internal/pyjson"
)

// Options configure the games a factory makes.
type Options struct {
	Rules
	// Seed seeds the hidden numbers (and episode ids when served).
	Seed uint64
}

// GuessArgs are the arguments of the guess tool.
type GuessArgs struct {
	Number int `json:"number" desc:"your guess, a whole number in the game's range"`
}

// Env is the in-process, tool-style game: one tool, guess.
type Env struct {
	rules Rules
	rng   *rand.Rand
	// Game is the current game, for reward functions to inspect.
	Game Game
}

// NewFactory returns a factory of Envs; environment i draws its numbers
// from a stream seeded by (opts.Seed, i).
func NewFactory(opts Options) env.Factory {
	var n atomic.Uint64
	return env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		return NewEnv(opts.Rules, pyjson.Seeds(opts.Seed, n.Add(1)-1)), nil
	})
}

// NewEnv returns an Env; a nil rng means a stream seeded with 0.
func NewEnv(rules Rules, rng *rand.Rand) *Env {
	if rng == nil {
		rng = pyjson.Seeds(0, 0)
	}
	return &Env{rules: rules.withDefaults(), rng: rng}
}

// ToolDescriptions describes the guess tool.
func (e *Env) ToolDescriptions() map[string]string {
	return map[string]string{"Guess": "Guess the hidden number; the reply says whether it is higher or lower."}
}

// Reset starts a game. The row may give "target" (the number) or "seed"
// (draws it reproducibly).
func (e *Env) Reset(ctx context.Context, row env.Row) (string, error) {
	target, err := targetFor(row, e.rules, e.rng)
	if err != nil {
		return "", err
	}
	if err := e.Game.Reset(e.rules, target); err != nil {
		return "", err
	}
	return e.Game.Intro(), nil
}

// Guess is the tool.
func (e *Env) Guess(ctx context.Context, a GuessArgs) (string, error) {
	hint, err := e.Game.Guess(a.Number)
	if err != nil {
		return "", err
	}
	return e.Game.Message(a.Number, hint), nil
}

// Reward favours few guesses (see Game.Reward).
func (e *Env) Reward(ctx context.Context) (float64, error) { return e.Game.Reward(), nil }

// targetFor picks the hidden number for a row.
func targetFor(row env.Row, rules Rules, rng *rand.Rand) (int, error) {
	rules = rules.withDefaults()
	if t, ok, err := row.Int("target"); err != nil {
		return 0, err
	} else if ok {
		if t < 1 || t > int64(rules.Max) {
			return 0, fmt.Errorf("guess: target %d is outside 1..%d", t, rules.Max)
		}
		return int(t), nil
	}
	if seed, ok, err := row.Int("seed"); err != nil {
		return 0, err
	} else if ok {
		return TargetForSeed(rules, seed), nil
	}
	return 1 + rng.IntN(rules.Max), nil
}

// TargetForSeed is the number a seed selects.
func TargetForSeed(rules Rules, seed int64) int {
	return 1 + pyjson.Seeds(uint64(seed), 0).IntN(rules.withDefaults().Max)
}
