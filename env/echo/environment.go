package echo

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"sync/atomic"

	"github.com/x/env/internal/pyjson"
	"github.com/x/env/openenv"
)

// Options configure the echo environments a factory makes.
type Options struct {
	// Seed seeds the episode ids, so a run is reproducible.
	Seed uint64
}

// EnvironmentFactory makes echo Environments for an openenv server. It is
// safe for concurrent use and describes itself for /metadata and /schema.
type EnvironmentFactory struct {
	opts Options
	n    atomic.Uint64
}

// NewEnvironmentFactory returns a factory for serving echo over OpenEnv.
func NewEnvironmentFactory(opts Options) *EnvironmentFactory {
	return &EnvironmentFactory{opts: opts}
}

// NewEnvironment makes one session's environment.
func (f *EnvironmentFactory) NewEnvironment(ctx context.Context) (openenv.Environment, error) {
	return NewEnvironment(pyjson.Seeds(f.opts.Seed, f.n.Add(1)-1)), nil
}

// Metadata is what the Python server reports.
func (f *EnvironmentFactory) Metadata() openenv.Metadata {
	return openenv.Metadata{Name: "EchoEnvironment", Description: "EchoEnvironment environment", Version: "1.0.0"}
}

// ActionSchema is EchoAction's pydantic JSON schema.
func (f *EnvironmentFactory) ActionSchema() json.RawMessage {
	return json.RawMessage(`{"additionalProperties":false,"description":"Action for the Echo environment - just a message to echo.","properties":{"metadata":{"additionalProperties":true,"description":"Additional metadata for the action","title":"Metadata","type":"object"},"message":{"description":"Message to echo back","minLength":1,"title":"Message","type":"string"}},"required":["message"],"title":"EchoAction","type":"object"}`)
}

// ObservationSchema is EchoObservation's pydantic JSON schema.
func (f *EnvironmentFactory) ObservationSchema() json.RawMessage {
	return json.RawMessage(`{"additionalProperties":false,"description":"Observation from the Echo environment - the echoed message.","properties":{"done":{"default":false,"description":"Whether the episode has terminated","title":"Done","type":"boolean"},"reward":{"anyOf":[{"type":"boolean"},{"type":"integer"},{"type":"number"},{"type":"null"}],"default":null,"description":"Reward signal from the last action","title":"Reward"},"metadata":{"additionalProperties":true,"description":"Additional metadata for the observation","title":"Metadata","type":"object"},"echoed_message":{"description":"The echoed message from the environment","title":"Echoed Message","type":"string"},"message_length":{"default":0,"description":"Length of the echoed message","minimum":0,"title":"Message Length","type":"integer"}},"required":["echoed_message"],"title":"EchoObservation","type":"object"}`)
}

// Environment is one OpenEnv echo session. Like the Python env it can be
// stepped before any reset. It is used from one goroutine at a time.
type Environment struct {
	rng       *rand.Rand
	episodeID string
	steps     int
}

// NewEnvironment returns an echo session drawing episode ids from rng.
func NewEnvironment(rng *rand.Rand) *Environment {
	return &Environment{rng: rng, episodeID: pyjson.UUID4(rng)}
}

// Reset starts an episode. Like the Python env it ignores seed and
// episode_id and draws a new episode id.
func (e *Environment) Reset(ctx context.Context, opts json.RawMessage) (openenv.Result, error) {
	e.episodeID, e.steps = pyjson.UUID4(e.rng), 0
	return result(Observation{EchoedMessage: ReadyMessage}, 0)
}

// Step echoes the action's message; an action that is not
// {"message": non-empty string} is a pydantic-shaped validation error.
func (e *Environment) Step(ctx context.Context, action json.RawMessage) (openenv.Result, error) {
	a, err := ParseAction(action)
	if err != nil {
		return openenv.Result{}, err
	}
	e.steps++
	return result(echoOf(a.Message), Reward(a.Message))
}

// State returns {"episode_id":…,"step_count":…}.
func (e *Environment) State(ctx context.Context) (json.RawMessage, error) {
	return pyjson.Marshal(State{EpisodeID: &e.episodeID, StepCount: e.steps})
}

// ParseAction validates an echo action as the Python server does.
func ParseAction(data json.RawMessage) (Action, error) {
	v, err := pyjson.Action(data, "EchoAction", "message")
	if err != nil {
		return Action{}, err
	}
	var a Action
	if m, ok := v.Require("message"); ok {
		s, fe := pyjson.String("message", m, 1)
		v.Add(fe...)
		a.Message = s
	}
	return a, v.Err()
}

func result(obs Observation, reward float64) (openenv.Result, error) {
	b, err := pyjson.Marshal(obs)
	if err != nil {
		return openenv.Result{}, err
	}
	return openenv.Result{Observation: b, Reward: &reward}, nil
}
