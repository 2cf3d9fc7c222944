package guess

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/x/env"
	"github.com/x/env/internal/pyjson"
	"github.com/x/env/openenv"
)

// EnvironmentFactory makes guess-the-number Environments for an openenv
// server. It is safe for concurrent use.
type EnvironmentFactory struct {
	opts Options
	n    atomic.Uint64
}

// NewEnvironmentFactory returns a factory for serving the game over
// OpenEnv.
func NewEnvironmentFactory(opts Options) *EnvironmentFactory {
	opts.Rules = opts.Rules.withDefaults()
	return &EnvironmentFactory{opts: opts}
}

// NewEnvironment makes one session's environment.
func (f *EnvironmentFactory) NewEnvironment(ctx context.Context) (openenv.Environment, error) {
	return NewEnvironment(f.opts.Rules, pyjson.Seeds(f.opts.Seed, f.n.Add(1)-1)), nil
}

// Metadata describes the environment.
func (f *EnvironmentFactory) Metadata() openenv.Metadata {
	return openenv.Metadata{Name: "GuessTheNumberEnvironment",
		Description: fmt.Sprintf("Find a hidden number in 1..%d from higher/lower hints.", f.opts.Max), Version: "1.0.0"}
}

// ActionSchema is the action's JSON schema.
func (f *EnvironmentFactory) ActionSchema() json.RawMessage {
	return json.RawMessage(`{"additionalProperties":false,"properties":{"metadata":{"additionalProperties":true,"title":"Metadata","type":"object"},"guess":{"description":"The guessed number","title":"Guess","type":"integer"}},"required":["guess"],"title":"GuessAction","type":"object"}`)
}

// ObservationSchema is the observation's JSON schema.
func (f *EnvironmentFactory) ObservationSchema() json.RawMessage {
	return json.RawMessage(`{"additionalProperties":false,"properties":{"done":{"default":false,"title":"Done","type":"boolean"},"reward":{"anyOf":[{"type":"number"},{"type":"null"}],"default":null,"title":"Reward"},"metadata":{"additionalProperties":true,"title":"Metadata","type":"object"},"hint":{"title":"Hint","type":"string"},"message":{"title":"Message","type":"string"},"guesses":{"title":"Guesses","type":"integer"},"remaining":{"title":"Remaining","type":"integer"},"max_number":{"title":"Max Number","type":"integer"}},"required":["message"],"title":"GuessObservation","type":"object"}`)
}

// Action is {"guess": n}.
type Action struct {
	Guess int `json:"guess"`
}

// Observation is the game's observation, fields in wire order. Hint is ""
// at reset, else higher, lower or correct.
type Observation struct {
	Hint      string `json:"hint"`
	Message   string `json:"message"`
	Guesses   int    `json:"guesses"`
	Remaining int    `json:"remaining"`
	MaxNumber int    `json:"max_number"`
}

// State is the session state (the number stays hidden).
type State struct {
	EpisodeID  *string `json:"episode_id"`
	StepCount  int     `json:"step_count"`
	MaxNumber  int     `json:"max_number"`
	MaxGuesses int     `json:"max_guesses"`
	Found      bool    `json:"found"`
}

// Environment is one session, used from one goroutine at a time.
type Environment struct {
	rules     Rules
	rng       *rand.Rand
	game      Game
	episodeID string
	steps     int
}

// NewEnvironment returns a session drawing numbers with rng. It starts a
// game at once, so it can be stepped before any reset.
func NewEnvironment(rules Rules, rng *rand.Rand) *Environment {
	e := &Environment{rules: rules.withDefaults(), rng: rng, episodeID: pyjson.UUID4(rng)}
	_ = e.game.Reset(e.rules, 1+rng.IntN(e.rules.Max)) // in range by construction
	return e
}

// Reset starts a game. Options: seed, episode_id, and target (fixes the
// number).
func (e *Environment) Reset(ctx context.Context, opts json.RawMessage) (openenv.Result, error) {
	var o struct {
		Seed      *int64  `json:"seed"`
		EpisodeID *string `json:"episode_id"`
		Target    *int64  `json:"target"`
	}
	if len(opts) > 0 {
		if err := json.Unmarshal(opts, &o); err != nil {
			return openenv.Result{}, fmt.Errorf("guess: reset options: %w", err)
		}
	}
	row := env.Row{}
	if o.Seed != nil {
		row["seed"] = *o.Seed
	}
	if o.Target != nil {
		row["target"] = *o.Target
	}
	target, err := targetFor(row, e.rules, e.rng)
	if err != nil {
		return openenv.Result{}, err
	}
	if err := e.game.Reset(e.rules, target); err != nil {
		return openenv.Result{}, err
	}
	e.episodeID, e.steps = pyjson.UUID4(e.rng), 0
	if o.EpisodeID != nil {
		e.episodeID = *o.EpisodeID
	}
	return e.result("", e.game.Intro(), 0)
}

// Step plays a guess. A guess out of range, or after the end, is an
// execution error and does not count.
func (e *Environment) Step(ctx context.Context, action json.RawMessage) (openenv.Result, error) {
	v, err := pyjson.Action(action, "GuessAction", "guess")
	if err != nil {
		return openenv.Result{}, err
	}
	var n int64
	if x, ok := v.Require("guess"); ok {
		var fe []openenv.FieldError
		n, fe = pyjson.Int("guess", x)
		v.Add(fe...)
	}
	if err := v.Err(); err != nil {
		return openenv.Result{}, err
	}
	if n < 1 || n > int64(e.rules.Max) {
		return openenv.Result{}, fmt.Errorf("guess: %d is outside 1..%d", n, e.rules.Max)
	}
	hint, err := e.game.Guess(int(n))
	if err != nil {
		return openenv.Result{}, err
	}
	e.steps++
	return e.result(hint, e.game.Message(int(n), hint), e.game.Reward())
}

// State returns the session state.
func (e *Environment) State(ctx context.Context) (json.RawMessage, error) {
	return pyjson.Marshal(State{EpisodeID: &e.episodeID, StepCount: e.steps, MaxNumber: e.rules.Max,
		MaxGuesses: e.rules.MaxGuesses, Found: e.game.Found})
}

func (e *Environment) result(hint, msg string, reward float64) (openenv.Result, error) {
	b, err := pyjson.Marshal(Observation{Hint: hint, Message: msg, Guesses: len(e.game.Guesses),
		Remaining: e.game.Remaining(), MaxNumber: e.rules.Max})
	if err != nil {
		return openenv.Result{}, err
	}
	return openenv.Result{Observation: b, Reward: &reward, Done: e.game.Done()}, nil
}
